"""`rlvr eval --policy`: a text policy `policy(prompts, n) -> list[list[str]]` as a message generator."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from rlvr.trainer.rollout.chat import tool_messages
from rlvr.trainer.rollout.sessions import BatchSession, Turn

Policy = Callable[[list[list[dict[str, str]]], int], list[list[str]]]


class PolicyGenerator:
    """A text policy as a message generator: single-turn tasks ask it for all n completions of a batch's
    prompts at once (`policy(prompts, n)`); multi-turn episodes ask it for one turn of every live episode
    (`policy(conversations, 1)`), the env's tools described in the system message."""

    def __init__(self, policy: Policy):
        self.policy = policy

    def start(self, batch: Any, settings: Any) -> _PolicySession:
        return _PolicySession(self.policy, batch, settings)


class _PolicySession(BatchSession):
    def __init__(self, policy: Policy, batch: Any, settings: Any):
        super().__init__(batch, settings)
        self.policy = policy
        self.observations = [batch.prompts[r // self.n] for r in range(len(batch.prompts) * self.n)]

    def first(self) -> list[Turn]:
        if self.batch.multiturn:
            return self.next(list(range(len(self.observations))))
        replies = _ask(self.policy, self.batch.prompts, self.n)
        return [Turn(p * self.n + j, text=text) for p, texts in enumerate(replies) for j, text in enumerate(texts)]

    def next(self, rows: list[int]) -> list[Turn]:
        prompts = [tool_messages(self.observations[r], self.batch.envs[r]) for r in rows]
        return [Turn(r, text=text) for r, (text,) in zip(rows, _ask(self.policy, prompts, 1))]

    def extend(self, row: int, messages: list[dict], reply_ids: Any) -> None:
        self.observations[row] = messages
        super().extend(row, messages, reply_ids)


def _ask(policy: Policy, prompts: list, n: int) -> list[list[str]]:
    replies = policy(prompts, n)
    if len(replies) != len(prompts) or any(len(r) != n for r in replies):
        raise ValueError(f"the policy must return {n} completions for each of the {len(prompts)} prompts")
    return replies
