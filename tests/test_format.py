"""Every format rule, passing and failing, including the gaming tricks peers' checks accept."""

import pytest

from rlvr.verifiers import (
    FORMAT,
    HEDGE,
    NO_ANSWER,
    OVERLONG,
    REPETITION,
    FinalBoxed,
    OverlongPenalty,
    RepetitionPenalty,
    SoftThinkFormat,
    TagCount,
    ThinkFormat,
)
from rlvr.verifiers.boxes import final_region, find_boxes, last_boxed

GOOD = "<think>2 plus 2 is 4</think> The answer is \\boxed{4}."
GOOD_TAGS = "<think>2 plus 2 is 4</think>\n<answer>4</answer>\n"


# --- strict think format -------------------------------------------------------------------

@pytest.mark.parametrize("text", [
    GOOD,
    "  \n<think>x</think>y",  # leading whitespace is fine
    "<THINK>x</THINK> y",  # tags are case-insensitive
])
def test_think_format_accepts(text):
    score = ThinkFormat().score(text)
    assert score.value == 1.0 and score.reason is None


@pytest.mark.parametrize("text,reason,why", [
    ("<think></think> 4", FORMAT, "empty think block"),
    ("<think> \n </think> 4", FORMAT, "empty think block"),
    ("<think>a</think><think>b</think> 4", FORMAT, "more than one <think>"),
    ("<think>a</think> 4 <think>b</think>", FORMAT, "more than one <think>"),
    ("<think>the answer is \\boxed{4}</think>", NO_ANSWER, "nothing after"),
    ("<think>the answer is 4</think>   \n", NO_ANSWER, "nothing after"),
    ("<think>never closed, 4", FORMAT, "never closed"),
    ("<think>a <think>nested</think></think> 4", FORMAT, "more than one <think>"),
    ("<think>a </think> b </think> 4", FORMAT, "more than one </think>"),
    ("preamble <think>a</think> 4", FORMAT, "text before <think>"),
    ("no tags at all, 4", FORMAT, "no <think>"),
    ("</think> a <think> 4", FORMAT, "text before <think>"),
    ("<think>a</THINK> b <Think>c</think> 4", FORMAT, "more than one"),
    ("", FORMAT, "no <think>"),
])
def test_think_format_rejects(text, reason, why):
    score = ThinkFormat().score(text)
    assert score.value == 0.0
    assert score.reason == reason
    assert why in score.info["why"]


@pytest.mark.parametrize("text,ok", [
    (GOOD_TAGS, True),
    ("<think>x</think><answer> 4 </answer>", True),
    ("<think>x</think><answer>4</answer> and more", False),  # text after </answer>
    ("<think>x</think>so<answer>4</answer>", False),  # text between blocks
    ("<think>x</think><answer>4</answer><answer>5</answer>", False),
    ("<think>x</think><answer> </answer>", False),
    ("<think>x</think><answer>4", False),  # unclosed
    ("<think><answer>4</answer></think>", False),  # answer only inside thinking
    ("<think>x <answer>3</answer></think><answer>4</answer>", False),
    ("<think>x</think></answer>4<answer>", False),
    ("<think>x</think><answer><answer>4</answer></answer>", False),  # nested
])
def test_think_format_with_answer_tags(text, ok):
    score = ThinkFormat(answer_tags=True).score(text)
    assert score.value == (1.0 if ok else 0.0)
    assert (score.reason is None) == ok


@pytest.mark.parametrize("text,ok", [
    ("2 plus 2 is 4</think> \\boxed{4}", True),
    ("</think> \\boxed{4}", False),  # empty thinking
    ("<think>x</think> 4", False),  # template already opened it
    ("still thinking, 4", False),  # never closed
    ("a</think> b </think> 4", False),
    ("thinking</think>", False),
])
def test_think_format_prefilled(text, ok):
    assert ThinkFormat(prefilled_think=True).score(text).value == (1.0 if ok else 0.0)


def test_think_format_reads_last_assistant_message():
    messages = [
        {"role": "user", "content": "What is 2+2?"},
        {"role": "assistant", "content": [{"type": "text", "text": GOOD}]},
    ]
    assert ThinkFormat().score(messages).value == 1.0
    assert ThinkFormat().score([{"role": "user", "content": GOOD}]).value == 0.0
    assert ThinkFormat().score(None).reason == FORMAT
    assert ThinkFormat().score(42).value == 0.0


# --- soft think format ---------------------------------------------------------------------

@pytest.mark.parametrize("text,ok", [
    ("Sure! <think>x</think> 4", True),
    ("<think>x</think><answer>4</answer> bye", True),
    ("chatter <think> </think> 4", False),
    ("<think>a</think><think>b</think> 4", False),
    ("<think>x</think>   ", False),
    ("<think>x", False),
])
def test_soft_think_format(text, ok):
    assert SoftThinkFormat().score(text).value == (1.0 if ok else 0.0)


def test_soft_think_format_answer_tags_allow_chatter_but_not_duplicates():
    soft = SoftThinkFormat(answer_tags=True)
    assert soft.score("Hi <think>x</think> so <answer>4</answer> done").value == 1.0
    assert soft.score("<think>x</think><answer>4</answer><answer>5</answer>").value == 0.0
    assert soft.score("<think>x</think><answer></answer>").value == 0.0


# --- tag count -----------------------------------------------------------------------------

@pytest.mark.parametrize("text,value", [
    (GOOD_TAGS, 1.0),
    ("<think>x</think><answer>4</answer> trailing", 0.75),
    ("<think>x</think> 4", 0.5),
    ("<think></think><answer>4</answer>", 0.25),  # empty thinking earns only the open tag
    ("<think>x", 0.25),
    ("<answer>4</answer><think>x</think>", 0.0),  # out of order
    ("</answer></think><answer><think>", 0.0),  # tags alone, any order, earn nothing
    ("", 0.0),
])
def test_tag_count(text, value):
    score = TagCount().score(text)
    assert score.value == pytest.approx(value)
    assert (score.reason is None) == (value == 1.0)
    if value < 1.0:
        assert score.reason == FORMAT


def test_tag_count_without_answer_tags_and_prefilled():
    assert TagCount(answer_tags=False).score("<think>x</think> 4").value == 1.0
    assert TagCount(answer_tags=False).score("<think>x</think>").value == pytest.approx(2 / 3)
    assert TagCount(answer_tags=False, prefilled_think=True).score("x</think> 4").value == 1.0
    assert TagCount(answer_tags=False, prefilled_think=True).score("<think>x</think> 4").value == 0.0


# --- boxes ---------------------------------------------------------------------------------

@pytest.mark.parametrize("text,contents", [
    ("\\boxed{4}", ["4"]),
    ("\\boxed{\\frac{1}{2}} then \\fbox{x}", ["\\frac{1}{2}", "x"]),
    ("\\boxed{\\{1, 2\\}}", ["\\{1, 2\\}"]),
    ("\\boxed{\\text{yes}}", ["\\text{yes}"]),
    ("$\\boxed 5$", ["5"]),
    ("\\boxed{a\\boxed{b}}", ["a\\boxed{b}"]),
    ("\\boxedx{3}", []),
    ("no box", []),
])
def test_find_boxes(text, contents):
    assert [b.content for b in find_boxes(text)] == contents


def test_unclosed_box_is_flagged_and_not_an_answer():
    boxes = find_boxes("so \\boxed{\\frac{1}{2}")
    assert len(boxes) == 1 and not boxes[0].closed
    assert last_boxed("so \\boxed{\\frac{1}{2}") is None


def test_final_region():
    assert final_region("a</think>b") == "b"
    assert final_region("<think>a") is None
    assert final_region("plain") == "plain"
    assert final_region("plain", prefilled_think=True) is None
    assert last_boxed("<think>\\boxed{1}</think> \\boxed{2}") == "2"
    assert last_boxed("<think>\\boxed{1}</think> nothing") is None


@pytest.mark.parametrize("text,value,reason", [
    ("\\boxed{4}", 1.0, None),
    ("<think>x</think> \\boxed{4} so \\boxed{ 4 }", 1.0, None),  # the same answer twice is no hedge
    ("\\boxed{98} \\boxed{65} \\boxed{96}", 0.0, HEDGE),
    ("\\boxed{234} ... \\boxed{232}", 0.0, HEDGE),
    ("\\boxed{} \\boxed{}", 0.0, FORMAT),
    ("\\boxed{ }", 0.0, FORMAT),
    ("the answer is \\boxed{4", 0.0, FORMAT),
    ("<think>\\boxed{4}</think> four", 0.0, NO_ANSWER),
    ("<think>\\boxed{4}", 0.0, NO_ANSWER),
    ("4", 0.0, NO_ANSWER),
])
def test_final_boxed(text, value, reason):
    score = FinalBoxed().score(text)
    assert (score.value, score.reason) == (value, reason)


# --- penalties -----------------------------------------------------------------------------

def test_overlong_penalty_ramp():
    pen = OverlongPenalty(max_length=100, buffer=20)
    assert pen.score("x" * 80).value == 0.0 and pen.score("x" * 80).reason is None
    assert pen.score("x" * 90).value == pytest.approx(-0.5)
    assert pen.score("x" * 90).reason == OVERLONG
    assert pen.score("x" * 100).value == pytest.approx(-1.0)
    assert pen.score("x" * 101).value == -1.0
    # token counts from the trainer take precedence over characters
    assert pen.score("x" * 500, completion_tokens=85).value == pytest.approx(-0.25)
    assert pen.score("short", completion_tokens=120).value == -1.0


def test_overlong_penalty_uses_a_tokenizer():
    class Words:
        def encode(self, text):
            return text.split()

    pen = OverlongPenalty(max_length=10, buffer=5, tokenizer=Words())
    assert pen.score("a " * 5).value == 0.0
    assert pen.score("a " * 10).value == -1.0


def test_overlong_penalty_rejects_bad_config():
    with pytest.raises(ValueError):
        OverlongPenalty(max_length=10, buffer=20)
    with pytest.raises(ValueError):
        OverlongPenalty(max_length=10, buffer=0)


def test_repetition_penalty():
    pen = RepetitionPenalty(ngram_size=2)
    assert pen.score("one two three four").value == 0.0
    assert pen.score("one two").value == 0.0
    assert pen.score("too short").reason is None
    looped = pen.score("a b a b a b a b a b")  # 9 bigrams, 2 unique
    assert looped.value == pytest.approx(-(1 - 2 / 9))
    assert looped.reason == REPETITION
    assert RepetitionPenalty(ngram_size=2, max_penalty=-0.5).score("a b a b a b a b a b").value == pytest.approx(
        -0.5 * (1 - 2 / 9)
    )
    with pytest.raises(ValueError):
        RepetitionPenalty(max_penalty=0.5)
