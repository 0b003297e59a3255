"""`generator: local`: the KV-cache sampler (rollout/sampler.py) on the trainer's own model.

The loop's batches run in `sampler.CarriedSession`, one KV cache carried across turns (a
single-turn group is its first turn: what `sample` gives). `sample` stops on token ids only; in the loop's
sessions a turn also ends where the loop's test says it reached a stop string or closed a tool call
(`Batch.ends_turn`, decoding only the turn's last tokens).
This module imports torch only when it samples.
"""

from __future__ import annotations

from rlvr.trainer.rollout.sessions import Batch, Sampled, SamplingSettings


class LocalGenerator:
    """Samples with the trainer's model itself: nothing to sync, the same numerics as the loss."""

    name = "local"
    exact = True  # samples with the trainer's own weights and numerics: no sampler correction needed

    def __init__(self, model, pad_token_id: int):
        self.model, self.pad_token_id = model, pad_token_id

    @classmethod
    def create(cls, model, tokenizer, **options) -> LocalGenerator:
        """The registry's constructor (rollout/registry.py); the local sampler takes no engine options."""
        return cls(model, tokenizer.pad_token_id)

    def sample(self, prompt_ids: list[list[int]], settings: SamplingSettings, seeds: list[int]) -> list[Sampled]:
        from rlvr.trainer.rollout.sampler import sample

        return sample(self.model, prompt_ids, settings, seeds, self.pad_token_id)

    def start(self, batch: Batch, settings: SamplingSettings):
        from rlvr.trainer.rollout.sampler import CarriedSession

        return CarriedSession(self.model, batch, settings, self.pad_token_id)

    def sync_weights(self, model) -> None:
        self.model = model
