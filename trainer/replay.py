"""Prompt replay: ask again, with fresh samples, the recent prompts whose groups carried signal.

Late in a run most fresh prompts come back all right (or all wrong): their groups have equal
rewards and teach nothing, while the prompts the policy is still unsure of are the ones it
learns from. `replay_fraction` of each step's prompts are drawn from a buffer of the last
`replay_capacity` prompts whose groups had unequal rewards; a replayed prompt that is mixed again
goes back in, one that came back all equal leaves. The rest of the step is fresh prompts. (The
idea of Prioritized Level Replay, with "had signal last time" as the score.)

A replayed prompt keeps its env seed but gets new sampling draws: its generator is keyed by the
prompt index and the number of times it has been asked (`groups.prompt_seed`). The choice
of replays is a function of (seed, step), and the buffer is kept in checkpoints, so a resumed run
replays the same prompts.
"""

from __future__ import annotations

import random


class ReplayBuffer:
    """Entries are (prompt index, draw number of its next asking), oldest first."""

    def __init__(self, capacity: int, seed: int):
        self.capacity, self.seed = capacity, seed
        self.entries: list[tuple[int, int]] = []

    def take(self, step: int, count: int) -> list[tuple[int, int]]:
        """Up to `count` entries chosen at random (a function of seed and step), removed from the buffer."""
        count = min(count, len(self.entries))
        chosen = set(random.Random(f"{self.seed}:{step}").sample(range(len(self.entries)), count))
        taken = [e for i, e in enumerate(self.entries) if i in chosen]
        self.entries = [e for i, e in enumerate(self.entries) if i not in chosen]
        return taken

    def add(self, entries: list[tuple[int, int]]) -> None:
        """Prompts whose groups carried signal, with their next draw number; the oldest fall out past
        `capacity`."""
        self.entries = (self.entries + [tuple(e) for e in entries])[-self.capacity:] if self.capacity else []

    def state(self) -> list[list[int]]:
        return [list(e) for e in self.entries]

    def load(self, state: list) -> None:
        self.entries = [tuple(e) for e in state]
