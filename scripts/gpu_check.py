"""`make gpu-check`: the trainer's GPU paths, run once on one NVIDIA GPU (a few minutes, no network).

Steps, each asserting the device and dtype of every tensor it relies on:
- `decisions`: trainer/devices.py's answers on this machine, and the trainer's device taken from them;
- `grpo-fp32-lora`, `grpo-bf16-lora`: two GRPO steps on the GPU with LoRA, in fp32 (`autocast: off`) and
  under bf16 autocast (fp32 master weights, bf16 logits);
- `fsdp-one-gpu`: two full fine-tuning steps with `parallel: fsdp` (FSDP2) in a one-process NCCL group;
- `async-one-worker`: two async steps with one Ray worker on the GPU (it asks Ray for it; the weights reach it
  as CPU tensors), where Ray is installed: its wheel is too large to travel with a device run;
- `eval-model`: `rlvr eval --model` samples on the GPU, and the whole command runs to its end.
Without CUDA every CUDA step prints SKIP and why, so the script runs to its end anywhere; `--on-cpu` runs those
steps on the CPU instead (gloo for FSDP), which checks this script without a GPU.

The env is a toy one defined here (the share of lowercase letters in a completion: a random tiny model gets
rewards with spread, so every step trains), the model a tiny random Llama with SmolLM2's tokenizer, written
as a transformers folder (`--write-model DIR`; `make gpu-check-bundle` puts one into build/gpu-check with the
wheels a bare torch + transformers + peft image lacks). Ends with one `RESULT {json}` line; exit status 1 if a
step failed.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import socket
import sys
import tempfile
import time
import traceback
from pathlib import Path

import gymnasium as gym
import torch

HERE = Path(__file__).resolve().parent
BUNDLE = Path(os.environ.get("RLVR_GPU_CHECK_DIR", HERE.parent / "build" / "gpu-check"))
ENV_ID = "gpu_check:Letters-v0"  # imported by module name, on Ray workers too (PYTHONPATH carries this folder)


class Letters(gym.Env):
    """One turn: reward = the share of the completion's characters that are lowercase ASCII letters."""

    metadata: dict = {"render_modes": []}

    def __init__(self):
        from rlvr.envs.spaces import AnyText, Messages

        self.observation_space, self.action_space = Messages(), AnyText()

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        n = int(self.np_random.integers(1, 1000))
        text = f"Write three words about the number {n}."
        return [{"role": "user", "content": text}], {"task_id": f"n{n}", "prompt_text": text}

    def _score(self, completion: str) -> tuple[float, dict]:
        share = sum("a" <= ch <= "z" for ch in completion) / len(completion) if completion else 0.0
        return share, {"correct": share >= 0.9}

    def step(self, action):
        reward, info = self._score(action)
        return [{"role": "assistant", "content": action}], reward, True, False, info

    def score_group(self, completions):
        return [self._score(c) for c in completions]


if "Letters-v0" not in gym.registry:
    gym.register("Letters-v0", entry_point=Letters)


def _local(tensor: torch.Tensor) -> torch.Tensor:
    """A sharded (FSDP2) parameter's local shard; any other tensor as it is."""
    return tensor.to_local() if hasattr(tensor, "to_local") else tensor


class Skip(Exception):
    """A step that cannot run here; its message says why."""


def write_model(folder: Path) -> Path:
    """The tiny random Llama of the tests (`load_model("tiny")`, its weights rounded to bf16) with its tokenizer,
    as a transformers folder."""
    from rlvr.trainer.models import load_model

    model, tokenizer = load_model("tiny", seed=0)
    model.to(torch.bfloat16).save_pretrained(folder)  # half the bytes to carry; `load_model` reads it back in fp32
    tokenizer.save_pretrained(folder)
    return folder


def model_folder() -> str:
    carried = BUNDLE / "tiny-model"
    if (carried / "config.json").exists():
        return str(carried)
    return str(write_model(Path(tempfile.mkdtemp(prefix="rlvr-gpu-check-model-"))))


class Check:
    def __init__(self, on_cpu: bool):
        self.on_cpu = on_cpu
        self.kind = "cpu" if on_cpu else "cuda"
        self._folder: str | None = None
        self.results: dict[str, dict] = {}

    @property
    def folder(self) -> str:
        """The model folder, written on first use (a machine whose CUDA steps all skip needs none)."""
        if self._folder is None:
            self._folder = model_folder()
        return self._folder

    def need_device(self) -> None:
        if not self.on_cpu and not torch.cuda.is_available():
            raise Skip("no CUDA device here (torch.cuda.is_available() is False)")

    def config(self, **overrides):
        from rlvr.trainer.config import from_dict

        base = dict(model=self.folder, env=ENV_ID, prompts_per_step=2, group_size=4, max_new_tokens=8, steps=2,
                    lr=3e-2, beta=0.0, eval_prompts=0, checkpoint_every=0, progress=False, seed=0)
        return from_dict({**base, **overrides})

    def run(self, name: str, step) -> None:
        t0 = time.perf_counter()
        try:
            detail = step()
        except Skip as why:
            self.results[name] = {"status": "skip", "why": str(why)}
            print(f"SKIP {name}: {why}", flush=True)
            return
        except Exception as exc:  # every step is reported, and the next one still runs
            traceback.print_exc()
            self.results[name] = {"status": "fail", "error": f"{type(exc).__name__}: {exc}"}
            print(f"FAIL {name}: {type(exc).__name__}: {exc}", flush=True)
            return
        seconds = round(time.perf_counter() - t0, 1)
        self.results[name] = {"status": "pass", "s": seconds, **(detail or {})}
        print(f"PASS {name} ({seconds} s): {json.dumps(detail)}", flush=True)

    # --- steps -----------------------------------------------------------------------------------------

    def decisions(self) -> dict:
        from rlvr.trainer import devices, distributed

        cuda = torch.cuda.is_available()
        bf16 = cuda and torch.cuda.is_bf16_supported()
        device = devices.trainer_device(cuda, int(os.environ.get("LOCAL_RANK", "0")))
        assert distributed.device() == torch.device(device), (distributed.device(), device)
        return {"cuda": cuda, "gpu": torch.cuda.get_device_name(0) if cuda else None, "torch": torch.__version__,
                "trainer_device": device, "eval_device": devices.eval_device(cuda),
                "vllm_dtype": devices.engine_dtype(device.split(":")[0], None, bf16),
                "worker_gpus": devices.worker_gpus(None, device)}

    def _trainer(self, cfg, cls=None):
        from rlvr.trainer.grpo import GRPOTrainer
        from rlvr.trainer.models import load_model

        model, tokenizer = load_model(self.folder)
        assert all(p.dtype == torch.float32 for p in model.parameters())
        run_dir = tempfile.mkdtemp(prefix="rlvr-gpu-check-run-")
        return (cls or GRPOTrainer)(cfg, run_dir, model=model, tokenizer=tokenizer)

    def _on_device(self, trainer) -> None:
        assert trainer.device.type == self.kind, trainer.device
        wrong = [(n, p.device, p.dtype) for n, p in trainer.model.named_parameters()
                 if p.device.type != self.kind or p.dtype != torch.float32]
        assert not wrong, f"parameters off {self.kind} fp32: {wrong[:3]}"
        for state in trainer.optimizer.state.values():
            for value in state.values():
                if torch.is_tensor(value) and value.dim():
                    assert value.device.type == self.kind and value.dtype == torch.float32, (value.device, value.dtype)

    def _logits_dtype(self, trainer, autocast: bool) -> torch.dtype:
        ids = torch.tensor([[1, 2, 3, 4]], device=trainer.device)
        with torch.no_grad(), torch.autocast(trainer.device.type, dtype=torch.bfloat16, enabled=autocast):
            logits = trainer.model(input_ids=ids).logits
        assert logits.device.type == self.kind
        return logits.dtype

    def _train(self, trainer) -> dict:
        before = {n: p.detach().clone() for n, p in trainer.model.named_parameters() if p.requires_grad}
        if self.kind == "cuda":
            torch.cuda.reset_peak_memory_stats()
        records = trainer.train()
        assert len(records) == trainer.config.steps, len(records)
        assert sum(r["groups_trained"] for r in records), "no group with signal: nothing trained"
        assert all(math.isfinite(r["grad_norm"]) for r in records), [r["grad_norm"] for r in records]
        after = dict(trainer.model.named_parameters())
        moved = sum(not torch.equal(_local(before[n]), _local(after[n].detach())) for n in before)
        assert moved, "no trained parameter changed in two steps"
        self._on_device(trainer)
        out = {"steps": len(records), "grad_norm": [round(r["grad_norm"], 5) for r in records],
               "reward_mean": [round(r["reward_mean"], 3) for r in records], "params_changed": moved}
        if self.kind == "cuda":
            out["peak_mib"] = round(torch.cuda.max_memory_allocated() / 2**20, 1)
        return out

    def grpo_fp32_lora(self) -> dict:
        self.need_device()
        trainer = self._trainer(self.config(autocast="off", lora={"rank": 4, "alpha": 8}))
        assert not trainer.use_bf16 and not trainer.sample_bf16
        self._on_device(trainer)
        assert all(".lora_" in n for n, p in trainer.model.named_parameters() if p.requires_grad)
        assert self._logits_dtype(trainer, autocast=False) == torch.float32
        return self._train(trainer)

    def grpo_bf16_lora(self) -> dict:
        self.need_device()
        if not self.on_cpu and not torch.cuda.is_bf16_supported():
            raise Skip(f"{torch.cuda.get_device_name(0)} has no bf16")
        trainer = self._trainer(self.config(autocast="auto" if not self.on_cpu else "bf16",
                                            lora={"rank": 4, "alpha": 8}))
        assert trainer.use_bf16 and trainer.sample_bf16  # auto means bf16 on a GPU that has it
        self._on_device(trainer)  # master weights stay fp32 under autocast
        assert self._logits_dtype(trainer, autocast=True) == torch.bfloat16
        return self._train(trainer)

    def fsdp_one_gpu(self) -> dict:
        self.need_device()
        import torch.distributed as dist
        from torch.distributed.tensor import DTensor

        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK="0", LOCAL_RANK="0", WORLD_SIZE="1")
        if self.kind == "cuda":
            torch.cuda.set_device(0)
        dist.init_process_group("nccl" if self.kind == "cuda" else "gloo", rank=0, world_size=1)
        try:
            trainer = self._trainer(self.config(parallel="fsdp", autocast="off"))
            assert trainer.fsdp is not None
            sharded = [n for n, p in trainer.model.named_parameters() if isinstance(p, DTensor)]
            assert sharded and len(sharded) == len(list(trainer.model.parameters())), "not every weight is sharded"
            detail = self._train(trainer)
            return {**detail, "sharded_params": len(sharded), "backend": dist.get_backend()}
        finally:
            dist.destroy_process_group()
            for key in ("MASTER_ADDR", "MASTER_PORT", "RANK", "LOCAL_RANK", "WORLD_SIZE"):
                os.environ.pop(key, None)

    def async_one_worker(self) -> dict:
        self.need_device()
        try:
            import ray
        except ImportError:
            raise Skip("Ray is not installed here: its wheel (79 MB for CPython 3.11 on x86-64) does not fit in the "
                       "64 MiB a device run carries, so the async path is checked only where Ray is installed") from None
        from rlvr.trainer.async_grpo import AsyncGRPOTrainer
        from rlvr.trainer.async_workers import WorkerPool

        os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (str(HERE), os.environ.get("PYTHONPATH")) if p)
        cfg = self.config(lora={"rank": 4, "alpha": 8}, autocast="off", **{"async": {"workers": 1}})
        trainer = self._trainer(cfg, AsyncGRPOTrainer)
        published = trainer._weights()
        assert published and all(t.device.type == "cpu" and not t.requires_grad for t in published.values())
        pool = WorkerPool(cfg, str(trainer.device))  # where the worker samples, seen from inside it
        try:
            where = ray.get(pool.workers[0].where.remote())
        finally:
            pool.close()
        assert where["device"].startswith(self.kind), where
        assert bool(where["gpu_ids"]) == (self.kind == "cuda"), where
        detail = self._train(trainer)
        return {**detail, "worker": {k: where[k] for k in ("device", "gpu_ids")}}

    def eval_model(self) -> dict:
        self.need_device()
        from rlvr.cli import main
        from rlvr.evaluation.cli import _model_generator

        if self.on_cpu:  # the eval device is the first GPU where there is one
            assert not torch.cuda.is_available()
        generator, _ = _model_generator(argparse.Namespace(model=self.folder, generator="local", seed=0))
        params = {(p.device.type, p.dtype) for p in generator.model.parameters()}
        assert params == {(self.kind, torch.float32)}, params
        out = Path(tempfile.mkdtemp(prefix="rlvr-gpu-check-eval-")) / "samples.jsonl"
        status = main(["eval", "--model", self.folder, "--env", "rlvr/Arithmetic-v0", "-n", "2", "--limit", "2",
                       "--max-new-tokens", "8", "--no-progress", "--json", "--output", str(out)])
        assert status == 0, status
        samples = [json.loads(line) for line in out.read_text().splitlines()]
        assert len(samples) == 4, len(samples)
        return {"samples": len(samples)}


STEPS = ("decisions", "grpo_fp32_lora", "grpo_bf16_lora", "fsdp_one_gpu", "async_one_worker", "eval_model")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--on-cpu", action="store_true", help="run the CUDA steps on the CPU (checks this script)")
    parser.add_argument("--write-model", metavar="DIR", help="write the tiny model folder to DIR and exit")
    parser.add_argument("--only", action="append", choices=[s.replace("_", "-") for s in STEPS],
                        help="run only this step (repeatable)")
    args = parser.parse_args(argv)
    if args.write_model:
        print(write_model(Path(args.write_model)))
        return 0
    t0 = time.perf_counter()
    check = Check(args.on_cpu)
    for name in STEPS:
        if not args.only or name.replace("_", "-") in args.only:
            check.run(name.replace("_", "-"), getattr(check, name))
    failed = [n for n, r in check.results.items() if r["status"] == "fail"]
    print("RESULT " + json.dumps({"target": check.kind, "failed": failed, "s": round(time.perf_counter() - t0, 1),
                                  "steps": check.results}))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
