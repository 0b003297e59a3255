"""Asynchronous GRPO on real processes: generation workers are Ray actors of a local Ray instance,
each with its own model. At k = 0 an asynchronous run equals a synchronous one (real SmolLM2 with
LoRA: same metrics, same sampled text, same final adapters); at k = 1 steps train one version
behind with the off-policy correction logged; a step sampled too early is dropped, counted and
sampled again, and the run still equals the synchronous one."""

from __future__ import annotations

import os
from pathlib import Path

import needs
import pytest
import torch

from rlvr.trainer import lora
from rlvr.trainer.config import TrainConfig, load_config
from rlvr.trainer.grpo import GRPOTrainer
from rlvr.trainer.metrics import TIMING, read_jsonl

needs.module("ray")

from rlvr.trainer.async_grpo import AsyncGRPOTrainer  # noqa: E402

TESTS = Path(__file__).resolve().parent
ROOT = TESTS.parent
ASYNC_ONLY = {"policy_version", "staleness", "stale_dropped", "worker_restarts", "is_ratio_mean", "is_ratio_max",
              "is_corrected_frac", "sync_s", "worker_sync_s", "worker_gen_s", "worker_sample_s", "worker_score_s",
              "trainer_gen_s"}
TOY = dict(model="tiny", env="test_trainer_toy_env:Letters-v0", prompts_per_step=4, group_size=8,
           max_new_tokens=8, lr=3e-2, threads=1, progress=False)


@pytest.fixture(autouse=True)
def _tests_importable(monkeypatch):
    """The toy env is imported by module name in the workers too (the pool passes PYTHONPATH on)."""
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(TESTS), os.environ.get("PYTHONPATH", "")]))


def same_as_sync(sync: list[dict], run: list[dict]) -> None:
    assert [r["step"] for r in run] == [r["step"] for r in sync]
    for x, y in zip(sync, run):
        assert {k: v for k, v in y.items() if k not in TIMING | ASYNC_ONLY} == {
            k: v for k, v in x.items() if k not in TIMING}


def test_k0_equals_sync_smollm2(tmp_path):
    """SmolLM2 with LoRA on the `make run` recipe, 1 thread each side: the same completions, the same
    metrics, the same adapters after three steps."""
    overrides = ["steps=3", "prompts_per_step=2", "group_size=4", "eval_prompts=0", "checkpoint_every=0",
                 "threads=1", "progress=false", "warmup_steps=0", "curriculum=[]"]
    config = load_config(ROOT / "configs" / "arith-lora-smollm2.yaml", overrides)
    torch.manual_seed(0)  # LoRA's initial adapters come from torch's global generator: both start as a new process
    sync = GRPOTrainer(config, tmp_path / "sync")
    sync_records = sync.train()
    torch.manual_seed(0)
    run = AsyncGRPOTrainer(load_config(ROOT / "configs" / "arith-lora-smollm2.yaml",
                                       [*overrides, "async={workers: 1, max_staleness: 0}"]), tmp_path / "async")
    records = run.train()
    assert sum(r["groups_trained"] for r in sync_records) > 0  # the comparison covers training, not only sampling
    same_as_sync(sync_records, records)
    assert [r["staleness"] for r in records] == [{"0": 2}] * 3
    assert read_jsonl(tmp_path / "async" / "samples.jsonl") == read_jsonl(tmp_path / "sync" / "samples.jsonl")
    mine, theirs = lora.adapter_state(run.model), lora.adapter_state(sync.model)
    assert mine.keys() == theirs.keys() and all(torch.equal(mine[k], theirs[k]) for k in mine)


@pytest.fixture(scope="module")
def toy_sync(tmp_path_factory):
    return GRPOTrainer(TrainConfig(**TOY, steps=5), tmp_path_factory.mktemp("sync")).train()


def test_one_step_behind_is_corrected(tmp_path):
    """k = 1, one worker: step 0 trains on-policy, every later step one version behind, with the
    behaviour ratio's mean and max, the corrected share and KL(behaviour || current) logged."""
    records = AsyncGRPOTrainer(TrainConfig(**TOY, steps=5, async_={"workers": 1, "max_staleness": 1}),
                               tmp_path).train()
    assert [r["staleness"] for r in records] == [{"0": 4}] + [{"1": 4}] * 4
    assert [r["policy_version"] for r in records] == [0, 0, 1, 2, 3]
    assert records[0]["is_ratio_mean"] is None and records[0]["sampler_kl"] is None
    for r in records[1:]:
        if r["groups_trained"]:
            assert 0 < r["is_ratio_mean"] <= r["is_ratio_max"]
            assert r["sampler_kl"] >= 0 and 0 <= r["is_corrected_frac"] <= 1
    stale = [r for r in records[1:] if r["groups_trained"]]
    assert stale and any(r["sampler_kl"] > 0 for r in stale)  # the policies really differ
    for r in records:  # the worker's time: sampling inside its generator, then the envs' scoring
        assert 0 < r["worker_sample_s"] < r["worker_gen_s"] and r["worker_score_s"] > 0
        assert r["worker_sample_s"] + r["worker_score_s"] == pytest.approx(r["worker_gen_s"])
    prompts = sorted(s["prompt"] for s in read_jsonl(tmp_path / "samples.jsonl"))
    assert prompts == list(range(5 * TOY["prompts_per_step"]))  # every prompt once


def test_mis_masks_what_tis_truncates(tmp_path):
    """The same stale step under both corrections, with the bound at 1: truncation touches only the
    tokens whose ratio is above 1, masking every token whose ratio is not 1, and the updates differ."""
    runs = {}
    for mode in ("tis", "mis"):
        config = TrainConfig(**TOY, steps=2, tis_cap=1.0, correction=mode, async_={"workers": 1, "max_staleness": 1})
        runs[mode] = AsyncGRPOTrainer(config, tmp_path / mode).train()[1]  # step 1: sampled under version 0
    tis, mis = runs["tis"], runs["mis"]
    assert tis["groups_trained"] and tis["staleness"] == mis["staleness"] == {"1": 4}
    assert tis["is_ratio_mean"] == mis["is_ratio_mean"]  # the same tokens and policies
    assert 0 < tis["is_corrected_frac"] < mis["is_corrected_frac"] and mis["is_corrected_frac"] > 0.9
    assert tis["grad_norm"] != mis["grad_norm"]


def test_too_stale_steps_are_dropped_and_sampled_again(tmp_path, toy_sync):
    """Two workers may run one step ahead (ahead: 1) but k = 0: a step sampled under the previous
    version is dropped, counted and sampled again; what trains equals the synchronous run."""
    config = TrainConfig(**TOY, steps=5, async_={"workers": 2, "max_staleness": 0, "ahead": 1})
    records = AsyncGRPOTrainer(config, tmp_path).train()
    assert all(r["staleness"] == {"0": 4} for r in records)
    assert sum(r["stale_dropped"] for r in records) >= 4  # at least one step of four groups
    same_as_sync(toy_sync, records)


def test_trainer_sampling_its_share_keeps_the_sync_run(tmp_path, toy_sync):
    """trainer_prompts: 1 of 4, k = 0: the trainer samples each step's last prompt itself while the worker
    samples the first three; the step's prompts, completions, advantages and updates are the synchronous
    run's. At k = 1 the trainer's share trains on-policy beside the worker's stale three."""
    config = TrainConfig(**TOY, steps=5, async_={"workers": 1, "max_staleness": 0, "trainer_prompts": 1})
    records = AsyncGRPOTrainer(config, tmp_path / "k0").train()
    assert all(r["staleness"] == {"0": 4} for r in records)
    assert all(r["trainer_gen_s"] > 0 for r in records)
    same_as_sync(toy_sync, records)
    config = TrainConfig(**TOY, steps=3, async_={"workers": 1, "max_staleness": 1, "trainer_prompts": 1})
    records = AsyncGRPOTrainer(config, tmp_path / "k1").train()
    assert [r["staleness"] for r in records] == [{"0": 4}, {"1": 3, "0": 1}, {"1": 3, "0": 1}]
    prompts = sorted(s["prompt"] for s in read_jsonl(tmp_path / "k1" / "samples.jsonl"))
    assert prompts == list(range(3 * TOY["prompts_per_step"]))  # every prompt once


@needs.skip_unless(os.geteuid() == 0, "raising a process's priority back from Ray's nice 15 needs root")
def test_workers_sample_at_the_trainers_priority():
    """Ray starts its workers at nice 15, below the trainer; a generation worker is the step's critical
    path and takes the trainer's niceness back (root may raise a priority; a user keeps Ray's, and there
    nothing could fail: the test runs as root, as CI does)."""
    import ray

    from rlvr.trainer.async_workers import WorkerPool

    pool = WorkerPool(TrainConfig(**TOY, steps=1, async_={"workers": 1}))
    try:
        plain = ray.get(ray.remote(num_cpus=0)(lambda: os.getpriority(os.PRIO_PROCESS, 0)).remote())
        assert plain == 15  # Ray's default for its workers, which the generation worker must not keep
        (where,) = ray.get([w.where.remote() for w in pool.workers])
        assert where["niceness"] == os.getpriority(os.PRIO_PROCESS, 0) != plain
    finally:
        pool.close()


def test_async_config_keys():
    """`async:` round-trips through the run's config.yaml under its own name; mistakes are one clear error."""
    from rlvr.trainer.config import from_dict

    config = load_config(None, ["async={workers: 2, max_staleness: 0}", "correction=mis"])
    assert config.async_ == {"workers": 2, "max_staleness": 0, "ahead": 0, "address": None, "worker_cpus": 1,
                             "worker_gpus": None, "trainer_prompts": 0}
    assert "async" in config.to_dict() and from_dict(config.to_dict()) == config
    assert load_config(None, []).async_ is None
    for overrides, message in ((["async={worker: 2}"], "unknown async key"), (["async.workers=0"], "workers"),
                               (["async={}", "replay_fraction=0.5"], "replay"), (["correction=both"], "correction"),
                               (["async={trainer_prompts: 4}", "prompts_per_step=4"], "below prompts_per_step"),
                               (["async={trainer_prompts: 1}", "refill_rounds=1"], "refill_rounds 0")):
        with pytest.raises(ValueError, match=message):
            load_config(None, overrides)
