"""Held-out evaluation during training: greedy episodes on the evaluation seeds, by the loop's rules.

`rlvr eval --model` plays the same episodes with the same settings (greedy, the same token budget),
so the two report the same numbers for the same weights (tests/test_eval_parity.py).
"""

from __future__ import annotations

from collections import Counter

from rlvr.trainer.rollout.envs import is_multiturn, make_envs
from rlvr.trainer.rollout.loop import local_rollout
from rlvr.trainer.rollout.tally import tally


def evaluate_held_out(model, tokenizer, env_id: str, env_kwargs: dict, n_prompts: int, *, seed: int,
                      max_new_tokens: int, batch: int = 16, max_episode_tokens: int = 512) -> dict:
    """Greedy accuracy and mean reward on prompts seed, seed + 1, ... (the held-out seeds); multi-turn envs
    add mean turns and tool calls, and the share of correct episodes that called a tool."""
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
