"""fp32 sampling on a CPU through weights prepacked for oneDNN.

A decode step multiplies a few rows (G x prompts) by every weight of the model. At so few rows
the default fp32 GEMM is slow; oneDNN, given each weight converted once into its own tensor
format, is not: a SmolLM2-135M sampling loop at 8 rows took 1.38 s instead of 1.98 s here, with
the same tokens. The weights change every step, so the packed copies are made when a sampling
region opens and dropped when it closes (an extra copy of the linear weights while it is open).
Packing costs one oneDNN reorder per layer, 0.08 s for SmolLM2's 211 linears; wrapping each in
`torch.utils.mkldnn.MkldnnLinear` instead cost 0.27 s, mostly building its TorchScript module.
Nothing inside may need gradients: a packed layer is a plain inference kernel.
"""

from __future__ import annotations

import contextlib
from functools import partial

import torch


def can_pack(model: torch.nn.Module) -> bool:
    """fp32 weights on a CPU with oneDNN available (bf16 and GPU sampling have their own fast paths)."""
    if not torch.backends.mkldnn.is_available():
        return False
    weight = next((m.weight for m in model.modules() if type(m) is torch.nn.Linear), None)
    return weight is not None and weight.device.type == "cpu" and weight.dtype == torch.float32


@contextlib.contextmanager
def packed_linears(model: torch.nn.Module, enabled: bool = True):
    """Within the block, every `nn.Linear` of `model` computes with a packed copy of its weight."""
    if not (enabled and can_pack(model)):
        yield
        return
    patched = []
    try:
        with torch.no_grad():
            for module in model.modules():
                if type(module) is torch.nn.Linear and module.weight.dtype == torch.float32:
                    bias = None if module.bias is None else module.bias.detach().to_mkldnn()
                    module.forward = partial(_packed_forward, module.weight.detach().to_mkldnn(), bias)
                    patched.append(module)
        yield
    finally:
        for module in patched:
            del module.forward  # the class's forward again, on the (possibly updated) dense weight


def _packed_forward(weight: torch.Tensor, bias: torch.Tensor | None, x: torch.Tensor) -> torch.Tensor:
    return torch._C._nn.mkldnn_linear(x.to_mkldnn(), weight, bias).to_dense()
