"""Groups: a prompt from an env, G episodes played for it, their rewards from the env API.

Prompt k of a run uses env seed `seed + k` and its own sampling seed (`prompt_seed`), so the same
prompt index always yields the same prompt and the same completions, whichever process or batch
it lands in. An episode whose score is `error` (a tool's sandbox or another service failed, not
the model) is dropped from its group before advantages (`drop_errors`): it is no training signal,
and the trainer counts it in the `errors` metric.

This module imports nothing of torch, gymnasium or the envs: every side of the package reads it.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field


@dataclass
class Group:
    """One prompt and its G scored completions."""

    index: int  # the prompt's position in the run's stream of prompts
    prompt_ids: list[int]
    completion_ids: list[list[int]]
    truncated: list[bool]
    texts: list[str]
    rewards: list[float]
    infos: list[dict] = field(default_factory=list)
    sample_logps: list[list[float]] = field(default_factory=list)  # the sampler's log-prob of each token
    # (a message generator gives no ids: the log-probs of the tokens it sampled, where it gives them)
    weights: list[list[int]] | None = None  # multi-turn: 1 on sampled tokens, 0 on env tokens (rollout/chat.py)
    errors: int = 0  # completions scored `error` (infrastructure) left out of the group
    env_s: float = 0.0  # seconds in the env (scoring, tools): the group's even share of its batch's

    @property
    def correct(self) -> list[bool]:
        return [bool(i.get("correct", False)) for i in self.infos]


def prompt_seed(seed: int, index: int, draw: int = 0) -> int:
    """The sampling seed of prompt `index`, asked for the `draw`-th time after the first (trainer/replay.py);
    also the seed of turn `draw` of episode `index` of a prompt seeded `seed` (sessions.TurnByTurn).

    torch seeds its CPU generator from the low 32 bits only, so a replay's key is hashed into them
    rather than put above them.
    """
    if draw:
        return int.from_bytes(hashlib.blake2b(f"{seed}:{index}:{draw}".encode(), digest_size=4).digest(), "little")
    return (seed & 0xFFFF_FFFF) << 20 ^ index


def is_error(info: dict) -> bool:
    score = info.get("score") if isinstance(info, dict) else None
    return isinstance(score, dict) and score.get("reason") == "error"


def drop_errors(group: Group) -> Group:
    """The group without its `error` completions (infrastructure failures), which it counts in `errors`."""
    keep = [i for i, info in enumerate(group.infos) if not is_error(info)]
    if len(keep) == len(group.infos):
        return group

    def pick(values):
        return [values[i] for i in keep] if values else values

    return Group(group.index, group.prompt_ids, pick(group.completion_ids), pick(group.truncated), pick(group.texts),
                 pick(group.rewards), pick(group.infos), pick(group.sample_logps), weights=pick(group.weights),
                 errors=group.errors + len(group.infos) - len(keep), env_s=group.env_s)
