"""Multi-turn envs: a code env that answers with the failing tests, and math with a self-check.

Each `step` scores the completion of the current turn. If the episode goes on, the next
observation is the whole conversation so far plus a new user message (test feedback, or
the request to check the answer). `info` carries `turn` (1-based), `turn_rewards` (every
turn so far) and, on the last turn, `final_reward` (the last turn's reward: what the
episode achieved). The step reward is the turn's own reward.
"""

from __future__ import annotations

from typing import Any

from rlvr.envs.base import TaskEnv, action_text
from rlvr.envs.tasks import TaskSource
from rlvr.verifiers.core import Score

MAX_FEEDBACK_TESTS = 3
MAX_FEEDBACK_CHARS = 2000
SELF_CHECK = ("Check your solution step by step. If you find a mistake, correct it. "
              "Then give your final answer in \\boxed{}.")


class MultiTurnEnv(TaskEnv):
    """A `TaskEnv` that may continue after a step; subclasses say how (`next_message`)."""

    def __init__(self, source: TaskSource, *, max_turns: int = 3, **options: Any):
        super().__init__(source, **options)
        if not isinstance(max_turns, int) or isinstance(max_turns, bool) or not 1 <= max_turns <= 30:
            raise ValueError(f"max_turns must be an int in 1..30, got {max_turns!r}")
        self.max_turns = max_turns
        self._turn_rewards: list[float] = []

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        self._turn_rewards = []
        return super().reset(seed=seed, options=options)

    def step(self, action: Any):
        self._require_task()
        text = action_text(action)
        reward_fn, reference, fields = self.scoring_inputs()
        score = reward_fn.score(text, reference, **fields)
        reward = float(score.value)
        self._turn_rewards.append(reward)
        self._messages.append({"role": "assistant", "content": text})
        info = self.outcome(score)
        info["turn"] = len(self._turn_rewards)
        info["turn_rewards"] = list(self._turn_rewards)
        follow_up = None if len(self._turn_rewards) >= self.max_turns else self.next_message(score, info)
        if follow_up is None:
            self._done = True
            info["final_reward"] = reward
        else:
            self._messages.append({"role": "user", "content": follow_up})
        return self._observation(), reward, self._done, False, info

    def next_message(self, score: Score, info: dict[str, Any]) -> str | None:
        """The next user message after a turn scored `score`, or None to end the episode."""
        raise NotImplementedError


class CodeFeedbackEnv(MultiTurnEnv):
    """Write code; while tests fail (up to `max_turns` attempts), the failing tests come back."""

    def next_message(self, score: Score, info: dict[str, Any]) -> str | None:
        if info["correct"]:
            return None
        return test_feedback(score)


class MathSelfCheckEnv(MultiTurnEnv):
    """Answer, then (with `self_check=True`) one more turn asked to check the answer."""

    def __init__(self, source: TaskSource, *, self_check: bool = True, **options: Any):
        if not isinstance(self_check, bool):
            raise TypeError(f"self_check must be True or False, got {self_check!r}")
        super().__init__(source, max_turns=2 if self_check else 1, **options)

    def next_message(self, score: Score, info: dict[str, Any]) -> str | None:
        return SELF_CHECK


def test_feedback(score: Score) -> str:
    """A short report of what went wrong, built from the code verifier's details."""
    details = score.info.get("correct", {}) if isinstance(score.info.get("correct"), dict) else {}
    reason = score.reasons.get("correct") or score.reason or "wrong"
    passed, total = details.get("passed"), details.get("total")
    lines = []
    if isinstance(passed, int) and isinstance(total, int):
        lines.append(f"Your code passed {passed} of {total} tests.")
    else:
        lines.append(f"Your code did not pass the tests ({reason}).")
    failures = [t for t in details.get("tests", []) if isinstance(t, dict) and not t.get("passed")]
    for test in failures[:MAX_FEEDBACK_TESTS]:
        what = test.get("name") or test.get("input") or ""
        why = test.get("error") or test.get("status") or "failed"
        lines.append(f"- {str(what).strip()[:300]}\n  -> {str(why).strip()[:300]}")
    if not failures and details.get("error"):
        lines.append(str(details["error"])[:500])
    lines.append("Fix the code and reply with the complete corrected solution in a ```python block.")
    return "\n".join(lines)[:MAX_FEEDBACK_CHARS]


__all__ = ["CodeFeedbackEnv", "MathSelfCheckEnv", "MultiTurnEnv", "test_feedback"]
