"""The generator interface: what an episode loop asks of whatever samples its assistant turns.

A generator takes token ids (one list per prompt), the sampling settings and one seed per prompt,
and returns, for each prompt, `settings.n` completions as token ids with the log-probability of
each sampled token under the sampling policy (after temperature and top-p): the
`generation.Sampled` the local sampler has always returned. The loss compares those
log-probabilities with the trainer's own (`tis_cap`, `sampler_kl`), so a generator whose numerics
differ from the trainer's (another precision, another engine) is corrected rather than trusted.

`sync_weights(model)` is called after every optimizer step: a generator that holds its own copy
of the weights (vLLM) takes the new ones; one that samples with the trainer's model does nothing.

Implementations: `LocalGenerator` here (the KV-cache sampler of trainer/generation.py, seeded per
prompt exactly as before) and `VLLMGenerator` in trainer/vllm_generator.py.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from rlvr.trainer.generation import Sampled


@dataclass(frozen=True)
class SamplingSettings:
    """How to sample: `n` completions per prompt of at most `max_new_tokens` tokens, each stopped by
    any of `stop_token_ids` (kept as its last token) or, for a generator that supports them, by
    one of the `stop` strings (kept at the end of the text)."""

    n: int = 1
    max_new_tokens: int = 256
    temperature: float = 1.0
    top_p: float = 1.0
    greedy: bool = False
    stop_token_ids: tuple[int, ...] = ()
    stop: tuple[str, ...] = ()


class Generator(Protocol):
    def sample(self, prompt_ids: list[list[int]], settings: SamplingSettings, seeds: list[int]) -> list[Sampled]:
        """`settings.n` completions of each prompt; prompt i draws from `seeds[i]` alone, so its
        completions do not depend on which other prompts share the call."""

    def sync_weights(self, model) -> None:
        """Take the trainer's current weights (after an optimizer step)."""


class LocalGenerator:
    """The KV-cache sampler (trainer/generation.py) on the trainer's own model: nothing to sync."""

    def __init__(self, model, pad_token_id: int):
        self.model, self.pad_token_id = model, pad_token_id

    def sample(self, prompt_ids: list[list[int]], settings: SamplingSettings, seeds: list[int]) -> list[Sampled]:
        import torch

        from rlvr.trainer.generation import sample

        if settings.stop:
            raise ValueError("the local sampler stops on token ids only (episodes.py checks stop markers itself)")
        was_training = self.model.training
        self.model.eval()
        try:
            return sample(self.model, prompt_ids, n=settings.n, max_new_tokens=settings.max_new_tokens,
                          temperature=settings.temperature, top_p=settings.top_p, greedy=settings.greedy,
                          generators=[torch.Generator().manual_seed(s) for s in seeds],
                          eos_token_ids=settings.stop_token_ids, pad_token_id=self.pad_token_id)
        finally:
            self.model.train(was_training)

    def sync_weights(self, model) -> None:
        self.model = model
