"""Multi-turn envs: a code env that answers with the failing tests, and math with a self-check.

Each `step` scores the completion of the current turn. If the episode goes on, the next
observation is the whole conversation so far plus a new user message (test feedback, or
the request to check the answer). `info` carries `turn` (1-based), `turn_rewards` (every
turn so far) and, on the last turn, `final_reward` (the last turn's reward: what the
episode achieved). The step reward is the turn's own reward.
"""

from __future__ import annotations

import re
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
        return test_feedback(score, self.task.fields)


class MathSelfCheckEnv(MultiTurnEnv):
    """Answer, then (with `self_check=True`) one more turn asked to check the answer."""

    def __init__(self, source: TaskSource, *, self_check: bool = True, **options: Any):
        if not isinstance(self_check, bool):
            raise TypeError(f"self_check must be True or False, got {self_check!r}")
        super().__init__(source, max_turns=2 if self_check else 1, **options)

    def next_message(self, score: Score, info: dict[str, Any]) -> str | None:
        return SELF_CHECK


def test_feedback(score: Score, fields: dict[str, Any] | None = None) -> str:
    """A short report of what went wrong, built from the code verifier's per-test verdicts.

    For stdin/stdout tests (`fields["io_tests"]`) a failing case shows its input, the
    expected output and what the program printed.
    """
    details = score.info.get("correct") if isinstance(score.info.get("correct"), dict) else {}
    io_tests = (fields or {}).get("io_tests") or []
    passed, total = details.get("passed"), details.get("total")
    if isinstance(passed, int) and isinstance(total, int):
        lines = [f"Your code passed {passed} of {total} tests."]
    else:
        lines = [f"Your code did not pass the tests ({score.reasons.get('correct') or score.reason})."]
    failures = [t for t in details.get("tests", []) if isinstance(t, dict) and not t.get("passed")]
    for test in failures[:MAX_FEEDBACK_TESTS]:
        name = str(test.get("name") or "")
        why = str(test.get("error") or "failed").strip()[:300]
        case = re.fullmatch(r"case (\d+)", name)
        if case and int(case.group(1)) < len(io_tests):
            io = io_tests[int(case.group(1))]
            lines.append(f"- input:\n{_clip(io['input'])}\n  expected output:\n{_clip(io['output'])}\n"
                         f"  your output:\n{_clip(str(test.get('got', '')))}\n  -> {why}")
        else:
            lines.append(f"- {_clip(name)}\n  -> {why}")
    if not failures and details.get("error"):
        lines.append(_clip(str(details["error"])))
    lines.append("Fix the code and reply with the complete corrected solution in a ```python block.")
    return "\n".join(lines)[:MAX_FEEDBACK_CHARS]


def _clip(text: str, limit: int = 300) -> str:
    text = text.strip()
    return text if len(text) <= limit else text[:limit] + " ..."


__all__ = ["CodeFeedbackEnv", "MathSelfCheckEnv", "MultiTurnEnv", "test_feedback"]
