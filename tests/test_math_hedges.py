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


# --- alternatives offered across clauses (issue 28) ----------------------------------------

CLAUSES = ("It could be {a}, or it could be {b}", "Maybe {a}, but it might also be {b}",
           "{a}, though it may also be {b}", "Either {a} or possibly {b}", "Probably {a}, although it could be {b}",
           "Perhaps {a}; alternatively, it is {b}", "{a}. Or it could be {b}", "It is {a} or {b}",
           "{a}. It might also be {b}", "{a}. The answer could also be {b}", "{a}. Perhaps it is {b}")


def _clause_paths(wording: str, a: str, b: str) -> dict[str, str]:
    bare = wording.format(a=a, b=b)
    lower = bare[0].lower() + bare[1:]
    return {
        "last_number": f"Counting the seats: {bare}.",
        "math_span": "Counting the seats: " + wording.format(a=f"${a}$", b=f"${b}$") + ".",
        "box_second": "Counting the seats: " + wording.format(a=a, b=f"\\boxed{{{b}}}") + ".",
        "box_first": "Counting the seats: " + wording.format(a=f"\\boxed{{{a}}}", b=b) + ".",
        "answer_is": f"Counting the seats, the answer is {lower}.",
        "final_answer": f"Counting the seats.\nFinal answer: {lower}",
        "gsm8k": f"Counting the seats.\n#### {bare}",
        "answer_tag": f"Counting the seats.\n<answer>{bare}</answer>",
    }


CLAUSE_CASES = [pytest.param(w, path, ref, id=f"{path}-{w}-{ref}")
                for w in CLAUSES for path in _clause_paths(w, "3", "5") for ref in ("3", "5")]


@pytest.mark.parametrize("wording, path, reference", CLAUSE_CASES)
def test_alternatives_in_separate_clauses_are_a_hedge_on_every_path(verifier, wording, path, reference):
    completion = _clause_paths(wording, "3", "5")[path]
    score = verifier.score(completion, reference)
    assert (score.value, score.reason) == (0.0, HEDGE), (completion, score.info)


@pytest.mark.parametrize("completion, reference", [
    ("With 3 or more guests per table, we may need 5 tables.", "5"),  # "3 or more" is no alternative
    ("The answer is 5 \u2014 not 3.", "5"),  # a rejected value is not offered
    ("The answer is 5, not 3.", "5"),
    ("It is 5, not 3.", "5"),
    ("We get $5$, not $3$.", "5"),
    ("It could be 5, or it could be $\\frac{10}{2}$.", "5"),  # one answer written twice
    ("The answer is $\\frac{1}{2}$, but it could also be written as $0.5$.", "\\frac12"),
    ("The answer is (3, 5), but it could also be written as (3,5).", "(3, 5)"),  # a tuple is one value
    ("The answer is $\\{3, 5\\}$, though it may help to check both.", "\\{3, 5\\}"),
    ("That is 150 minutes, or 9000 seconds.", "9000"),  # a restatement, offered as no possibility
    ("The remainder could be 1, 2 or 3, but since $n$ is even, it is $\\boxed{2}$.", "2"),  # an elimination
    ("It could be 3, or it could be 5, so the answer is 5.", "5"),  # the conclusion commits
    ("The answer is 5. It might help to check it with 3 apples.", "5"),  # a next sentence offering no value
    ("The answer is 5. It may be checked as 2 + 3 = 5.", "5"),
    ("The answer is 5. It could also be written as $\\frac{10}{2}$.", "5"),  # the same value again
])
def test_what_is_not_an_alternative_keeps_its_credit(verifier, completion, reference):
    score = verifier.score(completion, reference)
    assert (score.value, score.reason) == (1.0, None), score.info


@pytest.mark.parametrize("completion", ["It is 5, not 3.", "We get $5$, not $3$.", "The answer is 5 \u2014 not 3.",
                                        "It could be 3, or it could be 5, so the answer is 5."])
def test_the_rejected_or_abandoned_value_earns_nothing(verifier, completion):
    assert verifier.score(completion, "3").value == 0.0
