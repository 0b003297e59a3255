"""Finding the final answer in a completion.

Only the final region counts (after `</think>`; nothing when the think block is left
open). The last closed `\\boxed{}`/`\\fbox{}` wins; without a box the fallbacks are, in
order, an `<answer>` block, "final answer is ...", "the answer is ...", a GSM8K `#### 42`
line and, unless strict, the last math span, a bare short answer and the last number.
Several *different* boxed answers are a hedge, unless the text between two of them
retracts the earlier one ("that is wrong", "wait", "actually"): a self-correction then
keeps the later box. Every pass is linear in the length of the completion.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from rlvr.verifiers.boxes import final_region, find_boxes
from rlvr.verifiers.core import HEDGE, NO_ANSWER
from rlvr.verifiers.math.normalize import normalize, strip_math_delimiters

MAX_ANSWER_CHARS = 2000  # a longer "answer" is not a final answer but a dump
MAX_BOXES = 64  # only the last boxes are compared: a longer stream is a hedge either way
_SHORT = 40  # a completion this short and on one line may be the bare answer
_PROSE = re.compile(r"[A-Za-z]{2,}[\s,.]+[A-Za-z]{2,}")  # two words in a row: a sentence, not an answer

_RETRACTION = re.compile(
    r"\b(wrong|incorrect|mistake|error|erroneous|actually|wait|correction|correcting|recheck|re-check|"
    r"oops|not right|not correct|scratch that|instead|recalculat\w*|reconsider\w*|revis\w*|fix)\b",
    re.IGNORECASE,
)
_ANSWER_TAG = re.compile(r"<answer>(.*?)</answer>", re.IGNORECASE | re.DOTALL)
_FINAL_ANSWER = re.compile(r"final\s+answer\s*(?:is|:|=)?\s*:?", re.IGNORECASE)
_THE_ANSWER = re.compile(r"\banswer\s*(?:is|:|=)\s*:?", re.IGNORECASE)
_GSM8K = re.compile(r"####\s*([^\n]+)")
_NUMBER = re.compile(r"(?<![A-Za-z\d.])-?(?:\d[\d,]*(?:\.\d+)?(?:/\d+)?|\.\d+)(?!\d)")
_SENTENCE_END = re.compile(r"\.(?=\s|$)|\n|;")
_HEDGED = "\x00hedge"  # a finder's way of saying "several different answers"
_VERDICT_WORDS = frozenset({"correct", "incorrect", "right", "wrong", "valid", "invalid", "reasonable",
                            "consistent", "confirmed", "verified"})
_CONNECTIVE = re.compile(r"^\s*(?:therefore|thus|hence|so|then|simply|just)\b[\s,:]*", re.IGNORECASE)
_IS = re.compile(r"\b(?:is|are|be|equals|was)\s+", re.IGNORECASE)


@dataclass(frozen=True)
class Extraction:
    """The answer string found, how it was found, and why there is none."""

    answer: str | None
    reason: str | None = None  # NO_ANSWER or HEDGE when the answer cannot be scored as is
    source: str = ""  # boxed, answer_tag, final_answer, answer_is, gsm8k, math_span, whole, last_number
    candidates: tuple[str, ...] = ()  # the different boxed answers of a hedge
    why: str = ""


def extract_answer(text: str, *, prefilled_think: bool = False, loose: bool = True,
                   last_number: bool = False) -> Extraction:
    """The final answer of `text` (see the module docstring for the rules).

    `loose` (off in strict mode) adds the last fallbacks: the last math span (`$...$`),
    a short completion that is nothing but the answer, and with `last_number` the last number.
    """
    region = final_region(text, prefilled_think)
    if region is None:
        return Extraction(None, NO_ANSWER, why="the think block is never closed")
    boxes = find_boxes(region)
    if boxes and boxes[-1].closed:
        tail = region[_box_end(region, boxes[-1]):]
        for source, finder in _FALLBACKS[:2]:  # a final statement after the boxes overrides them
            found = finder(tail)
            if found is not None and len(found) <= MAX_ANSWER_CHARS and normalize(found) and not _PROSE.search(found):
                return _checked(found, source)
    if boxes:
        return _from_boxes(region, boxes)
    last_line = region.rstrip().rpartition("\n")[2].strip()
    if last_line.startswith("####"):  # a GSM8K-style final line outranks answer statements above it
        return _checked(last_line[4:], "gsm8k")
    for source, finder in _FALLBACKS:
        found = finder(region)
        if found is not None:
            return _checked(found, source)
    if loose:
        span = _last_math_span(region)
        if span is not None:
            return _checked(span, "math_span")
        bare = region.strip()
        if 0 < len(bare) <= _SHORT and "\n" not in bare and not _PROSE.search(bare):
            return _checked(bare, "whole")
        if last_number:
            numbers = _NUMBER.findall(region)
            if numbers:
                return _checked(numbers[-1].rstrip(".,"), "last_number")
    return Extraction(None, NO_ANSWER, why="no boxed answer and no answer statement")


def _checked(answer: str, source: str) -> Extraction:
    if answer is _HEDGED:
        return Extraction(None, HEDGE, source, why="several different <answer> blocks")
    answer = answer.strip()
    if len(answer) > MAX_ANSWER_CHARS:
        return Extraction(None, NO_ANSWER, source, why=f"answer longer than {MAX_ANSWER_CHARS} characters")
    if not answer or not normalize(answer):
        return Extraction(None, NO_ANSWER, source, why="empty answer")
    return Extraction(answer, None, source)


def _from_boxes(region: str, boxes) -> Extraction:
    if not boxes[-1].closed:
        return Extraction(None, NO_ANSWER, "boxed", why="the last box is never closed (truncated output)")
    boxes = boxes[-MAX_BOXES:]
    kept = [boxes[0]]
    for box in boxes[1:]:
        between = region[_box_end(region, kept[-1]):box.start]
        if _same(box.content, kept[-1].content) or _RETRACTION.search(between):
            kept[-1] = box  # a repeat, or a self-correction: the later box stands
        else:
            kept.append(box)
    contents = [b.content.strip() for b in kept]
    if len(contents) > 1:
        if any(_blank(c) for c in contents):
            contents = [c for c in contents if not _blank(c)] or contents[-1:]
        if len(contents) > 1:
            return Extraction(", ".join(contents), HEDGE, "boxed", tuple(contents),
                              why=f"{len(contents)} different boxed answers")
    return _checked(contents[-1], "boxed")


def _blank(content: str) -> bool:
    return len(content) <= MAX_ANSWER_CHARS and not normalize(content)


def _box_end(region: str, box) -> int:
    return region.find(box.content, box.start) + len(box.content) + 1


def _same(a: str, b: str) -> bool:
    """The same answer written twice (`2` and `2.0`), as far as the cheap stages can tell."""
    if max(len(a), len(b)) > MAX_ANSWER_CHARS:
        return a.strip() == b.strip()
    if normalize(a) == normalize(b):
        return True
    from rlvr.verifiers.math.grader import grade

    try:
        return grade(a, b) is True
    except Exception:  # noqa: BLE001 - a malformed box is simply a different answer
        return False


def _answer_tag(region: str) -> str | None:
    found = _ANSWER_TAG.findall(region)
    if not found:
        return None
    if any(not _same(item, found[-1]) for item in found[-MAX_BOXES:]):
        return _HEDGED  # several different answer blocks
    return found[-1]


def _statement(pattern: re.Pattern[str]):
    def find(region: str) -> str | None:
        last = None
        for match in pattern.finditer(region):
            last = match
        if last is None:
            return None
        rest = region[last.end():].lstrip()
        if rest.startswith("$"):  # "the answer is $\frac{1}{2}$." -> the math span
            close = rest.find("$", 1 if not rest.startswith("$$") else 2)
            if close > 0:
                return strip_math_delimiters(rest[:close + 1])
        if rest.startswith("\\(") or rest.startswith("\\["):
            close = rest.find("\\)" if rest.startswith("\\(") else "\\]")
            if close > 0:
                return rest[2:close]
        m = _SENTENCE_END.search(rest)
        answer = rest[:m.start()] if m else rest
        verbs = list(_IS.finditer(answer))
        if verbs:  # "Final Answer: the largest $n$ is 34"
            answer = answer[verbs[-1].end():]
        answer = _CONNECTIVE.sub("", answer)  # "the answer is therefore 3"
        span = _last_math_span(answer)
        if span is not None:
            return span
        answer = answer.strip().strip("*").strip()
        if answer.lower() in _VERDICT_WORDS:  # "our answer is correct": a check, not an answer
            return None
        return answer or None
    return find


def _last_math_span(text: str) -> str | None:
    """The content of the last `$...$`, `$$...$$`, `\\(...\\)` or `\\[...\\]` span in `text`."""
    best: tuple[int, str] | None = None
    for opener, closer in (("$$", "$$"), ("\\[", "\\]"), ("\\(", "\\)")):
        end = text.rfind(closer)
        if end > 0:
            start = text.rfind(opener, 0, end)
            if start >= 0 and text[start + len(opener):end].strip() and (best is None or end > best[0]):
                best = (end, text[start + len(opener):end])
    dollars = [i for i, ch in enumerate(text) if ch == "$" and (i == 0 or text[i - 1] != "\\")]
    found = set(dollars)
    singles = [i for i in dollars if i + 1 not in found and i - 1 not in found]
    if len(singles) >= 2 and len(singles) % 2 == 0:
        start, end = singles[-2], singles[-1]
        if text[start + 1:end].strip() and (best is None or end > best[0]):
            best = (end, text[start + 1:end])
    return best[1].strip() if best else None


def _gsm8k(region: str) -> str | None:
    found = _GSM8K.findall(region)
    return found[-1].strip() if found else None


_FALLBACKS = (
    ("answer_tag", _answer_tag),
    ("final_answer", _statement(_FINAL_ANSWER)),
    ("answer_is", _statement(_THE_ANSWER)),
    ("gsm8k", _gsm8k),
)

# Words that join alternatives: "3 or 4", "either 3 or 4", "3 \text{ or } 4".
_HEDGE_WORDS = re.compile(r"\beither\b|\bor\b|\\lor\b|\\vee\b|\bpossibly\b|\bmaybe\b", re.IGNORECASE)


def has_hedge_words(answer: str) -> bool:
    """True when the answer offers alternatives in words."""
    return bool(_HEDGE_WORDS.search(answer))


def joins_values(answer: str) -> bool:
    """True for `3 and 4`, `3 \\text{ and } 4`: several numeric values joined by a word."""
    text = re.sub(r"\\text\{\s*(or|and)\s*\}", r" \1 ", answer)
    parts = [p.strip(" ,") for p in re.split(r"\band\b", text)]
    return len(parts) > 1 and all(re.search(r"\d", p) for p in parts)
