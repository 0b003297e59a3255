"""The reward core: a score with its reasons, the verifier protocol and weighted composites.

Every reward in rlvr is a `Verifier`: a plain, synchronous, picklable object whose
`score(completion, reference=None, **task_fields)` returns a `Score`. A score never
hides why it is low: whenever a component falls short of its best value it names a
machine-readable reason (one of `REASONS`), so a run can count *why* rewards were zero
instead of guessing. Verifiers never raise on model output.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

# Machine-readable reasons. A verifier may add its own, but these are the shared vocabulary.
NO_ANSWER = "no_answer"  # nothing that looks like a final answer
WRONG = "wrong"  # an answer, and it is not the reference
HEDGE = "hedge"  # several different final answers ("3 or 4", two boxes)
TIMEOUT = "timeout"  # verification ran past its wall-clock limit
PARSE_ERROR = "parse_error"  # the answer could not be parsed
FORMAT = "format"  # the completion breaks the required format
BAD_REFERENCE = "bad_reference"  # the reference itself is unusable: a task bug, not a model error
OVERLONG = "overlong"  # length penalty applied
REPETITION = "repetition"  # repetition penalty applied
TESTS_FAILED = "tests_failed"  # code ran, some unit tests failed
ERROR = "error"  # infrastructure failure (sandbox down, worker crash): not the model's fault
REASONS = (
    NO_ANSWER, WRONG, HEDGE, TIMEOUT, PARSE_ERROR, FORMAT, BAD_REFERENCE,
    OVERLONG, REPETITION, TESTS_FAILED, ERROR,
)


@dataclass(frozen=True)
class Score:
    """The result of scoring one completion.

    `value` is the (weighted) total. `components` holds each named part's own value and
    `reasons` the reason of every part that fell short of its best (a zero reward, or a
    penalty below zero). `reason` is the headline reason for the whole score: set when the
    value is not the best possible. `info` carries details for humans (the extracted answer,
    per-test verdicts) and is never used for the reward itself.
    """

    value: float
    reason: str | None = None
    components: dict[str, float] = field(default_factory=dict)
    reasons: dict[str, str] = field(default_factory=dict)
    info: dict[str, Any] = field(default_factory=dict)

    def __float__(self) -> float:
        return float(self.value)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready form (what the CLI, the server and the adapters emit)."""
        return {
            "score": self.value,
            "reason": self.reason,
            "components": dict(self.components),
            "reasons": dict(self.reasons),
            "info": _jsonable(self.info),
        }


def _jsonable(obj: Any) -> Any:
    if isinstance(obj, Mapping):
        return {str(k): _jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_jsonable(v) for v in obj]
    if obj is None or isinstance(obj, (bool, int, float, str)):
        return obj
    return str(obj)


def completion_text(completion: Any) -> str:
    """The text to score: a string as is; for chat messages, the last assistant message.

    Accepts a list of `{"role", "content"}` dicts (content may itself be a list of
    `{"type": "text", "text": ...}` parts, as in multimodal chat formats). Anything else
    gives "", which every verifier scores as `no_answer` rather than raising.
    """
    if isinstance(completion, str):
        return completion
    if isinstance(completion, Mapping):
        completion = [completion]
    if isinstance(completion, Sequence):
        for message in reversed(completion):
            if isinstance(message, Mapping) and message.get("role", "assistant") == "assistant":
                return _content_text(message.get("content"))
    return ""


def _content_text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, Sequence):
        parts = [p.get("text", "") for p in content if isinstance(p, Mapping) and p.get("type") == "text"]
        return "".join(p for p in parts if isinstance(p, str))
    return ""


class Verifier:
    """Base class of every reward function.

    Subclasses implement `score`. `best` is the highest value the verifier can return
    (1 for rewards, 0 for penalties); a result below it must carry a reason.
    `score_batch` is the place for a faster path (process pools, shared parsing);
    the default loops over `score`.
    """

    name: str = "verifier"
    best: float = 1.0

    def score(self, completion: Any, reference: Any = None, **task_fields: Any) -> Score:
        raise NotImplementedError

    def score_batch(
        self,
        completions: Sequence[Any],
        references: Sequence[Any] | None = None,
        task_fields: Sequence[Mapping[str, Any]] | None = None,
    ) -> list[Score]:
        """Score many completions; results come back in input order."""
        references, task_fields = align_batch(completions, references, task_fields)
        return [self.score(c, r, **f) for c, r, f in zip(completions, references, task_fields)]

    def __call__(self, completion: Any, reference: Any = None, **task_fields: Any) -> float:
        return self.score(completion, reference, **task_fields).value

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"


def align_batch(completions, references, task_fields):
    """Check and fill the per-item references and task fields of a batch (None means none)."""
    n = len(completions)
    references = [None] * n if references is None else list(references)
    task_fields = [{}] * n if task_fields is None else [dict(f or {}) for f in task_fields]
    if len(references) != n or len(task_fields) != n:
        raise ValueError(
            f"score_batch: {n} completions but {len(references)} references and {len(task_fields)} task_fields"
        )
    return references, task_fields


class Composite(Verifier):
    """A weighted sum of named verifiers, with the breakdown kept.

    `Composite({"correct": (MathVerifier(), 1.0), "format": (ThinkFormat(), 0.1)})`.
    A component with weight 0 is computed and reported in `components` but does not
    count: a metric, not a reward. The headline `reason` is that of the first weighted
    component (in the given order) that fell short of its best.
    """

    name = "composite"

    def __init__(self, components: Mapping[str, tuple[Verifier, float]]):
        if not components:
            raise ValueError("Composite needs at least one component")
        self.components: dict[str, tuple[Verifier, float]] = {}
        for key, pair in components.items():
            if not (isinstance(pair, tuple) and len(pair) == 2 and isinstance(pair[0], Verifier)):
                raise TypeError(f"Composite component {key!r} must be a (Verifier, weight) pair")
            weight = float(pair[1])
            if not math.isfinite(weight):
                raise ValueError(f"Composite weight of {key!r} must be finite, got {pair[1]!r}")
            self.components[str(key)] = (pair[0], weight)
        self.best = sum(w * v.best for v, w in self.components.values() if w > 0)

    def score(self, completion: Any, reference: Any = None, **task_fields: Any) -> Score:
        parts = {k: v.score(completion, reference, **task_fields) for k, (v, _) in self.components.items()}
        return self._combine(parts)

    def score_batch(self, completions, references=None, task_fields=None) -> list[Score]:
        references, task_fields = align_batch(completions, references, task_fields)
        columns = {
            k: v.score_batch(completions, references, task_fields) for k, (v, _) in self.components.items()
        }
        return [self._combine({k: col[i] for k, col in columns.items()}) for i in range(len(completions))]

    def _combine(self, parts: Mapping[str, Score]) -> Score:
        total = 0.0
        headline = None
        reasons: dict[str, str] = {}
        info: dict[str, Any] = {}
        for key, (_, weight) in self.components.items():
            part = parts[key]
            if weight != 0:
                total += weight * part.value
            if part.reason is not None:
                reasons[key] = part.reason
                if headline is None and weight != 0:
                    headline = part.reason
            if part.info:
                info[key] = part.info
        return Score(
            value=total,
            reason=headline,
            components={k: p.value for k, p in parts.items()},
            reasons=reasons,
            info=info,
        )

    def __repr__(self) -> str:
        inner = ", ".join(f"{k!r}: ({v!r}, {w})" for k, (v, w) in self.components.items())
        return f"Composite({{{inner}}})"

