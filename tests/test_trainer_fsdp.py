"""FSDP2 (`parallel: fsdp`) on CPU: 2 processes over gloo make the same updates as one process
(replicated, unsharded) on the same batch, and a sharded run resumes from its checkpoint exactly."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import yaml

from rlvr.trainer.config import TrainConfig
from rlvr.trainer.grpo import GRPOTrainer
from rlvr.trainer.metrics import read_jsonl

TESTS = Path(__file__).resolve().parent
TIMING = {"step_s", "gen_s", "tokens_per_s"}
# KL to a reference, two optimisation passes (old log-probs), batch-scaled rewards: every cross-rank path
SETTINGS = dict(model="tiny", env="test_trainer_toy_env:Letters-v0", prompts_per_step=4, group_size=8,
                max_new_tokens=8, lr=3e-2, min_lr_ratio=1.0, threads=1, progress=False, checkpoint_every=1,
                scale_rewards="batch", beta=0.05, mu=2)


def _torchrun(config: Path, run_dir: Path, *extra: str) -> None:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(TESTS), os.environ.get("PYTHONPATH", "")])}
    done = subprocess.run(
        [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "2", "--master_port", "29547",
         "-m", "rlvr", "train", "--config", str(config), "--run-dir", str(run_dir), *extra],
        env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, (done.stdout + done.stderr)[-3000:]


def _close(a: dict, b: dict) -> None:
    a, b = ({k: v for k, v in r.items() if k not in TIMING} for r in (a, b))
    assert a.keys() == b.keys()
    for key, value in a.items():
        expected = pytest.approx(b[key], rel=1e-5, abs=1e-9) if isinstance(value, float) else b[key]
        assert value == expected, key


def test_fsdp_two_processes_update_like_one_and_resume(tmp_path):
    single = GRPOTrainer(TrainConfig(**SETTINGS, steps=2), tmp_path / "one")
    start = {k: v.clone() for k, v in single.model.state_dict().items()}
    single.train()
    reference = read_jsonl(tmp_path / "one" / "metrics.jsonl")

    config = tmp_path / "fsdp.yaml"
    config.write_text(yaml.safe_dump({**SETTINGS, "steps": 1, "parallel": "fsdp"}))
    _torchrun(config, tmp_path / "two")
    first = read_jsonl(tmp_path / "two" / "metrics.jsonl")
    _close(first[0], reference[0])
    saved = torch.load(tmp_path / "two" / "checkpoint.pt", weights_only=False)
    assert set(saved["model"]) == set(start)  # whole weights, named as the unsharded model's
    assert saved["model"]["model.layers.0.mlp.up_proj.weight"].shape == start["model.layers.0.mlp.up_proj.weight"].shape

    shutil.copytree(tmp_path / "two", tmp_path / "resumed")
    _torchrun(config, tmp_path / "resumed", "--resume", "--set", "steps=2")
    resumed = read_jsonl(tmp_path / "resumed" / "metrics.jsonl")
    assert [r["step"] for r in resumed] == [1, 2]
    _close(resumed[1], reference[1])
    two = torch.load(tmp_path / "resumed" / "checkpoint.pt", weights_only=False)["model"]
    moved = 0.0
    for name, value in single.model.state_dict().items():
        # Adam turns last-bit differences of a summation order into ~1e-5; a wrong gradient (a shard
        # missing, a mean instead of a sum) moves weights by ~lr = 3e-2
        assert torch.allclose(two[name], value, atol=1e-4, rtol=0), name
        moved = max(moved, float((value - start[name]).abs().max()))
    assert moved > 1e-2


def test_fsdp_needs_several_processes(tmp_path):
    with pytest.raises(ValueError, match="torchrun"):
        GRPOTrainer(TrainConfig(**SETTINGS, steps=1, parallel="fsdp"), tmp_path / "alone")
    with pytest.raises(ValueError, match="lora with parallel: fsdp"):
        TrainConfig(**SETTINGS, parallel="fsdp", lora={"rank": 4})
