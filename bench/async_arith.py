#!/usr/bin/env python
"""Asynchronous against synchronous GRPO on the `make run` recipe, for the same wall-clock budget.

Trains configs/arith-lora-smollm2.yaml (two-digit addition, LoRA) at each seed twice on the same
inputs: `sync`, the synchronous trainer with 2 torch threads, and `async`, one generation worker
(a Ray actor, 1 thread) beside the trainer (1 thread) with max_staleness 1. Each run has
`--minutes` of training time (max_minutes: held-out evaluations not counted). Greedy accuracy on
`--eval-prompts` held-out sums is measured before training, every `--eval-every` steps and after, on
copies of the adapters taken at those steps and evaluated once the run is over (an async arm's worker
would otherwise go on sampling through each untimed evaluation).
Reports each run's accuracy curve against training minutes, the minutes to 0.8, the final
accuracy, steps per minute and, for async runs, where the time went: the trainer's waiting for
groups, its weight publishing and its training; the worker's sampling + scoring and weight loading.

    python bench/async_arith.py [--seeds 0,1,2] [--minutes 30] [--address HOST:PORT] [--set key=value ...]

Each seed's sync run is followed by its async run. `--keep` reuses every run already finished
with the same settings (its summary.json), so the three hours can be spread over several sittings;
each summary records its load, when it finished and the commit it ran. The summaries measured so far
are kept in bench/results/async_arith/ (only summary.json is tracked there), so that a sitting on a
fresh machine picks them up: `--keep --run-dir bench/results/async_arith` (the two-node runs: async_arith_2node).
`--address` runs the worker on an existing Ray cluster (e.g. tests/local_ray_cluster.py's two nodes).
`--trainer-prompts m` lets the async arm's trainer sample the last m of each step's prompts itself, under
its current weights, while the worker samples the rest (`async.trainer_prompts`): with one core each, the
trainer's core samples instead of waiting.
Ends with `RESULT {"seeds": [...], "sync_minutes_to_0.8": [...], "async_minutes_to_0.8": [...],
"median_time_ratio": ..., "sync_accuracy_after": [...], "async_accuracy_after": [...], ...}`
(median_time_ratio: the median over seeds where both runs reached 0.8 of async / sync minutes; null
if no seed did).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TARGET = 0.8


def evaluated_after_the_run(base):
    """`base` with its held-out evaluations moved after the run. During training an evaluation only
    copies the adapters (milliseconds); `evaluate_snapshots` evaluates each copy once the run is over.
    Evaluated in the run, an async arm's worker samples the next step while the trainer evaluates:
    work that no timed minute counts and that the sync arm never gets (about one step per evaluation)."""
    from rlvr.trainer import lora

    class Trainer(base):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            self.snapshots = []  # (step, adapter copy) of each evaluation step

        def _evaluate(self):
            state = {k: v.detach().clone() for k, v in lora.adapter_state(self.model).items()}
            self.snapshots.append((self.step, state))

        def evaluate_snapshots(self) -> None:
            for step, state in self.snapshots:
                lora.load_adapter_state(self.model, state)
                self.step = step
                super()._evaluate()

    return Trainer


def commit() -> str:
    """The checkout's commit, marked `+changes` when the work tree differs from it."""
    def git(*args: str) -> str:
        return subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True).stdout.strip()

    return git("rev-parse", "--short", "HEAD") + ("+changes" if git("status", "--porcelain", "--untracked-files=no") else "")


def train_one(mode: str, seed: int, args) -> dict:
    import torch

    from rlvr.trainer.async_grpo import AsyncGRPOTrainer
    from rlvr.trainer.config import load_config
    from rlvr.trainer.grpo import GRPOTrainer

    overrides = ["steps=5000", f"seed={seed}", f"eval_prompts={args.eval_prompts}", f"eval_every={args.eval_every}",
                 f"max_minutes={args.minutes}", "progress=false", "checkpoint_every=0"]
    if mode == "sync":
        overrides.append("threads=2")
    else:
        address = f", address: '{args.address}'" if args.address else ""
        overrides += ["threads=1", f"async={{workers: 1, max_staleness: 1, worker_cpus: 1, "
                                   f"trainer_prompts: {args.trainer_prompts}{address}}}"]
    config = load_config(ROOT / "configs" / "arith-lora-smollm2.yaml", [*overrides, *args.overrides])
    run_dir = Path(args.run_dir) / f"{mode}-seed{seed}"
    settings = {"overrides": [*overrides, *args.overrides], "eval_prompts": args.eval_prompts}
    done = run_dir / "summary.json"
    if args.keep and done.exists():
        summary = json.loads(done.read_text())
        if summary.get("settings") == settings:
            print(f"[{mode} seed {seed}] kept from {done}", flush=True)
            return summary
    shutil.rmtree(run_dir, ignore_errors=True)
    load_before, ran = os.getloadavg()[0], commit()  # the code as the run starts
    trainer = evaluated_after_the_run(AsyncGRPOTrainer if mode == "async" else GRPOTrainer)(config, run_dir)
    t0 = time.perf_counter()
    records = trainer.train()
    wall = time.perf_counter() - t0
    torch.set_num_threads(2)  # untimed: both arms evaluate their copies on both cores (the async trainer trained on one)
    trainer.evaluate_snapshots()
    elapsed, minutes_at = 0.0, {0: 0.0}
    for r in records:
        elapsed += r["step_s"] / 60
        minutes_at[r["step"]] = elapsed
    curve = [(round(minutes_at.get(e["step"], elapsed), 2), e["accuracy"]) for e in trainer.evals.read()]
    reached = [m for m, acc in curve if acc >= TARGET]
    summary = {"mode": mode, "seed": seed, "steps": len(records), "minutes": round(elapsed, 2),
               "steps_per_minute": round(len(records) / elapsed, 2) if elapsed else None,
               "accuracy_after": curve[-1][1] if curve else None, f"minutes_to_{TARGET}": reached[0] if reached else None,
               "curve": curve, "wall_minutes": round(wall / 60, 2), "load_before": round(load_before, 2),
               "load_after": round(os.getloadavg()[0], 2), "finished": time.strftime("%Y-%m-%d %H:%M"),
               "commit": ran, "settings": settings}
    if mode == "async":
        total = lambda key: round(sum(r[key] for r in records), 1)  # noqa: E731
        summary["time_s"] = {"trainer_waiting": round(total("gen_s") - total("trainer_gen_s"), 1),
                             "trainer_sampling_scoring": total("trainer_gen_s"), "trainer_publishing": total("sync_s"),
                             "trainer_training": round(total("step_s") - total("gen_s") - total("sync_s"), 1),
                             "worker_sampling_scoring": total("worker_gen_s"), "worker_sampling": total("worker_sample_s"),
                             "worker_scoring": total("worker_score_s"), "worker_loading": total("worker_sync_s")}
        summary["staleness"] = {k: sum(r["staleness"].get(k, 0) for r in records) for k in ("0", "1")}
        summary["stale_dropped"] = sum(r["stale_dropped"] for r in records)
        ratios = [r["is_ratio_max"] for r in records if r["is_ratio_max"] is not None]
        summary["is_ratio_max"] = max(ratios) if ratios else None
        corrected = [r["is_corrected_frac"] for r in records if r["is_corrected_frac"] is not None]
        summary["is_corrected_frac_mean"] = statistics.fmean(corrected) if corrected else None
    print(f"[{mode} seed {seed}] {json.dumps(summary)}", flush=True)
    (run_dir / "summary.json").write_text(json.dumps(summary))
    return summary


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", default="0,1,2")
    parser.add_argument("--minutes", type=float, default=30.0)
    parser.add_argument("--eval-prompts", type=int, default=200)
    parser.add_argument("--eval-every", type=int, default=10)
    parser.add_argument("--address", default=None, help="an existing Ray cluster for the worker")
    parser.add_argument("--trainer-prompts", type=int, default=0,
                        help="async arm: prompts of each step's eight the trainer samples itself (async.trainer_prompts)")
    parser.add_argument("--run-dir", default=str(ROOT / "runs" / "async_arith"))
    parser.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE")
    parser.add_argument("--keep", action="store_true",
                        help="reuse a run whose summary.json has the same settings (a bench split over several sittings)")
    args = parser.parse_args()
    seeds = [int(s) for s in args.seeds.split(",")]
    runs = {"sync": [], "async": []}
    for seed in seeds:  # the two arms of a seed back to back, so that a change in the machine's load hits both
        for mode in runs:
            runs[mode].append(train_one(mode, seed, args))
    key = f"minutes_to_{TARGET}"
    ratios = [a[key] / s[key] for s, a in zip(runs["sync"], runs["async"]) if a[key] is not None and s[key]]
    result = {
        "seeds": seeds, "minutes": args.minutes,
        f"sync_{key}": [r[key] for r in runs["sync"]], f"async_{key}": [r[key] for r in runs["async"]],
        "median_time_ratio": round(statistics.median(ratios), 3) if ratios else None,
        "sync_accuracy_after": [r["accuracy_after"] for r in runs["sync"]],
        "async_accuracy_after": [r["accuracy_after"] for r in runs["async"]],
        "sync_steps_per_minute": [r["steps_per_minute"] for r in runs["sync"]],
        "async_steps_per_minute": [r["steps_per_minute"] for r in runs["async"]],
        "eval_prompts": args.eval_prompts, "trainer_prompts": args.trainer_prompts,
    }
    print("RESULT " + json.dumps(result), flush=True)


if __name__ == "__main__":
    main()
