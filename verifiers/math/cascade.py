"""Rules first, then an LLM judge for what they reject as wrong (the cascade of TinyV, arXiv 2505.14625).

The rule-based `MathVerifier` decides every pair. Only a pair it rejects with a reason that a
judge may overturn goes to the judge: `wrong` (a value the rules found different) and
`parse_error` (an answer the rules could not read). The judge gets the task's question, the
reference and the extracted answer, never the rest of the completion, and its verdict counts only
at the top of its scale. Never judged: a hedge (several answers), a guard's `timeout`, `no_answer`,
`bad_reference`, `error`, an answer that repeats the question, and any answer of a task that asks
for a simplified number (`simplified=True`): there the rules' zero is the point, not a blind spot.

`info["decided_by"]` is "rules" or "judge"; a judged pair also carries `info["rules_reason"]`
and `info["judge"]` (the judge's score, scale, and error if it failed), so a user can count the
judge's acceptances apart. A judge that fails (outage, timeout, no verdict) leaves the rules'
verdict standing.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from rlvr.verifiers.core import PARSE_ERROR, WRONG, Score, Verifier, align_batch
from rlvr.verifiers.math import MathVerifier

JUDGED_REASONS = (WRONG, PARSE_ERROR)


class MathJudgeCascade(Verifier):
    """`MathVerifier`'s verdict, overturned to 1.0 only by a judge's top score on a `wrong` or
    `parse_error` pair. `judge` is a `rlvr.verifiers.judge.JudgeVerifier` (any OpenAI-compatible
    server; its rubric is the one it was built with, e.g. `rubric="math"`); `rules` defaults to
    `MathVerifier()`; `judged_reasons` may narrow `JUDGED_REASONS`, never widen them."""

    name = "math_cascade"
    best = 1.0

    def __init__(self, judge: Any, *, rules: MathVerifier | None = None,
                 judged_reasons: Sequence[str] = JUDGED_REASONS):
        extra = set(judged_reasons) - set(JUDGED_REASONS)
        if extra:
            raise ValueError(f"only {', '.join(JUDGED_REASONS)} may go to the judge, not {', '.join(sorted(extra))}")
        self.judge = judge
        self.rules = rules if rules is not None else MathVerifier()
        self.judged_reasons = tuple(judged_reasons)

    def score(self, completion: Any, reference: Any = None, **task_fields: Any) -> Score:
        return self.score_batch([completion], [reference], [task_fields])[0]

    def score_batch(self, completions: Sequence[Any], references: Sequence[Any] | None = None,
                    task_fields: Sequence[Mapping[str, Any]] | None = None) -> list[Score]:
        references, task_fields = align_batch(completions, references, task_fields)
        ruled = self.rules.score_batch(completions, references, task_fields)
        out = [Score(s.value, s.reason, s.components, s.reasons, {**s.info, "decided_by": "rules"}) for s in ruled]
        asks = [i for i, s in enumerate(ruled) if self._may_judge(s, task_fields[i])]
        if asks:
            workers = max(1, min(len(asks), getattr(getattr(self.judge, "endpoint", None), "max_concurrency", 4)))
            with ThreadPoolExecutor(max_workers=workers) as pool:
                judged = list(pool.map(lambda i: self._judged(ruled[i], references[i], task_fields[i]), asks))
            for i, score in zip(asks, judged):
                out[i] = score
        return out

    def _may_judge(self, score: Score, fields: Mapping[str, Any]) -> bool:
        answer = score.info.get("answer")
        if score.reason not in self.judged_reasons or not isinstance(answer, str) or not answer.strip():
            return False
        if fields.get("simplified"):
            return False
        return score.reason == PARSE_ERROR or "why" not in score.info  # a `why` on `wrong`: the answer echoes the question

    def _judged(self, ruled: Score, reference: Any, fields: Mapping[str, Any]) -> Score:
        verdict = self.judge.judge(ruled.info["answer"], reference, dict(fields))
        judge_info = {k: verdict.info[k] for k in ("judge_score", "scale", "cached", "error", "why") if k in verdict.info}
        info = {**ruled.info, "rules_reason": ruled.reason, "judge": judge_info}
        if verdict.value == 1.0 and verdict.reason is None:
            return Score(1.0, info={**info, "decided_by": "judge"})
        return Score(ruled.value, ruled.reason, ruled.components, ruled.reasons, {**info, "decided_by": "rules"})

    def __repr__(self) -> str:
        return f"MathJudgeCascade({self.judge!r}, judged_reasons={self.judged_reasons!r})"


__all__ = ["JUDGED_REASONS", "MathJudgeCascade"]
