"""One hedge rule, whichever path found the answer (issue 15).

The same wordings ("12 or 13", "either 12 or 13", "12 and 13", "12, 13", ...) are put
through every extraction path: inside a box, several boxes, `<answer>`, `####`, a
final-answer sentence with the values bare or as several math spans (`$...$` and
`\\(...\\)`), and the loose fallbacks (last math span, last number, a bare answer). Each
must score `hedge` whichever of the offered values the reference is, and the same
lists must still score 1 where the reference itself lists those values.
"""

from __future__ import annotations

import pytest

from rlvr.verifiers.core import HEDGE
from rlvr.verifiers.math import MathVerifier

WORDINGS = ("{a} or {b}", "either {a} or {b}", "{a} or possibly {b}", "{a}, or maybe {b}", "{a} and {b}",
            "{a}, {b}")


def _paths(wording: str, a: str, b: str) -> dict[str, str]:
    bare = wording.format(a=a, b=b)
    dollars = wording.format(a=f"${a}$", b=f"${b}$")
    parens = wording.format(a=f"\\({a}\\)", b=f"\\({b}\\)")
    return {
        "box": f"Adding the rows, we get \\boxed{{{bare}}}.",
        "boxes": "Adding the rows, we get " + wording.format(a=f"\\boxed{{{a}}}", b=f"\\boxed{{{b}}}") + ".",
        "answer_tag": f"Adding the rows.\n<answer>{bare}</answer>",
        "gsm8k": f"Adding the rows.\n#### {bare}",
        "final_answer": f"Adding the rows. Final answer: {bare}",
        "answer_is_spans": f"Adding the rows, the answer is {dollars}.",
        "answer_is_parens": f"Adding the rows, the answer is {parens}.",
        "final_answer_spans": f"Adding the rows.\nThe final answer is {dollars}",
        "math_span": f"Adding the rows, we get {dollars}.",
        "math_span_parens": f"Adding the rows, we get {parens}.",
        "math_span_then_words": f"Adding the rows, we get {dollars} seats.",
        "last_number": f"Adding the rows, we get {bare} seats.",
        "whole": bare,
    }


CASES = [pytest.param(w, path, ref, id=f"{path}-{w}-{ref}")
         for w in WORDINGS for path in _paths(w, "12", "13") for ref in ("12", "13")]


@pytest.fixture(scope="module")
def verifier():
    return MathVerifier(timeout=5.0)


@pytest.mark.parametrize("wording, path, reference", CASES)
def test_every_path_scores_the_same_hedge(verifier, wording, path, reference):
    completion = _paths(wording, "12", "13")[path]
    score = verifier.score(completion, reference)
    assert (score.value, score.reason) == (0.0, HEDGE), (completion, score.info)


@pytest.mark.parametrize("wording", [w for w in WORDINGS if "or" not in w])
@pytest.mark.parametrize("path", ["box", "boxes", "answer_tag", "gsm8k", "final_answer", "answer_is_spans",
                                  "answer_is_parens", "math_span", "whole"])
def test_the_same_list_is_the_answer_when_the_reference_lists_both_values(verifier, wording, path):
    completion = _paths(wording, "12", "13")[path]
    score = verifier.score(completion, "12, 13")
    assert (score.value, score.reason) == (1.0, None), (completion, score.info)


@pytest.mark.parametrize("completion", [
    "The answer is $5$, and $x$ is the number of rows.",  # more prose after the list: not a list
    "The final answer is $x = 5$ for $y = 2$.",
    "We know $a = 2$, so the answer is $5$.",
    "There are 3 rows of 4 seats, and 7 seats are left, so 5",
])
def test_a_single_answer_next_to_other_math_is_no_hedge(verifier, completion):
    score = verifier.score(completion, "5")
    assert (score.value, score.reason) == (1.0, None), score.info


def test_a_union_reference_may_be_answered_with_or(verifier):
    score = verifier.score("The answer is $x < -2$ or $x > 2$.", "(-\\infty,-2)\\cup(2,\\infty)")
    assert (score.value, score.reason) == (1.0, None), score.info
