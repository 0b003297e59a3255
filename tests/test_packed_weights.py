"""Sampling through prepacked (oneDNN) weights: in fp32 the same tokens, in bf16 bf16 linears in an fp32 model;
fresh weights each region, nothing left behind."""

from __future__ import annotations

import pytest
import torch

from rlvr.trainer import packed_weights
from rlvr.trainer.models import load_model
from rlvr.trainer.packed_weights import bf16_supported, can_pack, has_ops, packed_linears
from rlvr.trainer.rollout.sampler import sample
from rlvr.trainer.rollout.sessions import SamplingSettings

needs_packing = pytest.mark.skipif(not has_ops(*packed_weights.PACKING_OPS),
                                   reason="needs oneDNN and its private packing ops (torch.ops.mkldnn)")


@pytest.fixture()
def tiny():
    return load_model("tiny", seed=0)


def _greedy(model, n_tokens=12):
    prompts = [[5, 17, 230, 4], [9, 3]]
    return [s.completion_ids for s in sample(model, prompts, SamplingSettings(n=2, max_new_tokens=n_tokens, greedy=True))]


@needs_packing
def test_packed_sampling_gives_the_same_tokens_and_logits(tiny):
    model, _ = tiny
    ids = torch.tensor([[5, 17, 230, 4, 99]])
    with torch.no_grad():
        dense = model(input_ids=ids).logits
        with packed_linears(model):
            packed = model(input_ids=ids).logits
            packed_tokens = _greedy(model)
    torch.testing.assert_close(packed, dense, rtol=1e-4, atol=1e-4)
    assert packed_tokens == _greedy(model)


@needs_packing
def test_each_region_packs_the_current_weights_and_restores_the_layers(tiny):
    model, _ = tiny
    ids = torch.tensor([[5, 17, 230, 4, 99]])
    linears = [m for m in model.modules() if type(m) is torch.nn.Linear]
    with torch.no_grad():
        with packed_linears(model):
            assert all("forward" in vars(m) for m in linears)
            before = model(input_ids=ids).logits
        assert not any("forward" in vars(m) for m in linears)  # the dense forward is back
        for m in linears:  # what an optimizer step does between two sampling regions
            m.weight.mul_(1.5)
        dense = model(input_ids=ids).logits
        with packed_linears(model):
            after = model(input_ids=ids).logits
    assert not torch.allclose(before, after)  # not a stale packed copy
    torch.testing.assert_close(after, dense, rtol=1e-4, atol=1e-4)
    loss = model(input_ids=ids).logits.sum()  # training after a region: gradients reach every weight
    loss.backward()
    assert all(m.weight.grad is not None for m in linears)


@needs_packing
def test_not_packed_when_disabled_or_not_fp32(tiny):
    model, _ = tiny
    linears = [m for m in model.modules() if type(m) is torch.nn.Linear]
    with packed_linears(model, enabled=False):
        assert not any("forward" in vars(m) for m in linears)
    assert can_pack(model)
    model.to(torch.bfloat16)
    assert not can_pack(model)
    with packed_linears(model):
        assert not any("forward" in vars(m) for m in linears)


@needs_packing
def test_lora_layers_sample_with_their_merged_weight(tiny):
    from rlvr.trainer import lora

    model, _ = tiny
    model = lora.wrap(model, lora.check_options({"rank": 4, "alpha": 8}))
    layers = [m for m in model.modules() if hasattr(m, "lora_B")]
    with torch.no_grad():
        for m in layers:  # peft starts B at 0 (the base model): give the adapters an effect
            m.lora_B["default"].weight.normal_(0, 0.05)
    ids = torch.tensor([[5, 17, 230, 4, 99]])
    with torch.no_grad():
        dense = model(input_ids=ids).logits
        with model.disable_adapter():
            base = model(input_ids=ids).logits
        with packed_linears(model):
            assert all("forward" in vars(m) for m in layers)  # one packed product per LoRA layer
            assert not any("forward" in vars(m.base_layer) or "forward" in vars(m.lora_A["default"]) for m in layers)
            packed = model(input_ids=ids).logits
        with model.disable_adapter(), packed_linears(model):  # adapters off: the base weights alone
            packed_base = model(input_ids=ids).logits
    assert not torch.allclose(dense, base, atol=1e-3)  # the adapters do change the output
    torch.testing.assert_close(packed, dense, rtol=1e-4, atol=1e-4)
    torch.testing.assert_close(packed_base, base, rtol=1e-4, atol=1e-4)
    assert not any("forward" in vars(m) for m in model.modules())  # every layer restored


@needs_packing
def test_a_dora_layer_keeps_its_own_forward_over_a_packed_base(tiny):
    """DoRA's weight is not W + B A (a magnitude rescales it): its layers must not be merged that way."""
    from peft import LoraConfig, get_peft_model

    model, _ = tiny
    model = get_peft_model(model, LoraConfig(r=4, lora_alpha=8, target_modules="all-linear", use_dora=True))
    layers = [m for m in model.modules() if hasattr(m, "lora_B")]
    with torch.no_grad():
        for m in layers:
            m.lora_B["default"].weight.normal_(0, 0.05)
    model.eval()
    ids = torch.tensor([[5, 17, 230, 4, 99]])
    with torch.no_grad():
        dense = model(input_ids=ids).logits
        with packed_linears(model):
            assert not any("forward" in vars(m) for m in layers)
            assert all("forward" in vars(m.base_layer) for m in layers)
            packed = model(input_ids=ids).logits
    torch.testing.assert_close(packed, dense, rtol=1e-4, atol=1e-4)


@needs_packing
@pytest.mark.skipif(not bf16_supported(), reason="oneDNN does not compute in bf16 here (or cannot say)")
def test_bf16_packing_rounds_the_linears_only(tiny):
    """bf16 packs: the linears compute in bf16 (as close to fp32 as autocast's bf16, not equal), their
    outputs and the rest of the model stay fp32, and the dense layers come back after the region."""
    model, _ = tiny
    ids = torch.tensor([[5, 17, 230, 4, 99]])
    linears = [m for m in model.modules() if type(m) is torch.nn.Linear]
    with torch.no_grad():
        dense = model(input_ids=ids).logits
        with torch.autocast("cpu", dtype=torch.bfloat16):
            autocast = model(input_ids=ids).logits.float()
        with packed_linears(model, dtype=torch.bfloat16) as packed:
            assert packed and all("forward" in vars(m) for m in linears)
            hidden = model(input_ids=ids, output_hidden_states=True)
            tokens = _greedy(model)
    assert hidden.logits.dtype == torch.float32 and all(h.dtype == torch.float32 for h in hidden.hidden_states)
    assert not any("forward" in vars(m) for m in linears)
    error, autocast_error = ((x - dense).abs().max().item() for x in (hidden.logits, autocast))
    assert autocast_error / 4 < error < 2 * autocast_error, (error, autocast_error)  # measured: 0.0075, 0.0056
    assert len(tokens) == 2 and all(len(c) == 12 for p in tokens for c in p)


def test_only_fp32_or_bf16_weights_are_packed(tiny):
    model, _ = tiny
    with pytest.raises(ValueError, match="fp32 or bf16"):
        can_pack(model, torch.float16)


def test_a_missing_private_op_means_not_packed(tiny, monkeypatch):
    """Each private op is checked before use: a torch without one samples through the dense layers, no error."""
    model, _ = tiny
    linears = [m for m in model.modules() if type(m) is torch.nn.Linear]
    for missing in ("_reorder_linear_weight", "_linear_pointwise"):
        ops = tuple("_no_such_op" if op == missing else op for op in packed_weights.PACKING_OPS)
        monkeypatch.setattr(packed_weights, "PACKING_OPS", ops)
        assert not can_pack(model)
        with packed_linears(model) as packed:
            assert not packed and not any("forward" in vars(m) for m in linears)
    monkeypatch.setattr(packed_weights, "BF16_OP", "_no_such_op")
    assert not bf16_supported() and not can_pack(model, torch.bfloat16)


def test_the_ops_checked_are_the_ops_called():
    """PACKING_OPS names every private op the module calls (a new call must be guarded too)."""
    import inspect
    import re

    called = set(re.findall(r"torch\.ops\.mkldnn\.(\w+)", inspect.getsource(packed_weights)))
    assert called == set(packed_weights.PACKING_OPS)
    assert all(hasattr(torch.ops.mkldnn, op) for op in called) == has_ops(*called)
