"""Sampling on a CPU through weights prepacked for oneDNN, in fp32 or bf16.

A decode step multiplies a few rows (G x prompts) by every weight of the model. At so few rows
the default fp32 GEMM is slow; oneDNN, given each weight reordered once into the blocked format
it picks for that many rows, is not. The layers call oneDNN's linear on dense activations
(`mkldnn::_linear_pointwise`, the kernel torch.compile's CPU backend uses), so no activation is
converted in and out of oneDNN's layout: a SmolLM2-135M sampling loop at 8 rows x 32 tokens took
1.07 s here, against 1.52 s converting each activation for `mkldnn_linear` on plain-format weights
and 1.98 s through the dense GEMM, with the same tokens. The weights change every step, so the
packed copies are made when a sampling region opens and dropped when it closes (an extra copy of
the linear weights while it is open); packing SmolLM2's 211 linears costs 0.1 s.
Nothing inside may need gradients: a packed layer is a plain inference kernel.

bf16 sampling (`sample_dtype: bf16`) packs bf16 copies where oneDNN computes in bf16 (AVX-512, and
AMX where the CPU has it): each linear casts its input to bf16 and its output back, so the rest of
the model (norms, attention, the residual stream) stays fp32. On one thread of this machine (AMX) a
SmolLM2 MLP projection at 32 rows took 80 us against 418 us packed in fp32 and 139 us under bf16
autocast, where a decode step of a few rows is compute-bound.
"""

from __future__ import annotations

import contextlib
from functools import partial

import torch

PACKING_OPS = ("_reorder_linear_weight", "_linear_pointwise")  # the private oneDNN ops the packed layers call
BF16_OP = "_is_mkldnn_bf16_supported"


def has_ops(*names: str) -> bool:
    """Whether this torch build has oneDNN and each private op `names` in `torch.ops.mkldnn` (private: a build
    or a later torch may lack one, and a missing op must mean "not packed", never an error mid-sampling)."""
    return torch.backends.mkldnn.is_available() and all(hasattr(torch.ops.mkldnn, name) for name in names)


def bf16_supported() -> bool:
    """Whether oneDNN computes in bf16 on this CPU (False where the op that says so is missing)."""
    return has_ops(BF16_OP) and bool(getattr(torch.ops.mkldnn, BF16_OP)())


def packs_bf16() -> bool:
    """Whether this torch and CPU can sample through packed bf16 weights (oneDNN's packing ops, bf16 compute)."""
    return has_ops(*PACKING_OPS) and bf16_supported()


def can_pack(model: torch.nn.Module, dtype: torch.dtype = torch.float32) -> bool:
    """fp32 weights on a CPU with oneDNN and its packing ops, and for `dtype` bf16 a CPU whose oneDNN computes
    in bf16 (GPU sampling has its own fast paths)."""
    if dtype not in (torch.float32, torch.bfloat16):
        raise ValueError(f"weights are packed in fp32 or bf16, not {dtype}")
    if not (packs_bf16() if dtype == torch.bfloat16 else has_ops(*PACKING_OPS)):
        return False
    weight = next((m.weight for m in model.modules() if type(m) is torch.nn.Linear), None)
    return weight is not None and weight.device.type == "cpu" and weight.dtype == torch.float32


@contextlib.contextmanager
def packed_linears(model: torch.nn.Module, enabled: bool = True, rows: int | None = None,
                   dtype: torch.dtype = torch.float32):
    """Within the block, every `nn.Linear` of `model` computes with a packed copy of its weight, in
    `dtype` (fp32 or bf16); the block is given whether the layers were packed (False where `can_pack`
    says no: they then compute as they would without it).

    A peft LoRA layer with active adapters computes with one packed copy of its merged weight,
    W + the adapters' B A scaled, instead of its base layer plus the two adapter products: a
    LoRA decode step is then as cheap as a full model's (dropout on the adapters' input, a
    training-time regulariser, is not applied).
    `rows`: how many rows a decode step multiplies (oneDNN picks the weight's format for it; a
    wrong guess costs speed, never correctness)."""
    if not (enabled and can_pack(model, dtype)):
        yield False
        return
    forward = _packed_forward if dtype == torch.float32 else _packed_bf16_forward
    patched, inside_lora = [], set()
    try:
        with torch.no_grad():
            for module in model.modules():
                if id(module) in inside_lora:
                    continue
                if _active_lora(module):
                    inside_lora.update(id(m) for m in module.modules())
                    weight = module.base_layer.weight.detach()
                    for name in module.active_adapters:  # W + scale B A in one pass over W (a new tensor)
                        if name in module.lora_A:
                            weight = torch.addmm(weight, module.lora_B[name].weight, module.lora_A[name].weight,
                                                 alpha=module.scaling[name])
                    bias = module.base_layer.bias
                elif type(module) is torch.nn.Linear and module.weight.dtype == torch.float32:
                    weight, bias = module.weight.detach(), module.bias
                else:
                    continue
                packed = torch.ops.mkldnn._reorder_linear_weight(weight.to(dtype), rows)
                module.forward = partial(forward, packed, None if bias is None else bias.detach().to(dtype))
                patched.append(module)
        yield True
    finally:
        for module in patched:
            del module.forward  # the class's forward again, on the (possibly updated) dense weight


def _active_lora(module: torch.nn.Module) -> bool:
    """A plain peft LoRA linear layer (W + scale B A: no DoRA or other variant, no transposed weight,
    no adapter bias) over an fp32 `nn.Linear`, with adapters in use and not merged. Any other adapter
    layer keeps its own forward, over a packed base layer."""
    base = getattr(module, "base_layer", None)
    if not (hasattr(module, "lora_A") and type(base) is torch.nn.Linear and base.weight.dtype == torch.float32):
        return False
    names = [name for name in module.active_adapters if name in module.lora_A]
    return (bool(names) and not module.disable_adapters and not module.merged and not module.fan_in_fan_out
            and not any(module.use_dora.get(name) or getattr(module, "lora_variant", {}).get(name)
                        or module.lora_B[name].bias is not None for name in names))


def _packed_forward(weight: torch.Tensor, bias: torch.Tensor | None, x: torch.Tensor) -> torch.Tensor:
    return torch.ops.mkldnn._linear_pointwise(x, weight, bias, "none", [], "")


def _packed_bf16_forward(weight: torch.Tensor, bias: torch.Tensor | None, x: torch.Tensor) -> torch.Tensor:
    return torch.ops.mkldnn._linear_pointwise(x.to(torch.bfloat16), weight, bias, "none", [], "").to(x.dtype)
