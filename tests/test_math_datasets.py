"""The math verifier on real public data: the datasets' own worked solutions against their answers.

GSM8K solutions end in `#### n` (after "the answer is ..." sentences and calculator
annotations); MATH-500 solutions box their answer in LaTeX of every kind. Each must
score 1 against its own reference, and 0 once its final number is changed.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import needs
import pytest

from rlvr.verifiers.boxes import find_boxes
from rlvr.verifiers.math import MathVerifier

DATASETS = Path(__file__).resolve().parents[1].parent / "shared" / "datasets"


def _rows(name: str, file: str) -> list[dict]:
    path = DATASETS / name / file
    if not path.exists():
        needs.skip(f"{path} is not available")
    return [json.loads(line) for line in path.read_text().splitlines()]


@pytest.fixture(scope="module")
def verifier():
    return MathVerifier(timeout=5.0)


def test_every_gsm8k_test_solution_matches_its_answer_and_a_changed_one_does_not(verifier):
    rows = _rows("gsm8k", "test.jsonl")
    solutions = [r["answer"] for r in rows]
    references = [s.rpartition("####")[2].strip() for s in solutions]
    questions = [{"question": r["question"]} for r in rows]  # the echo rule must spare every real solution
    scores = verifier.score_batch(solutions, references, questions)
    assert [i for i, s in enumerate(scores) if s.value != 1.0] == []
    changed = [re.sub(r"####\s*(\S+)\s*$", lambda m: f"#### {int(m.group(1).replace(',', '')) + 1}", s)
               for s in solutions]
    scores = verifier.score_batch(changed, references)
    assert [i for i, s in enumerate(scores) if s.value != 0.0] == []


def test_every_math500_solution_matches_its_answer(verifier):
    rows = _rows("math500", "test.jsonl")
    scores = verifier.score_batch([r["solution"] for r in rows], [r["answer"] for r in rows],
                                  [{"question": r["problem"]} for r in rows])  # the echo rule spares them all
    failures = [(r["answer"], s.reason, s.info.get("answer")) for r, s in zip(rows, scores) if s.value != 1.0]
    assert failures == []


def test_math500_solutions_with_a_changed_boxed_number_are_rejected(verifier):
    rows = _rows("math500", "test.jsonl")
    changed, references = [], []
    for r in rows:
        # bump the first digit inside the last box: a different value in every answer shape
        box = find_boxes(r["solution"])[-1]
        bumped = re.sub(r"\d", lambda m: str((int(m.group()) + 1) % 10), box.content, count=1)
        if bumped != box.content:
            at = r["solution"].index(box.content, box.start)
            changed.append(r["solution"][:at] + bumped + r["solution"][at + len(box.content):])
            references.append(r["answer"])
    scores = verifier.score_batch(changed, references)
    assert len(changed) > 400
    accepted = [(ref, c[-80:]) for ref, c, s in zip(references, changed, scores) if s.value == 1.0]
    assert accepted == []
