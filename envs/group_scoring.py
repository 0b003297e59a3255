"""Scoring B prompts x G completions as one concurrent batch.

Envs that share a reward object (same task family and reward settings: see
`rlvr.envs.base.shared_reward`) are scored in a single `score_batch` call, so the math
verifier spreads the whole batch over its worker processes and the code verifier over its
sandbox pool. Envs with different rewards are scored side by side in threads.
"""

from __future__ import annotations

from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from rlvr.envs.base import action_text


def score_groups(envs: Sequence[Any], completions: Sequence[Sequence[str]],
                 score_batch=None) -> list[list[tuple[float, dict]]]:
    """`completions[b]` are G completions of `envs[b]`'s current prompt; returns the same shape.

    Each result is `(reward, info)` with info as in `step`. No env's episode state changes.
    `score_batch(reward, texts, references, fields)` replaces `reward.score_batch(...)` (e.g.
    `rlvr.ray_scoring.RayScorer.score_batch`, which scores on a Ray cluster).
    """
    if len(envs) != len(completions):
        raise ValueError(f"score_groups: {len(envs)} envs but {len(completions)} completion groups")
    if isinstance(completions, str) or any(isinstance(group, str) for group in completions):
        raise TypeError("score_groups: completions must be a list of lists of strings, one list per env")
    unwrapped = [env.unwrapped for env in envs]
    inputs = [env.scoring_inputs() for env in unwrapped]  # raises ResetNeeded before any work
    by_reward: dict[int, list[int]] = {}
    for b, (reward, _, _) in enumerate(inputs):
        by_reward.setdefault(id(reward), []).append(b)

    def run(rows: list[int]) -> list[tuple[int, list]]:
        reward = inputs[rows[0]][0]
        texts, references, fields = [], [], []
        for b in rows:
            group = [action_text(c) for c in completions[b]]
            texts += group
            references += [inputs[b][1]] * len(group)
            fields += [inputs[b][2]] * len(group)
        scores = reward.score_batch(texts, references, fields) if score_batch is None else score_batch(
            reward, texts, references, fields)
        out, start = [], 0
        for b in rows:
            g = len(completions[b])
            out.append((b, [(float(s.value), unwrapped[b].outcome(s)) for s in scores[start:start + g]]))
            start += g
        return out

    results: list[list[tuple[float, dict]]] = [[] for _ in envs]
    groups = list(by_reward.values())
    if len(groups) == 1:
        finished = [run(groups[0])]
    else:
        with ThreadPoolExecutor(max_workers=len(groups)) as pool:
            finished = list(pool.map(run, groups))
    for part in finished:
        for b, scored in part:
            results[b] = scored
    return results
