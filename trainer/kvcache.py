"""Passing a KV cache to a model across transformers versions (`cache=` since 5.x, `past_key_values=` before)."""

from __future__ import annotations

import functools
import inspect


@functools.cache
def _cache_name(forward_type) -> str:
    params = inspect.signature(forward_type.forward).parameters
    return "cache" if "cache" in params else "past_key_values"


def cache_kwarg(module, cache) -> dict:
    """{"cache": cache} or {"past_key_values": cache}, whichever `module.forward` takes."""
    return {_cache_name(type(module)): cache}


def returned_cache(output):
    """The cache a forward pass returned."""
    cache = getattr(output, "cache", None)
    return cache if cache is not None else output.past_key_values
