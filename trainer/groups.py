"""Groups: a prompt from an env, G completions sampled for it, their rewards from the env API.

The trainer knows a task only through the env contract: `env.reset(seed=...)` gives chat
messages, `env.unwrapped.score_group(texts)` (or `rlvr.envs.score_groups` for a batch of rlvr
envs) gives `(reward, info)` pairs with `info["correct"]` and `info["score"]`. Prompt k of a
run uses env seed `seed + k` and its own sampling generator, so the same prompt index always
yields the same prompt and the same completions, whichever process or batch it lands in.
"""

from __future__ import annotations

import hashlib
from collections import Counter
from dataclasses import dataclass, field

import gymnasium as gym


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
    weights: list[list[int]] | None = None  # multi-turn: 1 on sampled tokens, 0 on env tokens (trainer/episodes.py)
    errors: int = 0  # completions scored `error` (infrastructure) left out of the group

    @property
    def correct(self) -> list[bool]:
        return [bool(i.get("correct", False)) for i in self.infos]


def make_envs(env_id: str, kwargs: dict, count: int) -> list:
    """`count` instances of an env (rlvr envs register on import of rlvr.envs)."""
    if env_id.startswith(("rlvr/", "rg/")):
        import rlvr.envs  # noqa: F401  (registers the rlvr/ and reasoning-gym rg/ ids)
    return [gym.make(env_id, **kwargs) for _ in range(count)]


def score(envs: list, texts: list[list[str]]) -> list[list[tuple[float, dict]]]:
    """(reward, info) for every completion of every env's current prompt, as one batch where possible."""
    if envs and all(type(e.unwrapped).__module__.startswith("rlvr.envs") for e in envs):
        from rlvr.envs import score_groups

        return score_groups(envs, texts)
    return [e.unwrapped.score_group(t) for e, t in zip(envs, texts)]


def prompt_seed(seed: int, index: int, draw: int = 0) -> int:
    """The sampling seed of prompt `index`, asked for the `draw`-th time after the first (trainer/replay.py);
    also the seed of turn `draw` of episode `index` of a prompt seeded `seed` (generator.TurnByTurn).

    torch seeds its CPU generator from the low 32 bits only, so a replay's key is hashed into them
    rather than put above them.
    """
    if draw:
        return int.from_bytes(hashlib.blake2b(f"{seed}:{index}:{draw}".encode(), digest_size=4).digest(), "little")
    return (seed & 0xFFFF_FFFF) << 20 ^ index


def tally(groups: list[Group], totals: Counter) -> None:
    """Add every episode's reward, correctness, turns, tool calls, score reason and score parts to `totals`
    (what `rlvr eval` and the trainer's held-out evaluation report)."""
    for g in groups:
        for reward, info in zip(g.rewards, g.infos):
            correct, calls, score = bool(info.get("correct")), info.get("tool_calls", 0), info.get("score", {})
            totals.update({"reward": reward, "correct": correct, "turns": info.get("turns", 1), "tool_calls": calls,
                           "tool_correct": correct and calls > 0, f"reason/{score.get('reason') or ''}": 1,
                           **{f"part/{name}": float(v) for name, v in score.get("components", {}).items()}})


def evaluate(model, tokenizer, env_id: str, env_kwargs: dict, n_prompts: int, *, seed: int,
             max_new_tokens: int, batch: int = 16, max_episode_tokens: int = 512) -> dict:
    """Greedy accuracy and mean reward on prompts seed, seed + 1, ... (the held-out seeds); multi-turn envs
    add mean turns and tool calls, and the share of correct episodes that called a tool."""
    from rlvr.trainer.episodes import is_multiturn
    from rlvr.trainer.rollout import local_rollout

    envs = make_envs(env_id, env_kwargs, min(batch, n_prompts))
    multiturn = bool(envs) and is_multiturn(envs[0])
    totals = Counter()
    try:
        for start in range(0, n_prompts, batch):
            tally(local_rollout(model, tokenizer, envs, list(range(start, min(start + batch, n_prompts))), seed=seed,
                                group_size=1, max_new_tokens=max_new_tokens, greedy=True, budget=max_episode_tokens),
                  totals)
    finally:
        for env in envs:
            env.close()
    n = max(n_prompts, 1)
    result = {"accuracy": totals["correct"] / n, "reward": totals["reward"] / n, "n": n_prompts}
    if not multiturn:
        parts = sorted((k[5:], v / n) for k, v in totals.items() if k.startswith("part/"))
        return {**result, **{f"reward/{name}": value for name, value in parts}}
    return {**result, "turns_mean": totals["turns"] / n, "tool_calls_mean": totals["tool_calls"] / n,
            "tool_use_among_correct": totals["tool_correct"] / totals["correct"] if totals["correct"] else None,
            "errors": totals["reason/error"]}
