"""The labelled public suite: every (reference, completion, expected) case in math_cases.jsonl.

Scored as one batch (the production path), then each case is checked on its own so a
failure names the case. A zero must also carry the labelled reason when one is given.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

from rlvr.verifiers.math import MathVerifier

CASES = [json.loads(line) for line in (Path(__file__).parent / "math_cases.jsonl").read_text().splitlines()]
CATEGORIES = ("extraction", "hedge", "normalize", "number", "symbolic", "tuple", "set", "interval", "matrix",
              "equation", "complex", "degrees", "base", "choice", "text", "convention", "safety")


@pytest.fixture(scope="module")
def scores():
    verifier = MathVerifier(timeout=1.0)
    return verifier.score_batch([c["completion"] for c in CASES], [c["reference"] for c in CASES],
                                [c.get("fields", {}) for c in CASES])


def test_suite_is_large_and_covers_every_category():
    counts = Counter(c["category"] for c in CASES)
    assert len(CASES) >= 300
    assert set(counts) == set(CATEGORIES)
    assert all(counts[c] >= 5 for c in CATEGORIES)
    assert sum(c["expected"] == 0 for c in CASES) >= 100  # negatives matter as much as positives


@pytest.mark.parametrize("index", range(len(CASES)), ids=lambda i: f"{CASES[i]['category']}-{i}")
def test_case(scores, index):
    case, score = CASES[index], scores[index]
    label = f"{case['reference']!r} <- {case['completion'][-80:]!r}"
    assert score.value == case["expected"], f"{label}: got {score.value} ({score.reason}, {score.info})"
    if case["expected"] == 0:
        assert score.reason is not None, label
        if case.get("reason"):
            assert score.reason == case["reason"], f"{label}: reason {score.reason}, info {score.info}"
    else:
        assert score.reason is None
