"""Live reporting of a run to TensorBoard and Weights & Biases (`report_to` in the config).

The JSONL files in the run folder stay the record of a run; a reporter mirrors each step's
metrics, each evaluation and the step's sample completions to the backends the user named.
Both backends are optional extras (`pip install 'rlvr[logging]'`). wandb runs offline unless
the user sets `WANDB_MODE` (e.g. `online`): nothing leaves the machine unless asked for.
"""

from __future__ import annotations

import os
import secrets
from pathlib import Path

BACKENDS = ("tensorboard", "wandb")


def check_backends(backends) -> None:
    if not isinstance(backends, list) or any(b not in BACKENDS for b in backends):
        raise ValueError(f"config: report_to must be a list drawn from {list(BACKENDS)}, got {backends!r}")


def scalars(record: dict, prefix: str = "") -> dict[str, float]:
    """The numeric entries of a metrics record (None, text and nested values are left out)."""
    return {f"{prefix}{k}": float(v) for k, v in record.items()
            if k != "step" and isinstance(v, int | float) and not isinstance(v, bool)}


def samples_markdown(samples: list[dict]) -> str:
    rows = ["| prompt | reward | completion |", "| --- | --- | --- |"]
    for s in samples:
        text = str(s["text"]).replace("|", "\\|").replace("\n", " ")
        rows.append(f"| {s['prompt']} | {s['reward']:.3f} | {text} |")
    return "\n".join(rows)


def _extra_missing(backend: str) -> ImportError:
    return ImportError(f"report_to: {backend} is not installed; install the extra: pip install 'rlvr[logging]'")


class Reporter:
    """Sends metrics to every backend in `backends`; a no-op when the list is empty."""

    def __init__(self, backends: list[str], run_dir: str | Path, config: dict, resume_step: int = 0):
        check_backends(backends)
        run_dir = Path(run_dir)
        self.tb = self.wandb_run = None
        if "tensorboard" in backends:
            try:
                from torch.utils.tensorboard import SummaryWriter
            except ImportError as exc:
                raise _extra_missing("tensorboard") from exc
            # on resume, events logged after the checkpoint by the killed run are purged
            self.tb = SummaryWriter(log_dir=str(run_dir / "tensorboard"), purge_step=resume_step + 1)
        if "wandb" in backends:
            try:
                import wandb
            except ImportError as exc:
                raise _extra_missing("wandb") from exc
            id_file = run_dir / "wandb-id.txt"
            if not id_file.exists():
                id_file.write_text(secrets.token_hex(8))
            self.wandb_run = wandb.init(
                project=os.environ.get("WANDB_PROJECT", "rlvr"), dir=str(run_dir), config=config,
                id=id_file.read_text().strip(), resume="allow", mode=os.environ.get("WANDB_MODE", "offline"))

    def log_step(self, record: dict, samples: list[dict]) -> None:
        step = record["step"]
        values = scalars(record, "train/")
        if self.tb is not None:
            for key, value in values.items():
                self.tb.add_scalar(key, value, step)
            if samples:
                self.tb.add_text("samples", samples_markdown(samples), step)
            self.tb.flush()
        if self.wandb_run is not None:
            # text in the history row, not a wandb.Table: a table is staged in a process-wide temp
            # folder that other code cleaning /tmp can remove mid-run
            self.wandb_run.log({**values, "samples": samples_markdown(samples)}, step=step)

    def log_eval(self, result: dict) -> None:
        values = scalars(result, "eval/")
        if self.tb is not None:
            for key, value in values.items():
                self.tb.add_scalar(key, value, result["step"])
            self.tb.flush()
        if self.wandb_run is not None:
            self.wandb_run.log(values, step=result["step"])

    def close(self) -> None:
        if self.tb is not None:
            self.tb.close()
        if self.wandb_run is not None:
            self.wandb_run.finish()
