"""Completions as the right-padded tensors `group_logprobs` takes: the tests' one way to build them."""

from __future__ import annotations

import torch


def padded(completions: list[list[int]], weights: list[list[int]] | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """(ids, mask): each completion right-padded with 0 to the widest; the mask is `weights` (default: 1 on
    every sampled token), 0 on the padding."""
    width = max(map(len, completions))
    weights = [[1] * len(c) for c in completions] if weights is None else weights
    ids = torch.tensor([list(c) + [0] * (width - len(c)) for c in completions], dtype=torch.long)
    mask = torch.tensor([list(w) + [0] * (width - len(w)) for w in weights], dtype=torch.float32)
    return ids, mask
