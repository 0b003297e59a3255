"""MathVerifier through its public API: extraction, reasons, batch, pickling, registry."""

from __future__ import annotations

import pickle

import pytest

import rlvr.verifiers.math as math_verifier
from rlvr.registry import make_verifier
from rlvr.verifiers.core import BAD_REFERENCE, HEDGE, NO_ANSWER, TIMEOUT, WRONG
from rlvr.verifiers.math import MathVerifier


@pytest.fixture(scope="module")
def verifier():
    return MathVerifier(timeout=1.0)


@pytest.mark.parametrize(
    "reference, completion",
    [
        ("42", "so the total is \\boxed{42}."),
        ("\\frac12", "... \\boxed{0.5}"),
        ("0.75", "$\\boxed{\\dfrac{3}{4}}$"),
        ("-3", "<think>let me see</think> The answer is $\\boxed{-3}$"),
        ("1/3", "\\boxed{\\frac{1}{3}}"),
        ("2.50", "\\boxed{2.5}"),
    ],
)
def test_common_numeric_answers_are_accepted(verifier, reference, completion):
    score = verifier.score(completion, reference)
    assert score.value == 1.0 and score.reason is None


def test_wrong_answer_carries_reason_and_extracted_answer(verifier):
    score = verifier.score("thus \\boxed{41}", "42")
    assert (score.value, score.reason, score.info["answer"]) == (0.0, WRONG, "41")


def test_answer_only_inside_think_block_is_no_answer(verifier):
    score = verifier.score("<think>it is \\boxed{5}</think> I am not sure.", "5")
    assert (score.value, score.reason) == (0.0, NO_ANSWER)


def test_two_different_boxes_are_a_hedge_not_a_concatenation(verifier):
    score = verifier.score("\\boxed{234} ... \\boxed{232}", "234232")
    assert (score.value, score.reason) == (0.0, HEDGE)


def test_unparseable_reference_is_reported(verifier):
    assert verifier.score("\\boxed{5}", "\\frac{1}{").reason == BAD_REFERENCE
    assert verifier.score("\\boxed{5}", None).reason == BAD_REFERENCE


def test_power_tower_is_refused_within_the_limit(verifier):
    score = verifier.score("\\boxed{2^{2^{2^{2^{2^{2}}}}}}", "5")
    assert (score.value, score.reason) == (0.0, TIMEOUT)
    assert score.info["why"].startswith("refused before evaluation"), score.info  # not killed at the limit


def test_batch_matches_single_scoring(verifier):
    refs = ["42", "\\frac{1}{2}", "2\\sqrt{2}", "x^2+2x+1"]
    comps = ["\\boxed{42}", "\\boxed{0.5}", "\\boxed{\\sqrt{8}}", "\\boxed{(x+1)^2}"]
    comps += ["\\boxed{43}", "\\boxed{0.6}", "\\boxed{\\sqrt{7}}", "\\boxed{(x+1)^3}"]
    refs = refs + refs
    batch = verifier.score_batch(comps, refs)
    assert [s.value for s in batch] == [1.0] * 4 + [0.0] * 4
    math_verifier._cache.clear()  # else each single score reads the verdict the batch just stored
    assert [s.value for s in batch] == [verifier.score(c, r).value for c, r in zip(comps, refs)]


def test_picklable_and_registered():
    v = make_verifier("math", timeout=0.5, strict=True)
    clone = pickle.loads(pickle.dumps(v))
    assert isinstance(clone, MathVerifier) and clone.timeout == 0.5 and clone.strict
    assert clone("\\boxed{\\frac{1}{2}}", "0.5") == 1.0


def test_strict_mode_has_no_last_number_fallback():
    text = "So there are 72 apples in total."
    assert MathVerifier().score(text, "72").value == 1.0
    assert MathVerifier(strict=True).score(text, "72").reason == NO_ANSWER


@pytest.mark.parametrize("bad", [0, -1, float("nan"), "1"])
def test_bad_timeout_is_rejected(bad):
    with pytest.raises(ValueError):
        MathVerifier(timeout=bad)
