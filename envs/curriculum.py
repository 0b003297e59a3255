"""Raising difficulty as accuracy rises.

A `Curriculum` watches correctness over a sliding window of scored completions and moves
every env it controls one level up when the window's accuracy reaches `raise_at` (and one
level down when it falls to `lower_at`, if set). Feed it the `info["correct"]` flags of
`step` or `score_groups` results with `record`, or wrap a single env in
`CurriculumWrapper`, which records every step itself.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Sequence
from typing import Any

import gymnasium as gym


class Curriculum:
    def __init__(self, envs: gym.Env | Sequence[gym.Env], *, raise_at: float = 0.8, lower_at: float | None = None,
                 window: int = 64, max_level: int | None = None):
        self.envs = [envs] if isinstance(envs, gym.Env) else list(envs)
        if not self.envs:
            raise ValueError("a curriculum needs at least one env")
        sources = [env.unwrapped.source for env in self.envs]
        levels = sources[0].levels
        if levels is None or sources[0].difficulty is None:
            raise ValueError(f"{sources[0].family} tasks have no difficulty levels to step through")
        if not 0 < raise_at <= 1 or (lower_at is not None and not 0 <= lower_at < raise_at):
            raise ValueError(f"need 0 <= lower_at < raise_at <= 1, got lower_at={lower_at}, raise_at={raise_at}")
        if not isinstance(window, int) or window < 1:
            raise ValueError(f"window must be a positive int, got {window!r}")
        self.raise_at, self.lower_at, self.window = raise_at, lower_at, window
        self.min_level = levels.start
        self.max_level = levels.stop - 1 if max_level is None else max_level
        if not self.min_level <= self.max_level < levels.stop:
            raise ValueError(f"max_level must be in {levels.start}..{levels.stop - 1}, got {max_level}")
        self.level = sources[0].difficulty
        self._recent: deque[bool] = deque(maxlen=window)
        self.history: list[tuple[int, int]] = []  # (completions seen, new level) at each change
        self._seen = 0
        self._apply(self.level)

    @property
    def accuracy(self) -> float | None:
        return sum(self._recent) / len(self._recent) if self._recent else None

    def record(self, correct: bool | Iterable[Any]) -> int:
        """Count scored completions (bools, or step/score infos with a `correct` key); returns the level."""
        items = [correct] if isinstance(correct, (bool, dict)) else list(correct)
        for item in items:
            self._recent.append(bool(item["correct"] if isinstance(item, dict) else item))
            self._seen += 1
            if len(self._recent) == self.window:
                accuracy = self.accuracy
                if accuracy >= self.raise_at and self.level < self.max_level:
                    self._move(self.level + 1)
                elif self.lower_at is not None and accuracy <= self.lower_at and self.level > self.min_level:
                    self._move(self.level - 1)
        return self.level

    def _move(self, level: int) -> None:
        self._apply(level)
        self._recent.clear()
        self.history.append((self._seen, level))

    def _apply(self, level: int) -> None:
        self.level = level
        for env in self.envs:
            env.unwrapped.source = env.unwrapped.source.with_difficulty(level)


class CurriculumWrapper(gym.Wrapper):
    """One env whose steps feed its own `Curriculum` (`self.curriculum`); the level shows in info."""

    def __init__(self, env: gym.Env, **curriculum: Any):
        super().__init__(env)
        self.curriculum = Curriculum(env, **curriculum)

    def step(self, action: Any):
        obs, reward, terminated, truncated, info = self.env.step(action)
        if terminated or truncated:
            info["level"] = self.curriculum.record(bool(info.get("correct")))
        return obs, reward, terminated, truncated, info
