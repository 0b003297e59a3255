"""Passing a KV cache to a model across transformers versions (`cache=` since 5.x, `past_key_values=` before),
and running a prefill through the cache of some rows of a batch (`feed_rows`)."""

from __future__ import annotations

import functools
import inspect

import torch

from rlvr.trainer.lora import base_model


@functools.cache
def _cache_name(forward_type) -> str:
    params = inspect.signature(forward_type.forward).parameters
    return "cache" if "cache" in params else "past_key_values"


def cache_kwarg(module, cache) -> dict:
    """{"cache": cache} or {"past_key_values": cache}, whichever `module.forward` takes (for a peft model, which
    passes its keywords on, whichever its base model's forward takes)."""
    return {_cache_name(type(base_model(module))): cache}


def returned_cache(output):
    """The cache a forward pass returned."""
    cache = getattr(output, "cache", None)
    return cache if cache is not None else output.past_key_values


def _layers(cache) -> list:
    """The cache's layers, each holding `keys` and `values` of shape (batch, heads, length, dim)."""
    from transformers.cache_utils import DynamicLayer

    layers = list(getattr(cache, "layers", None) or [])
    if not layers or any(type(layer) is not DynamicLayer for layer in layers):
        kinds = sorted({type(layer).__name__ for layer in layers}) or [type(cache).__name__]
        raise TypeError(f"feeding some rows of a batch needs a cache of DynamicLayer layers, not {', '.join(kinds)}")
    return layers


def feed_rows(model, cache, mask: torch.Tensor, next_pos: torch.Tensor, rows: list[int],
              chunks: list[list[int]], pad_token_id: int):
    """Run `chunks[i]` through the cache of batch row `rows[i]`, all in one forward pass (a prefill).

    Only those rows are computed: their part of the cache is taken out, the chunks (left-padded to
    the longest) run through it, and it is put back. Every row's cache then grows by the width of
    the chunks, the positions a row did not fill masked out, as a prompt's left padding is, so the
    batch stays one rectangular cache and the other rows are unchanged. `mask` (batch, length) and
    `next_pos` (batch, 1) are the batch's attention mask and next positions. Returns the fed rows'
    next-token logits, and the batch's new mask and next positions.
    """
    device = mask.device
    width = max(map(len, chunks))
    ids = torch.full((len(rows), width), pad_token_id, dtype=torch.long)
    new = torch.zeros((len(rows), width), dtype=mask.dtype)
    for i, chunk in enumerate(chunks):
        ids[i, width - len(chunk):] = torch.tensor(chunk, dtype=torch.long)
        new[i, width - len(chunk):] = 1
    ids, new = ids.to(device), new.to(device)
    index = torch.tensor(rows, dtype=torch.long, device=device)
    positions = next_pos[index] + (new.cumsum(-1) - 1).clamp(min=0)
    layers = _layers(cache)
    whole = [(layer.keys, layer.values) for layer in layers]
    for layer, (keys, values) in zip(layers, whole):
        layer.keys, layer.values = keys[index], values[index]
    out = model(input_ids=ids, attention_mask=torch.cat([mask[index], new], dim=1), position_ids=positions,
                use_cache=True, logits_to_keep=1, **cache_kwarg(model, cache))
    for layer, (keys, values) in zip(layers, whole):
        for name, old in (("keys", keys), ("values", values)):
            grown = old.new_zeros((*old.shape[:2], old.shape[2] + width, *old.shape[3:]))
            grown[:, :, :old.shape[2]] = old
            grown[index] = getattr(layer, name)
            setattr(layer, name, grown)
    mask = torch.cat([mask, mask.new_zeros((len(mask), width))], dim=1)
    mask[index, -width:] = new
    next_pos = next_pos.clone()
    next_pos[index] += new.sum(-1, keepdim=True)
    return out.logits[:, -1], _compact(layers, mask), next_pos


def _compact(layers, mask: torch.Tensor) -> torch.Tensor:
    """Drop the cache's masked columns, keeping each row's own positions in order, right-aligned.

    Rows that get replies at different steps each grow the whole batch by their reply's width, so
    without this the cache (and every later decoding step) spans the sum of the replies, not the
    longest row: 5,214 columns for rows of at most 1,860 in a tool episode of bench/generation.py.
    Positions are explicit and the keys are stored rotated, so where a column sits does not matter;
    only masked ones are dropped. Returns the new mask."""
    length = int(mask.sum(-1).max())
    if length == mask.shape[1]:
        return mask
    keep = torch.argsort(mask, dim=1, stable=True)[:, -length:]  # masked columns first, then the row's own
    for layer in layers:
        for name in ("keys", "values"):
            old = getattr(layer, name)
            index = keep[:, None, :, None].expand(old.shape[0], old.shape[1], length, old.shape[3])
            setattr(layer, name, old.gather(2, index))
    return mask.gather(1, keep)
