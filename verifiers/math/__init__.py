"""Math answer verification: extract the final answer, decide if it equals the reference.

`MathVerifier` does the cheap work (extraction, normalisation, exact rationals, shapes)
in the caller's process and sends only what needs sympy to worker processes, where a
hard wall-clock limit applies. See docs/math.md for the rules and conventions.
"""

from __future__ import annotations

import decimal
import math
import numbers
import re
import threading
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from typing import Any

from rlvr.verifiers.boxes import final_region
from rlvr.verifiers.core import (
    BAD_REFERENCE,
    ERROR,
    HEDGE,
    NO_ANSWER,
    PARSE_ERROR,
    TIMEOUT,
    WRONG,
    Score,
    Verifier,
    align_batch,
    completion_text,
)
from rlvr.verifiers.math import grader, numeric
from rlvr.verifiers.math.extract import (
    MAX_ANSWER_CHARS,
    Extraction,
    extract_answer,
    has_hedge_words,
    joins_values,
    reference_answer,
)
from rlvr.verifiers.math.normalize import normalize, text_key
from rlvr.verifiers.math.pool import CanaryError, get_pool
from rlvr.verifiers.math.structures import MAX_NESTING, nesting_depth

__all__ = ["CanaryError", "MathVerifier", "extract_answer", "grade"]

grade = grader.grade

_SHORT_TEXT = 200  # a bare text answer longer than this is a paragraph, not an answer
_QUESTION_FIELDS = ("question", "problem", "prompt_text", "prompt")
# Completions longer than this (characters) are checked whole in a worker, under the deadline; shorter ones
# are planned here, where a cheap verdict needs no round trip (extraction costs about 0.3 us a character)
LONG_COMPLETION = 65_536
_CACHE_SIZE = 16384
_cache: OrderedDict[tuple, tuple[str, object]] = OrderedDict()  # symbolic task -> worker verdict
_cache_lock = threading.Lock()
_valid_refs: dict[str, str | None] = {}  # reference -> why it is unusable (None: it parses)
_slow_refs: dict[str, tuple[float, int]] = {}  # reference -> (the longest limit it timed out under, timeouts there)
_REFERENCE_TRIES = 3  # timeouts at a limit before a reference counts as too slow at that limit


class MathVerifier(Verifier):
    """1.0 when the completion's final answer equals the reference, else 0.0 with a reason.

    `timeout` is the hard wall-clock limit in seconds for one symbolic check (measured
    from when a worker takes it). `strict` turns off the last-number fallback.
    `workers` sets the worker-process count (default: CPU count, at most 8);
    `prefilled_think` means the chat template opened the think block already.
    `rounded_references` (default True) accepts an exact answer that rounds to a decimal
    reference at the reference's own number of decimals (`\\frac{84}{13}` for `6.46`).
    Task fields: `question`/`problem`/`prompt_text` (an answer that only echoes an
    expression of the question scores 0) and `simplified=True` (the answer must be a
    plain number when the reference is one).
    """

    name = "math"
    best = 1.0

    def __init__(self, timeout: float = 1.0, strict: bool = False, *, workers: int | None = None,
                 prefilled_think: bool = False, rounded_references: bool = True):
        if not isinstance(timeout, (int, float)) or not math.isfinite(timeout) or timeout <= 0:
            raise ValueError(f"MathVerifier timeout must be a positive number of seconds, got {timeout!r}")
        if workers is not None and (not isinstance(workers, int) or workers < 1):
            raise ValueError(f"MathVerifier workers must be a positive integer, got {workers!r}")
        self.timeout = float(timeout)
        self.strict = bool(strict)
        self.workers = workers
        self.prefilled_think = bool(prefilled_think)
        self.rounded_references = bool(rounded_references)

    def __repr__(self) -> str:
        return f"MathVerifier(timeout={self.timeout}, strict={self.strict})"

    def start(self) -> None:
        """Start the worker pool now and run its canary (otherwise done by the first answer that
        needs sympy, which then waits a few seconds). Raises `CanaryError` on a broken install."""
        get_pool(self.workers).start()

    def score(self, completion: Any, reference: Any = None, **task_fields: Any) -> Score:
        return self.score_batch([completion], [reference], [task_fields])[0]

    def score_batch(self, completions: Sequence[Any], references: Sequence[Any] | None = None,
                    task_fields: Sequence[Mapping[str, Any]] | None = None) -> list[Score]:
        """Score many pairs: cheap ones here, the rest in parallel in the worker pool."""
        references, task_fields = align_batch(completions, references, task_fields)
        refs = [_reference_text(r) for r in references]
        unusable = self._check_references([r for r in refs if isinstance(r, str)])
        results: list[Score | None] = []
        waiting: dict[tuple, list[tuple[int, dict]]] = {}
        whole: list[tuple[int, tuple]] = []  # long completions, checked whole in a worker
        for i, (completion, ref, fields) in enumerate(zip(completions, refs, task_fields)):
            if isinstance(ref, str) and ref in unusable:
                ref = Score(0.0, BAD_REFERENCE, info={"answer": None, "why": unusable[ref]})
            text = None if isinstance(ref, Score) else completion_text(completion)
            if text is not None and len(text) > LONG_COMPLETION:
                results.append(None)
                whole.append((i, ("plan", text, ref, _plan_fields(fields), self._options())))
                continue
            planned = ref if isinstance(ref, Score) else self._plan(text, ref, fields)
            if isinstance(planned, Score):
                results.append(planned)
            else:
                task, info = planned
                results.append(None)
                waiting.setdefault(task, []).append((i, info))
        if waiting:
            verdicts = self._run_symbolic(list(waiting))
            for task, verdict in zip(waiting, verdicts):
                for i, info in waiting[task]:
                    results[i] = _from_verdict(verdict, info)
        if whole:
            for (i, _), score in zip(whole, self._run_whole([task for _, task in whole])):
                results[i] = score
        return results  # type: ignore[return-value]

    # --- planning: everything that needs no sympy ---------------------------------------

    def _check_references(self, refs: list[str]) -> dict[str, str]:
        """Make sure every reference parses before any answer is compared with it: a reference the
        cheap stages cannot read is parsed once by sympy in a worker, and the verdict is cached.
        Returns why each unusable reference of the batch is unusable. Running out of time depends
        on the limit and the load, so such a reference is unusable for this batch only; it is tried
        again until it has timed out `_REFERENCE_TRIES` times at the longest limit tried."""
        unknown = list(dict.fromkeys(r for r in refs if r not in _valid_refs and not self._too_slow(r)
                                     and not grader.reference_readable(r)))
        verdicts = self._run_symbolic([("reference", r) for r in unknown]) if unknown else []
        slow = "the reference could not be parsed within the time limit"
        bad = {}
        with _cache_lock:
            for ref, (status, value) in zip(unknown, verdicts):
                if status == "ok":
                    _valid_refs[ref] = None if value else "the reference does not parse"
                    _slow_refs.pop(ref, None)
                    if len(_valid_refs) > _CACHE_SIZE:
                        _valid_refs.pop(next(iter(_valid_refs)))
                elif status == "timeout":
                    bad[ref] = slow
                    limit, count = _slow_refs.pop(ref, (0.0, 0))
                    if self.timeout > limit:
                        limit, count = self.timeout, 0
                    _slow_refs[ref] = (limit, count + (limit == self.timeout))
                    if len(_slow_refs) > _CACHE_SIZE:
                        _slow_refs.pop(next(iter(_slow_refs)))
            for ref in refs:
                why = _valid_refs[ref] if ref in _valid_refs else slow if self._too_slow(ref) else None
                if why is not None:
                    bad[ref] = why
        return bad

    def _too_slow(self, ref: str) -> bool:
        limit, count = _slow_refs.get(ref, (0.0, 0))
        return limit >= self.timeout and count >= _REFERENCE_TRIES

    def _options(self) -> dict[str, bool]:
        """What a worker needs to plan as this verifier does."""
        return {"strict": self.strict, "prefilled_think": self.prefilled_think,
                "rounded_references": self.rounded_references}

    def _run_whole(self, tasks: list[tuple]) -> list[Score]:
        """Long completions checked whole (extraction included) in the workers, under the time limit:
        extracting from a megabyte takes a fraction of a second alone and many seconds on a loaded machine,
        which here, in the caller, no deadline would bound. Not cached: the keys would be megabytes."""
        outcomes = self._pool_run(tasks)
        scores = []
        for status, value, _ in outcomes:
            if status == "ok" and value[0] == "ok":  # the worker's answer: a Score, or a verdict and its info
                planned = value[1]
                scores.append(planned if isinstance(planned, Score) else _from_verdict(*planned))
            elif status == "ok":
                scores.append(_from_verdict(value, {"answer": None}))
            else:
                why = "ran past the time limit" if status == "timeout" else str(value)
                scores.append(Score(0.0, TIMEOUT if status == "timeout" else ERROR,
                                    info={"answer": None, "stage": "whole", "why": why}))
        return scores

    def _plan(self, text: str, ref: str, fields: Mapping[str, Any]):
        if not self.strict and _same_text(text, ref, self.prefilled_think):
            return Score(1.0, info={"answer": text.strip(), "source": "whole"})
        numeric_ref = grader.numeric_value(ref) is not None
        found = extract_answer(text, prefilled_think=self.prefilled_think, loose=not self.strict,
                               last_number=numeric_ref)
        info: dict[str, Any] = {"answer": found.answer, "source": found.source}
        if found.why:
            info["why"] = found.why
        wanted = grader.answer_count(ref)
        if found.reason == HEDGE:
            if wanted != len(found.candidates):
                return Score(0.0, HEDGE, info=info)
            found = Extraction(found.answer, None, found.source)
        if found.answer is None:
            return Score(0.0, found.reason or NO_ANSWER, info=info)
        answer = found.answer
        if len(answer) > MAX_ANSWER_CHARS:
            return Score(0.0, NO_ANSWER, info={**info, "why": "answer too long"})
        if nesting_depth(answer) > MAX_NESTING:
            return Score(0.0, TIMEOUT, info={**info, "why": f"refused before evaluation: nesting deeper than {MAX_NESTING}"})
        split_words = wanted > 1 or grader.is_union(ref)
        if not split_words and has_hedge_words(answer) and not has_hedge_words(ref):
            return Score(0.0, HEDGE, info={**info, "why": "alternatives offered in words"})
        if not split_words and joins_values(answer) and not joins_values(ref):
            return Score(0.0, HEDGE, info={**info, "why": "several values joined by 'and'"})
        echo = _echoes_question(answer, ref, fields)
        if echo:
            return Score(0.0, WRONG, info={**info, "why": echo})
        simplified = bool(fields.get("simplified", False))
        try:
            verdict = grader.grade(answer, ref, split_words=split_words, simplified=simplified,
                                   rounded_references=self.rounded_references)
        except Exception as exc:  # noqa: BLE001 - the fast path must never raise on model output
            verdict = None
            info["fast_path_error"] = f"{type(exc).__name__}"
        if verdict is True:
            return Score(1.0, info=info)
        if verdict is False:
            return Score(0.0, HEDGE if _offers_several(answer, ref) else WRONG, info=info)
        info["several"] = _offers_several(answer, ref)
        return ("grade", answer, ref, split_words, simplified, self.rounded_references), info

    def _pool_run(self, tasks: list[tuple]) -> list[tuple[str, object, float]]:
        """The worker pool's outcomes; a pool that fails itself gives `error` for each (not the model's fault),
        while a broken installation (`CanaryError`) stops the run rather than zero its rewards."""
        try:
            return get_pool(self.workers).run(tasks, self.timeout)
        except CanaryError:
            raise
        except (OSError, RuntimeError) as exc:
            return [("error", f"worker pool: {exc}", 0.0)] * len(tasks)

    def _run_symbolic(self, tasks: list[tuple]) -> list[tuple[str, object]]:
        verdicts: list[tuple[str, object] | None] = []
        todo: list[int] = []
        with _cache_lock:
            for k, task in enumerate(tasks):
                hit = _cache.get(task)
                if hit is not None:
                    _cache.move_to_end(task)
                verdicts.append(hit)
                if hit is None:
                    todo.append(k)
        if todo:
            outcomes = self._pool_run([tasks[k] for k in todo])
            with _cache_lock:
                for k, (status, value, _) in zip(todo, outcomes):
                    if status == "ok":
                        verdicts[k] = value  # type: ignore[assignment]
                        _cache[tasks[k]] = value  # type: ignore[assignment]
                        if len(_cache) > _CACHE_SIZE:
                            _cache.popitem(last=False)
                    else:
                        verdicts[k] = (status, value)
        return verdicts  # type: ignore[return-value]


def _reference_text(reference: Any) -> str | Score:
    """The reference as an unboxed string, or a bad_reference score."""
    if isinstance(reference, bool) or reference is None:
        return Score(0.0, BAD_REFERENCE, info={"answer": None, "why": f"reference is {reference!r}"})
    if isinstance(reference, (numbers.Real, decimal.Decimal)):  # 42, 0.5, Fraction(1, 2), Decimal("2.5")
        if not math.isfinite(float(reference)):
            return Score(0.0, BAD_REFERENCE, info={"answer": None, "why": f"reference is {reference!r}"})
        reference = repr(reference) if isinstance(reference, float) else str(reference)
    if not isinstance(reference, str):
        return Score(0.0, BAD_REFERENCE, info={"answer": None, "why": f"reference of type {type(reference).__name__}"})
    reference = reference_answer(reference)  # a full solution: its final answer
    why = None
    if len(reference) > MAX_ANSWER_CHARS:
        why = "reference too long"
    elif not normalize(reference):
        why = "empty reference"
    elif not _balanced(reference):
        why = "unbalanced braces in the reference"
    elif nesting_depth(reference) > MAX_NESTING:
        why = f"reference nested deeper than {MAX_NESTING}"
    if why:
        return Score(0.0, BAD_REFERENCE, info={"answer": None, "why": why})
    return reference


_WORD = re.compile(r"(?<![\\A-Za-z])[A-Za-z]{2,}")


def _same_text(text: str, ref: str, prefilled_think: bool) -> bool:
    """A bare completion that is the reference's text answer, typography aside (`odd $n$` for
    `odd $n$`, `\\text{odd } n`): words outside any box, where extraction would keep only `n`."""
    if len(text) > 4 * _SHORT_TEXT or not _WORD.search(ref):
        return False
    region = final_region(text, prefilled_think)
    if region is None or len(region.strip()) > _SHORT_TEXT or "\\boxed" in region:
        return False
    key = text_key(region.strip())
    return bool(key) and key == text_key(ref)


def _offers_several(answer: str, ref: str) -> bool:
    try:
        return grader.offers_several(answer, ref)
    except Exception:  # noqa: BLE001 - only refines the reason of a zero
        return False


def _balanced(s: str) -> bool:
    depth, i = 0, 0
    while i < len(s):
        if s[i] == "\\":
            i += 2
            continue
        depth += {"{": 1, "}": -1}.get(s[i], 0)
        if depth < 0:
            return False
        i += 1
    return depth == 0


def _plan_fields(fields: Mapping[str, Any]) -> dict[str, Any]:
    """The task fields planning reads, and only those (a worker gets them pickled)."""
    kept = {k: fields[k] for k in _QUESTION_FIELDS if isinstance(fields.get(k), str)}
    if "simplified" in fields:
        kept["simplified"] = bool(fields["simplified"])
    return kept


def _echoes_question(answer: str, reference: str, fields: Mapping[str, Any]) -> str | None:
    """Why the answer is just an expression copied from the question, else None."""
    question = next((fields[k] for k in _QUESTION_FIELDS if isinstance(fields.get(k), str)), None)
    if not question:
        return None
    a = normalize(answer).replace(" ", "")
    if len(a) < 3 or numeric.is_plain_number(a) or a == normalize(reference).replace(" ", ""):
        return None
    q = normalize(question).replace(" ", "")
    bare = _bare(a)
    if a in q or (_ARITHMETIC.fullmatch(bare) and bare in _bare(q)):
        return "the answer repeats an expression from the question"
    return None


_GROUPING = re.compile(r"[(){}\[\]]")  # `normalize` has already dropped \left and \right
_TIMES = re.compile(r"\\times|\\cdot|\u22c5")  # ... and spelled `\u00d7` as \times
_ARITHMETIC = re.compile(r"[\d.]+(?:[-+*/^][\d.]+)+")  # numbers joined by operators, nothing else


def _bare(expression: str) -> str:
    """The expression without grouping and with one spelling of times: `(623\\times 685)` is
    `623*685`, so brackets around the question's arithmetic do not make it an answer."""
    return _GROUPING.sub("", _TIMES.sub("*", expression))


def _from_verdict(verdict: tuple[str, object], info: dict[str, Any]) -> Score:
    status, value = verdict
    info = dict(info, stage="symbolic")
    several = info.pop("several", False)
    if status == "ok":
        return Score(1.0, info=info) if value else Score(0.0, HEDGE if several else WRONG, info=info)
    if status in ("timeout", "guard"):
        why = "refused before evaluation: " + str(value) if status == "guard" else "ran past the time limit"
        return Score(0.0, TIMEOUT, info={**info, "why": why})
    if status == "parse_error":
        return Score(0.0, PARSE_ERROR, info={**info, "why": str(value)})
    if status == "bad_reference":
        return Score(0.0, BAD_REFERENCE, info={**info, "why": str(value)})
    return Score(0.0, ERROR, info={**info, "why": str(value)})
