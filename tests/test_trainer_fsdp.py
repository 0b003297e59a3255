"""FSDP2 (`parallel: fsdp`) on CPU: 2 processes over gloo make the same updates as one process
(replicated, unsharded) on the same batch, a sharded run resumes from its checkpoint exactly, and
ranks that need different numbers of refill rounds (`refill_rounds`) stop together."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import gymnasium as gym
import pytest
import torch
import yaml
from test_trainer_toy_env import Letters

from rlvr.trainer.config import TrainConfig
from rlvr.trainer.grpo import GRPOTrainer
from rlvr.trainer.metrics import TIMING, read_jsonl

TESTS = Path(__file__).resolve().parent
# KL to a reference, two optimisation passes (old log-probs), batch-scaled rewards: every cross-rank path
SETTINGS = dict(model="tiny", env="test_trainer_toy_env:Letters-v0", prompts_per_step=4, group_size=8,
                max_new_tokens=8, lr=3e-2, min_lr_ratio=1.0, threads=1, progress=False, checkpoint_every=1,
                scale_rewards="batch", beta=0.05, mu=2)


class FlatFirst(Letters):
    """The toy env, except that prompts whose env seed is below `flat` score every completion 0.5:
    their groups carry no signal, so the rank that drew them refills and the other does not."""

    def __init__(self, flat: int = 0, **kwargs):
        super().__init__(**kwargs)
        self.flat, self.flat_now = flat, False

    def reset(self, *, seed=None, options=None):
        self.flat_now = seed is not None and seed < self.flat
        return super().reset(seed=seed, options=options)

    def _score(self, completion):
        value, info = super()._score(completion)
        return (0.5, {**info, "correct": False}) if self.flat_now else (value, info)


if "FlatFirst-v0" not in gym.registry:
    gym.register("FlatFirst-v0", entry_point=FlatFirst)


def _torchrun(config: Path, run_dir: Path, *extra: str, timeout: float = 300) -> None:
    """Two ranks under torchrun; --standalone lets the rendezvous take a free port (a fixed one collides
    with a concurrent test run). Past `timeout` (a deadlock) every process of the launch is killed."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(TESTS), os.environ.get("PYTHONPATH", "")])}
    proc = subprocess.Popen(
        [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2",
         "-m", "rlvr", "train", "--config", str(config), "--run-dir", str(run_dir), *extra],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True)
    try:
        out, _ = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, _ = proc.communicate()
        pytest.fail(f"torchrun still running after {timeout} s (deadlocked ranks?):\n{out[-3000:]}")
    assert proc.returncode == 0, out[-3000:]


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
    assert resumed[0] == first[0]  # step 1 is the first run's row, timings included: resumed, not run again
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


def test_fsdp_ranks_refill_together(tmp_path):
    """Rank 0 draws prompts 0 and 1, which carry no signal, and refills them with prompts 4 and 5; rank 1's
    prompts 2 and 3 do. The refill round all-gathers the weights (FSDP), so rank 1 must take part in it
    although it needs nothing: a rank that left the loop alone would deadlock the run. The two ranks then
    train what one process trains on the same prompts."""
    settings = dict(SETTINGS, env="test_trainer_fsdp:FlatFirst-v0", env_kwargs={"flat": 2}, refill_rounds=1,
                    steps=1, beta=0.0, mu=1, scale_rewards="group", checkpoint_every=0)
    GRPOTrainer(TrainConfig(**settings), tmp_path / "one").train()
    single = read_jsonl(tmp_path / "one" / "metrics.jsonl")
    assert single[0]["groups_trained"] == 4 and single[0]["zero_var_frac"] == pytest.approx(2 / 6)
    config = tmp_path / "refill.yaml"
    config.write_text(yaml.safe_dump({**settings, "parallel": "fsdp"}))
    _torchrun(config, tmp_path / "two", timeout=240)
    _close(read_jsonl(tmp_path / "two" / "metrics.jsonl")[0], single[0])
