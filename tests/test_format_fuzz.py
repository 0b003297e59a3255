"""Property tests: the format rewards never raise, stay in range, and scale linearly."""

import time

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rlvr.verifiers import (
    FinalBoxed,
    OverlongPenalty,
    RepetitionPenalty,
    SoftThinkFormat,
    TagCount,
    ThinkFormat,
)

VERIFIERS = [
    ThinkFormat(), ThinkFormat(answer_tags=True), ThinkFormat(prefilled_think=True),
    SoftThinkFormat(), SoftThinkFormat(answer_tags=True), TagCount(), TagCount(answer_tags=False),
    FinalBoxed(), FinalBoxed(prefilled_think=True), OverlongPenalty(max_length=200, buffer=50),
    RepetitionPenalty(),
]

# Text built from the pieces that matter to these checks, plus arbitrary unicode.
PIECES = st.sampled_from([
    "<think>", "</think>", "<answer>", "</answer>", "<THINK>", "\\boxed{", "\\boxed", "\\fbox{", "{", "}",
    "\\{", "\\}", "\\", "$", "\n", " ", "4", "x", "the answer is", "\\frac{1}{2}",
])
TEXTS = st.one_of(st.text(), st.lists(st.one_of(PIECES, st.text(max_size=5)), max_size=40).map("".join))


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(TEXTS)
def test_format_verifiers_never_raise_and_stay_in_range(text):
    for verifier in VERIFIERS:
        score = verifier.score(text)
        assert -1.0 <= score.value <= 1.0
        if score.value < verifier.best:
            assert score.reason, (verifier, text)
        else:
            assert score.reason is None


@given(st.lists(st.fixed_dictionaries({"role": st.sampled_from(["user", "assistant", "system"]),
                                        "content": st.one_of(st.text(), st.none(), st.integers())})))
def test_chat_input_never_raises(messages):
    for verifier in VERIFIERS:
        verifier.score(messages)


ADVERSARIAL = {
    "think_tags": "<think>" * 8 + "</think>" * 8,
    "open_boxes": "\\boxed{" * 8,
    "boxes": "\\boxed{1}" * 8,
    "braces": "{" * 8 + "}" * 4,
    "backslashes": "\\" * 8,
    "words": "a b c a b c ",
    "mixed": "<think>x</think>\\boxed{\\frac{1}{2}} <answer>y</answer> ",
}


def _cpu_seconds(verifier, text):
    best = float("inf")
    for _ in range(3):
        start = time.process_time()
        verifier.score(text)
        best = min(best, time.process_time() - start)
    return best


@pytest.mark.parametrize("name", sorted(ADVERSARIAL))
def test_one_megabyte_scales_linearly(name):
    """10x the input must cost about 10x the time, far from the 100x of a quadratic scan."""
    unit = ADVERSARIAL[name]
    big = unit * (1_000_000 // len(unit))
    small = big[: len(big) // 10]
    for verifier in VERIFIERS:
        t_small = max(_cpu_seconds(verifier, small), 1e-3)
        t_big = _cpu_seconds(verifier, big)
        assert t_big < 40 * t_small, (verifier, name, t_small, t_big)
