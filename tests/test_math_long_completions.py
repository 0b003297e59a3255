"""Completions longer than `LONG_COMPLETION` are checked whole in a worker, so the deadline bounds their
extraction too (a megabyte of `$1+$1+...` takes a fraction of a second to extract alone, and many seconds in
a loaded caller that no deadline bounded). The verdicts are those of the in-caller path."""

from __future__ import annotations

import pytest

import rlvr.verifiers.math as math_verifier
from rlvr.verifiers.core import HEDGE, TIMEOUT, WRONG
from rlvr.verifiers.math import MathVerifier

FILLER = "Let me think about this. " * 3000  # 72,000 characters: over the limit

CASES = [
    (FILLER + "So the answer is \\boxed{\\frac{1}{2}}.", "0.5", {}),
    (FILLER + "So the answer is \\boxed{\\frac{1}{3}}.", "0.5", {}),
    (FILLER + "\\boxed{x^2+2x+1}", "(x+1)^2", {}),  # needs sympy: planned, then graded, in the worker
    (FILLER + "\\boxed{1} or \\boxed{2}", "2", {}),  # a hedge
    (FILLER + "The answer is \\boxed{3+4}.", "8", {"question": "What is 3+4 times 2?"}),  # echoes the question
    (FILLER + "no answer at all", "7", {}),
    ("".join(f"\\boxed{{{i}}} " for i in range(10_000)), "1", {}),
]


@pytest.fixture(scope="module")
def verifier():
    v = MathVerifier(timeout=5.0)
    v.start()
    return v


def test_long_completions_get_the_verdicts_of_the_in_caller_path(verifier, monkeypatch):
    assert all(len(text) > math_verifier.LONG_COMPLETION for text, _, _ in CASES)
    in_worker = [verifier.score(text, ref, **fields) for text, ref, fields in CASES]
    monkeypatch.setattr(math_verifier, "LONG_COMPLETION", 10**9)  # everything planned here, as before
    in_caller = [verifier.score(text, ref, **fields) for text, ref, fields in CASES]
    assert [(s.value, s.reason) for s in in_worker] == [(s.value, s.reason) for s in in_caller]
    assert [s.value for s in in_worker] == [1.0, 0.0, 1.0, 0.0, 0.0, 0.0, 0.0]
    assert in_worker[1].reason == WRONG and in_worker[3].reason == HEDGE
    assert in_worker[0].info["answer"] == "\\frac{1}{2}"


def test_a_long_completion_whose_extraction_outlasts_the_deadline_is_a_timeout():
    """250,000 `$...$` spans: extraction alone takes longer than 50 ms, and the caller gets `timeout` at the
    deadline instead of waiting for it."""
    quick = MathVerifier(timeout=0.05)
    quick.start()
    score = quick.score("$1+" * 250_000 + "$", "3")
    assert (score.value, score.reason) == (0.0, TIMEOUT), score
    assert score.info["stage"] == "whole"
