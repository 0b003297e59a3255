"""The generators a run or `rlvr eval --model` can sample with, by name (`generator:` in a config,
`--generator` on the command line).

A generator is a class with a `name`, a class attribute `exact` (True when it samples with the
trainer's own weights and numerics, so the loss needs no sampler correction) and a constructor
`create(model, tokenizer, **options)` that takes what it needs of the engine options (`seed`,
`max_model_len`, `kv_cache_gib`, `gpu_memory_utilization`, `sleep`, `enforce_eager`). It is listed
here as `name -> "module:Class"`, so the config, the trainer, `rlvr eval` and its argparse choices
all read one table without importing torch or an engine. Adding a generator: write the class, add
its line below.
"""

from __future__ import annotations

import importlib

GENERATORS = {
    "local": "rlvr.trainer.rollout.local:LocalGenerator",
    "vllm": "rlvr.trainer.vllm_generator:VLLMGenerator",
}


def names() -> tuple[str, ...]:
    return tuple(GENERATORS)


def generator_class(name: str) -> type:
    """The registered class `name` (imported on first use); a ValueError names the choices."""
    if name not in GENERATORS:
        raise ValueError(f"unknown generator {name!r}: choose one of {', '.join(GENERATORS)}")
    module, attr = GENERATORS[name].split(":")
    cls = getattr(importlib.import_module(module), attr)
    if getattr(cls, "name", None) != name:
        raise TypeError(f"generator {GENERATORS[name]} is registered as {name!r} but names itself {cls.name!r}")
    return cls


def is_exact(name: str) -> bool:
    """Whether generator `name` samples with the trainer's weights and numerics (no correction in the loss)."""
    return bool(generator_class(name).exact)


def build(name: str, model, tokenizer, **options):
    """Generator `name` sampling `model` (with `tokenizer`), given the engine options it takes."""
    return generator_class(name).create(model, tokenizer, **options)
