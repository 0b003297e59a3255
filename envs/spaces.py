"""Spaces that really contain what a language-model env emits and accepts.

Gymnasium's `Text` space defaults to an alphanumeric charset, so a completion with a
space, a brace or a newline is "outside" it, and its `Sequence` space wants tuples. An
rlvr env takes any string as its action and emits a list of chat messages, so these two
spaces say exactly that: `AnyText` holds every `str` up to a length, `Messages` holds
every list of `{"role", "content"}` dicts with a known role.
"""

from __future__ import annotations

import string
from typing import Any

from gymnasium import spaces

# What `sample()` draws from: printable ASCII plus the characters completions are full of
# (newlines, TeX, unicode math) so that sampled actions exercise parsers realistically.
SAMPLE_CHARS = string.printable + "\\{}$^_×÷−√πθ∞≤≥éü中"
ROLES = ("system", "user", "assistant")


class AnyText(spaces.Text):
    """Every `str` of length `min_length..max_length`, whatever its characters."""

    def __init__(self, max_length: int = 1 << 20, *, min_length: int = 0, seed: Any = None):
        super().__init__(max_length, min_length=min_length, charset=SAMPLE_CHARS, seed=seed)

    def contains(self, x: Any) -> bool:
        return isinstance(x, str) and self.min_length <= len(x) <= self.max_length

    def sample(self, mask: Any = None, probability: Any = None) -> str:
        # Keep samples short: the space's bound is for membership, not for sampling.
        length = int(self.np_random.integers(self.min_length, min(self.max_length, 64) + 1))
        chars = self.np_random.choice(list(SAMPLE_CHARS), size=length)
        return "".join(chars)

    def __repr__(self) -> str:
        return f"AnyText({self.min_length}, {self.max_length})"

    def __eq__(self, other: object) -> bool:
        return (
            isinstance(other, AnyText)
            and self.min_length == other.min_length
            and self.max_length == other.max_length
        )


class Messages(spaces.Space):
    """Chat conversations: lists of `{"role": r, "content": str}` with r in `roles`.

    A message's content is any string up to `max_length` characters; a conversation has
    at most `max_messages` messages (a multi-turn env grows it by two per turn).
    """

    def __init__(self, max_messages: int = 64, max_length: int = 1 << 20, roles: tuple[str, ...] = ROLES,
                 seed: Any = None):
        super().__init__(shape=None, dtype=None, seed=seed)
        self.max_messages = int(max_messages)
        self.roles = tuple(roles)
        self.content = AnyText(max_length)

    @property
    def is_np_flattenable(self) -> bool:
        return False

    def seed(self, seed: Any = None) -> Any:
        seeds = super().seed(seed)
        self.content.seed(int(self.np_random.integers(2**31)))
        return seeds

    def contains(self, x: Any) -> bool:
        if not isinstance(x, list) or len(x) > self.max_messages:
            return False
        return all(
            isinstance(m, dict) and m.keys() == {"role", "content"}
            and m["role"] in self.roles and self.content.contains(m["content"])
            for m in x
        )

    def sample(self, mask: Any = None, probability: Any = None) -> list[dict[str, str]]:
        n = int(self.np_random.integers(1, min(self.max_messages, 4) + 1))
        return [
            {"role": str(self.np_random.choice(self.roles)), "content": self.content.sample()} for _ in range(n)
        ]

    def to_jsonable(self, sample_n: Any) -> list:
        return [[dict(m) for m in sample] for sample in sample_n]

    def from_jsonable(self, sample_n: list) -> list:
        return [[dict(m) for m in sample] for sample in sample_n]

    def __repr__(self) -> str:
        return f"Messages(max_messages={self.max_messages}, roles={self.roles})"

    def __eq__(self, other: object) -> bool:
        return (
            isinstance(other, Messages)
            and self.max_messages == other.max_messages
            and self.roles == other.roles
            and self.content == other.content
        )


__all__ = ["ROLES", "SAMPLE_CHARS", "AnyText", "Messages"]
