"""Sharded data parallelism with PyTorch FSDP2 (`torch.distributed.fsdp.fully_shard`).

`parallel: fsdp` under `torchrun`: each decoder layer is its own FSDP unit, and a small root
module (`Policy`, whose forward is the trainer's packed log-prob computation) holds the
embedding, final norm and output head. Between steps every process keeps 1/world of each
weight, gradient and AdamW state; a layer is all-gathered just before it runs and its gradient
reduce-scattered right after its backward.

Three things differ from textbook FSDP training, all because GRPO ranks do uneven work:
- FSDP's collectives run inside every forward and backward, so every rank must run the same
  number of them. Ranks train different numbers of groups (skipped groups differ), so a rank
  with fewer pads with `idle_pass`es: a one-token forward whose loss is multiplied by zero.
- Sampling, greedy evaluation and the no-grad log-prob passes run a rank-dependent number of
  forwards, so they run inside `gathered()`: every unit all-gathered once, kept whole, and
  resharded at the end (sampling needs whole weights anyway).
- The loss is normalised by batch-wide totals (loss.py), so gradients are summed across ranks,
  not averaged: the divide factor is 1.

The KL reference model (beta > 0) stays an unsharded copy on each rank. LoRA is not combined
with FSDP here.
"""

from __future__ import annotations

import contextlib

import torch
from torch.distributed.fsdp import FSDPModule, fully_shard
from torch.distributed.tensor import DTensor, distribute_tensor

from rlvr.trainer.logprobs import group_logprobs


def _whole(value):
    """A sharded tensor all-gathered to CPU (a collective: every rank calls it in the same order)."""
    return value.full_tensor().cpu() if isinstance(value, DTensor) else value


def _part(whole, like):
    """This rank's shard of a whole tensor, placed as `like` is."""
    if not isinstance(like, DTensor):
        return whole
    return distribute_tensor(whole.to(like.device, like.dtype), like.device_mesh, like.placements)


class Policy(torch.nn.Module):
    """The FSDP root. Its forward runs `group_logprobs` on the wrapped model, so FSDP's root hooks
    (which gather the embedding and head and reduce their gradients) run around it."""

    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, prompt, ids, mask, temperature, chunk_tokens, with_entropy, row_tokens):
        return group_logprobs(self.model, prompt, ids, mask, temperature, chunk_tokens, with_entropy, row_tokens,
                              sparse_embedding=False)  # a sparse gradient cannot be reduce-scattered


class Sharded:
    """A causal LM sharded in place with FSDP2; `policy` computes its log-probs."""

    def __init__(self, model, device):
        if not torch.distributed.is_initialized():  # a one-process group shards nothing but runs the same code
            raise ValueError("parallel: fsdp needs a process group: launch with torchrun --nproc_per_node N (N > 1)")
        for layer in model.get_decoder().layers:
            fully_shard(layer)
        self.model = model
        self.policy = fully_shard(Policy(model))
        self.units = [m for m in self.policy.modules() if isinstance(m, FSDPModule)]
        for unit in self.units:
            unit.set_gradient_divide_factor(1.0)
            unit.set_force_sum_reduction_for_comms(True)  # gloo has no PREMUL_SUM
        with torch.no_grad():  # the first forward must enter through the root (FSDP's lazy init)
            self.idle_pass(device, backward=False)
        for unit in self.units:  # the root keeps whole weights after a forward: shard them before the
            unit.reshard()       # optimizer is built on the model's (sharded) parameters

    def idle_pass(self, device, backward: bool = True) -> None:
        """A forward (+ backward of zero) that takes part in every collective and changes no gradient."""
        one = torch.ones((1, 1), device=device)
        logp, _ = self.policy(torch.zeros(1, dtype=torch.long, device=device), one.long(), one, 1.0, 256, False, 1024)
        if backward:
            (logp.sum() * 0.0).backward()

    @contextlib.contextmanager
    def gathered(self):
        """Whole weights on every rank for the block; no collective runs inside it."""
        for unit in self.units:
            unit.reshard()
        for unit in self.units:
            unit.unshard()
            unit.set_reshard_after_forward(False, recurse=False)
        try:
            yield
        finally:
            for unit in self.units:  # the root keeps its weights after forward (FSDP's default for it)
                unit.set_reshard_after_forward(unit is not self.policy, recurse=False)
                unit.reshard()

    def state(self, optimizer) -> tuple[dict, dict]:
        """Whole (CPU) model and optimizer states, laid out as a single process's; every rank calls it."""
        model_state = {k: _whole(v) for k, v in self.model.state_dict().items()}
        optimizer_state = optimizer.state_dict()
        optimizer_state["state"] = {i: {k: _whole(v) for k, v in s.items()} for i, s in optimizer_state["state"].items()}
        return model_state, optimizer_state

    def load_state(self, optimizer, model_state: dict, optimizer_state: dict) -> None:
        """Load whole states (every rank reads the same file) into the shards of this rank."""
        current = self.model.state_dict()
        self.model.load_state_dict({k: _part(v, current[k]) for k, v in model_state.items()})
        params = [p for group in optimizer.param_groups for p in group["params"]]
        optimizer_state = dict(optimizer_state)
        optimizer_state["state"] = {i: {k: _part(v, params[i]) if v.dim() else v for k, v in s.items()}
                                    for i, s in optimizer_state["state"].items()}
        optimizer.load_state_dict(optimizer_state)

    @staticmethod
    def clip_grad_norm(params, max_norm: float) -> float:
        """The global gradient norm (over all shards), clipping to `max_norm`."""
        norm = torch.nn.utils.clip_grad_norm_(params, max_norm)
        return float(norm.full_tensor() if isinstance(norm, DTensor) else norm)
