"""Hard but equivalent answers (#52), class by class, each beside the wrong answers it must still reject.

Every case is scored through `MathVerifier.score` on a boxed completion (the production path, worker
pool included where sympy is needed). Cases are (answer, reference); ACCEPT lists equal pairs,
REJECT lists pairs a rule must not let through.
"""

from __future__ import annotations

import pytest

from rlvr.verifiers.math import MathVerifier, grade

ACCEPT = {
    "renamed": [
        ("f(z)=z", "f(x)=x"),
        ("g(t) = t^2 - 1", "g(x) = x^2 - 1"),
        ("x = n\\pi", "x = k\\pi"),
        ("n\\pi", "k\\pi"),
        ("x = k\\pi, k \\in \\mathbb{Z}", "n\\pi"),
        ("\\frac{\\pi}{4} + m\\pi \\text{ for any integer } m", "\\frac{\\pi}{4}+k\\pi"),
        ("(-32+3t, 64-5t)", "(-32+3x, 64-5x)"),
        ("(2s+1, s-4, 3s)", "(2u+1, u-4, 3u)"),
    ],
    "label": [
        ("m_{\\max} = n^2-n-1", "n^2-n-1"),
        ("n^2-n-1", "m_{\\max} = n^2-n-1"),
        ("C = \\frac{2\\pi}{3}", "\\frac{2\\pi}{3}"),
        ("(P(x), Q(x)) = (x^2+1, 2x)", "(x^2+1, 2x)"),
        ("y = \\frac{3}{4}", "\\frac34"),
        ("\\text{Area} = 24", "24"),
        ("Area: 24", "24"),
        ("x = 2, y = -1", "y = -1, x = 2"),
    ],
    "set_builder": [
        ("\\{x \\mid -1<x<1\\}", "(-1,1)"),
        ("(-1,1)", "\\{x \\mid -1<x<1\\}"),
        ("\\{x \\in \\mathbb{R} : x \\geq 3\\}", "[3, \\infty)"),
        ("\\{t \\mid t < 0 \\text{ or } t > 2\\}", "(-\\infty, 0) \\cup (2, \\infty)"),
        ("\\{x \\mid x > -2, x \\le 5\\}", "(-2, 5]"),
        ("\\{x \\mid x \\le -2 \\text{ or } x = 1\\}", "(-\\infty,-2] \\cup \\{1\\}"),
        ("a \\le -2 \\text{ or } a = 1", "(-\\infty,-2] \\cup \\{1\\}"),
        ("(-\\infty,-2] \\cup \\{1\\}", "a \\le -2 \\text{ or } a = 1"),
        ("4 < m \\le 8 \\text{ or } 10 \\le m < 12", "(4,8] \\cup [10,12)"),
        ("[10,12) \\cup (4,8]", "4 < m \\le 8 \\text{ or } 10 \\le m < 12"),
    ],
    "unicode": [
        ("x ≠ 3", "x \\ne 3"),
        ("x ≥ 2", "[2, \\infty)"),
        ("x ≤ −1", "(-\\infty, -1]"),
        ("(−∞, 2) ∪ (3, ∞)", "(-\\infty,2)\\cup(3,\\infty)"),
        ("[0, 5] ∩ [2, 7]", "[0,5]\\cap[2,7]"),
        ("2π/3", "\\frac{2\\pi}{3}"),
        ("√3/2", "\\frac{\\sqrt{3}}{2}"),
        ("±4", "\\pm 4"),
        ("x ＞ 5", "(5, \\infty)"),
        ("x<sup>2</sup> + 1", "x^2+1"),
        ("2<sup>10</sup>", "1024"),
        ("x² − 4", "x^2-4"),
        ("&pi;/2", "\\frac{\\pi}{2}"),
    ],
    "ordinal_unit_words": [
        ("12^{\\mathrm{th}}", "12"),
        ("12^{th}", "12"),
        ("15th Day", "15"),
        ("3rd", "3"),
        ("165.5 grams", "165.5"),
        ("40 \\text{ chocolate candies}, 60 \\text{ fruit candies}", "(40, 60)"),
        ("18 \\text{ red marbles}, 7 \\text{ blue marbles}", "18, 7"),
    ],
    "words_list": [
        ("7 and -5", "-5, 7"),
        ("-5 \\text{ and } 7", "7, -5"),
        ("x = 7 \\text{ or } x = -5", "-5, 7"),
        ("\\text{Minimum: } 1, \\text{Maximum: } 3", "1, 3"),
        ("Minimum: 1, Maximum: 3", "(1, 3)"),
        ("1, 3", "\\text{Minimum: } 1, \\text{Maximum: } 3"),
    ],
    "pm": [
        ("(\\pm\\sqrt2, 0, \\pm\\sqrt2)",
         "(\\sqrt2,0,\\sqrt2),(\\sqrt2,0,-\\sqrt2),(-\\sqrt2,0,\\sqrt2),(-\\sqrt2,0,-\\sqrt2)"),
        ("(-\\sqrt2,0,-\\sqrt2),(\\sqrt2,0,\\sqrt2),(-\\sqrt2,0,\\sqrt2),(\\sqrt2,0,-\\sqrt2)",
         "(\\pm\\sqrt2, 0, \\pm\\sqrt2)"),
        ("(\\pm 1, 2)", "(1, 2), (-1, 2)"),
        ("(\\pm 3, \\mp 1)", "(3, -1), (-3, 1)"),
    ],
    "rounding": [
        ("\\frac{84}{13}", "6.46"),
        ("-\\frac{84}{13}", "-6.46"),
        ("\\frac{2}{3}", "0.67"),
        ("\\frac{1}{7}", "0.142857"),
        ("\\frac{1}{3}", "0.3333"),
        ("\\sqrt{2}", "1.41"),
        ("2\\pi", "6.283"),
        ("\\log_2 3", "1.585"),
    ],
    "exact_zero": [  # computed in floating point these are noise near 0, not 0
        ("\\sin(\\pi)", "0"),
        ("\\cos(\\frac{\\pi}{2})", "0"),
        ("0", "\\sin(2\\pi)"),
        ("\\sin(10^{100}\\pi)", "0"),
    ],
}

REJECT = {
    "renamed": [
        ("f(x)=x+1", "f(z)=z"),
        ("f(t) = t^2 + 1", "f(x) = x^2 - 1"),
        ("2y", "2x"),  # a name the question gave is no dummy
        ("x^2+t^2=1", "x^2+y^2=1"),
        ("k\\pi", "\\frac{n\\pi}{2}"),
        ("(-32+3t, 64+5t)", "(-32+3x, 64-5x)"),
        ("(t, 2)", "(x, 2)"),  # a bare letter is not a parameter in an expression
        ("Q", "P"),
        ("x = k\\pi, k \\in \\mathbb{Z}", "2n\\pi"),
    ],
    "label": [
        ("C = \\frac{\\pi}{3}", "\\frac{2\\pi}{3}"),
        ("(P(x), Q(x)) = (2x, x^2+1)", "(x^2+1, 2x)"),
        ("m_{\\max} = n^2-n+1", "n^2-n-1"),
        ("x = 1, y = 2", "x = 2, y = 1"),
        ("Area: 25", "24"),
    ],
    "set_builder": [
        ("(-1,1]", "\\{x \\mid -1<x<1\\}"),
        ("\\{x \\mid -1<x<1\\}", "[-1,1]"),
        ("\\{x \\mid -1 \\le x<1\\}", "(-1,1)"),
        ("\\{n \\in \\mathbb{Z} \\mid 1 \\le n \\le 3\\}", "[1, 3]"),  # integers, not an interval
        ("\\{x \\mid y > 2\\}", "(2, \\infty)"),  # the condition is not on the set's variable
        ("\\{x \\mid x < 0 \\text{ and } x > 2\\}", "(-\\infty, 0) \\cup (2, \\infty)"),
        ("a < -2 \\text{ or } a = 1", "(-\\infty,-2] \\cup \\{1\\}"),
        ("4 < m < 8 \\text{ or } 10 \\le m < 12", "(4,8] \\cup [10,12)"),
        ("(4,8] \\cup [10,12]", "4 < m \\le 8 \\text{ or } 10 \\le m < 12"),
    ],
    "unicode": [
        ("x ≥ 2", "(2, \\infty)"),
        ("x ≠ 2", "x \\ne 3"),
        ("(−∞, 2] ∪ (3, ∞)", "(-\\infty,2)\\cup(3,\\infty)"),
        ("[0, 5] ∪ [2, 7]", "[0,5]\\cap[2,7]"),
        ("x ＜ 5", "(5, \\infty)"),
        ("x<sup>3</sup> + 1", "x^2+1"),
        ("2<sup>10</sup>", "1000"),
        ("±4", "4"),
    ],
    "ordinal_unit_words": [
        ("13^{\\mathrm{th}}", "12"),
        ("15th Day", "16"),
        ("165 grams", "165.5"),
        ("60 \\text{ chocolate candies}, 40 \\text{ fruit candies}", "(40, 60)"),
        ("40 \\text{ chocolate candies}, 61 \\text{ fruit candies}", "(40, 60)"),
    ],
    "words_list": [
        ("7 and -5", "-5, 8"),
        ("7 and 5", "-5, 7"),
        ("7 and -5 and 2", "-5, 7"),
        ("\\text{Minimum: } 3, \\text{Maximum: } 1", "1, 3"),  # labelled in the wrong order
        ("Maximum: 3, Minimum: 1", "(1, 3)"),
        ("Minimum: 1, Maximum: 4", "1, 3"),
    ],
    "pm": [
        ("(\\pm\\sqrt2, 0, \\pm\\sqrt2)", "(\\sqrt2,0,\\sqrt2),(-\\sqrt2,0,-\\sqrt2)"),
        ("(\\pm\\sqrt2, 0, \\pm\\sqrt2)", "(\\sqrt2,0,\\sqrt2),(\\sqrt2,0,-\\sqrt2),(-\\sqrt2,0,\\sqrt2)"),
        ("(\\pm\\sqrt2, 1, \\pm\\sqrt2)",
         "(\\sqrt2,0,\\sqrt2),(\\sqrt2,0,-\\sqrt2),(-\\sqrt2,0,\\sqrt2),(-\\sqrt2,0,-\\sqrt2)"),
        ("(\\pm 3, \\mp 1)", "(3, 1), (-3, -1)"),
        ("(\\pm 3, \\mp 1)", "(3, -1), (-3, 1), (3, 1), (-3, -1)"),
        ("(\\pm 1, 2)", "(1, 2)"),
    ],
    "rounding": [
        ("6.47", "6.46"),
        ("6.461", "6.46"),  # a decimal answer is compared exactly
        ("\\frac{85}{13}", "6.46"),
        ("\\frac{123}{50}", "2.5"),  # 2.46 has a finite expansion: 2.5 is then read as exact
        ("\\frac{84}{13}", "6"),  # an integer reference is exact
        ("\\frac{84}{13}", "6.460"),  # the reference's own number of decimals: 6.462
        ("\\sqrt{2}", "1.42"),
        ("\\frac{1}{3}", "0.3334"),
    ],
    "exact_zero": [
        ("\\sin(\\pi)", "10^{-70}"),
        ("\\sin(\\pi)+10^{-50}", "0"),
        ("\\sin(10^{100})", "0"),
        ("\\sin(10^{100}\\pi)", "1"),
        ("\\cos(\\pi)", "0"),
    ],
}


def _params(table):
    return [pytest.param(a, r, id=f"{cls}-{a}-{r}") for cls, pairs in table.items() for a, r in pairs]


@pytest.fixture(scope="module")
def verifier():
    return MathVerifier(timeout=5.0)


def _score(verifier, answer, reference):
    return verifier.score(f"So the final answer is $\\boxed{{{answer}}}$.", reference)


@pytest.mark.parametrize("answer, reference", _params(ACCEPT))
def test_equivalent_answer_is_accepted(verifier, answer, reference):
    score = _score(verifier, answer, reference)
    assert score.value == 1.0, f"{answer!r} for {reference!r}: {score.reason} {score.info}"


@pytest.mark.parametrize("answer, reference", _params(REJECT))
def test_wrong_answer_is_still_rejected(verifier, answer, reference):
    score = _score(verifier, answer, reference)
    assert score.value == 0.0 and score.reason is not None, f"{answer!r} for {reference!r}: {score.info}"


def test_every_class_has_accepted_and_rejected_cases():
    assert set(ACCEPT) == set(REJECT)
    assert all(len(ACCEPT[c]) >= 4 and len(REJECT[c]) >= 5 for c in ACCEPT)


@pytest.mark.parametrize("answer, reference", [("\\frac{84}{13}", "6.46"), ("\\log_2 3", "1.585")])
def test_rounded_references_can_be_turned_off(answer, reference):
    strict = MathVerifier(timeout=5.0, rounded_references=False)
    assert _score(strict, answer, reference).value == 0.0
    assert _score(MathVerifier(timeout=5.0), answer, reference).value == 1.0


def test_grade_takes_the_rounding_option():
    assert grade("\\frac{84}{13}", "6.46") is True
    assert grade("\\frac{84}{13}", "6.46", rounded_references=False) is False

