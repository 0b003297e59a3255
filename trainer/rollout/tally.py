"""What training and `rlvr eval` report about played episodes: sums over groups and episode means."""

from __future__ import annotations

from collections import Counter

from rlvr.trainer.rollout.groups import Group


def tally(groups: list[Group], totals: Counter) -> None:
    """Add every episode's reward, correctness, turns, tool calls, score reason and score parts to `totals`
    (what `rlvr eval` and the trainer's held-out evaluation report)."""
    for g in groups:
        for reward, info in zip(g.rewards, g.infos):
            correct, calls, score = bool(info.get("correct")), info.get("tool_calls", 0), info.get("score", {})
            totals.update({"reward": reward, "correct": correct, "turns": info.get("turns", 1), "tool_calls": calls,
                           "tool_correct": correct and calls > 0, f"reason/{score.get('reason') or ''}": 1,
                           **{f"part/{name}": float(v) for name, v in score.get("components", {}).items()}})


def episode_metrics(groups: list[Group]) -> dict[str, float]:
    """Mean turns, tool calls and the share of context tokens of multi-turn groups (empty for single-turn)."""
    infos = [i for g in groups if g.weights is not None for i in g.infos]
    if not infos:
        return {}
    weights = [w for g in groups if g.weights is not None for ws in g.weights for w in ws]
    return {"turns_mean": sum(i.get("turns", 1) for i in infos) / len(infos),
            "tool_calls_mean": sum(i.get("tool_calls", 0) for i in infos) / len(infos),
            "env_token_frac": 1.0 - sum(weights) / len(weights) if weights else 0.0}
