"""Finding the final answer in a completion.

Only the final region counts (after `</think>`; nothing when the think block is left
open). The last closed `\\boxed{}`/`\\fbox{}` wins; without a box the fallbacks are, in
order, an `<answer>` block, "final answer is ...", "the answer is ...", a GSM8K `#### 42`
line and, unless strict, the last math span, a bare answer and the last number.
Several *different* boxed answers are a hedge, unless the text between two of them
retracts the earlier one ("that is wrong", "wait", "on second thought"): a self-correction
then keeps the later box. Math spans or numbers joined by "or", "and" or commas are
returned joined (`$12$ or $13$` gives `12 or 13`), so that the verifier's one hedge rule
sees every alternative whichever path found the answer. The sentence the answer stands in
is read too: a different value offered in another clause of it ("it could be 3, or it
could be 5") makes the answer a hedge on every path. Every pass is linear in the length
of the completion.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass

from rlvr.verifiers.boxes import final_region, find_boxes
from rlvr.verifiers.core import HEDGE, NO_ANSWER
from rlvr.verifiers.math.normalize import normalize, undouble_backslashes
from rlvr.verifiers.math.numeric import to_rational

MAX_ANSWER_CHARS = 2000  # a longer "answer" is not a final answer but a dump
_LIST_GAP = 40  # boxes this close in a reference (`x = \\boxed{1}, y = \\boxed{2}`) list values
MAX_BOXES = 64  # only the last boxes are compared: a longer stream is a hedge either way
_PROSE = re.compile(r"[A-Za-z]{2,}[\s,.]+[A-Za-z]{2,}")  # two words in a row: a sentence, not an answer

_RETRACTION = re.compile(
    r"\b(wrong|incorrect|mistake\w*|mistaken|error|erroneous|actually|wait|correction|correcting|corrected|"
    r"recheck|re-check|double-check\w*|oops|not right|not correct|scratch that|instead|recalculat\w*|"
    r"re-?comput\w*|re-?evaluat\w*|re-?examin\w*|re-?do|redoing|re-?work\w*|re-?think\w*|reconsider\w*|"
    r"revis\w*|fix\w*|miscalculat\w*|misread|miscount\w*|misstep|overlook\w*|overlooked|sorry|apolog\w*|"
    r"on second thought|on reflection|on further|upon further|hold on|hmm+|let me try again|try again|"
    r"that's not|that is not|should be|should have been|correct answer|right answer|flawed|slip|typo)\b",
    re.IGNORECASE,
)
_ANSWER_TAG = re.compile(r"<answer>(.*?)</answer>", re.IGNORECASE | re.DOTALL)
_FINAL_ANSWER = re.compile(r"final\s+answer\s*(?:is|:|=)?\s*:?", re.IGNORECASE)
_THE_ANSWER = re.compile(r"\banswer\s*(?:is|:|=)\s*:?", re.IGNORECASE)
_GSM8K = re.compile(r"####\s*([^\n]+)")
_NUMBER = re.compile(r"(?<![A-Za-z\d.])-?(?:\d[\d,]*(?:\.\d+)?(?:/\d+)?|\.\d+)(?!\d)")
_SENTENCE_END = re.compile(r"\.(?=\s|$)|\n|;")
_ENV = re.compile(r"\\begin\{([pbBvV]?matrix|smallmatrix)\}")
# What may stand between two alternatives: "or" (maybe softened), "and", a comma
_JOIN_OR = re.compile(r",?\s*(?:either\s+)?(?:or(?:\s+(?:maybe|possibly|perhaps|even|else))?|maybe|possibly|perhaps)",
                      re.IGNORECASE)
_JOIN_AND = re.compile(r",|;|,?\s*and", re.IGNORECASE)
_NUMBER_WINDOW = 20_000
_CONCLUSION = re.compile(r"(?:therefore|thus|hence|so|in conclusion|finally|in total|altogether)\b", re.IGNORECASE)
_NOTHING_MORE = re.compile(r"[\s.,;:!)*]*")
_HEDGED = "\x00hedge"  # a finder's way of saying "several different answers"
_VERDICT_WORDS = frozenset({"correct", "incorrect", "right", "wrong", "valid", "invalid", "reasonable",
                            "consistent", "confirmed", "verified"})
_CONNECTIVE = re.compile(r"^\s*(?:therefore|thus|hence|so|then|simply|just)\b[\s,:]*", re.IGNORECASE)
_IS = re.compile(r"\b(?:is|are|be|equals|was)\s+", re.IGNORECASE)
# Alternatives across clauses ("it could be 3, or it could be 5"): a clause joined by one of these
# words that says its value is only possible offers a second answer.
_ALT_JOIN = re.compile(r"\b(?:or|but|though|although|alternatively|otherwise|else|whereas|yet)\b", re.IGNORECASE)
_POSSIBLE = re.compile(r"\b(?:either|could|might|may|maybe|perhaps|possibly|probably|alternatively)\b", re.IGNORECASE)
_NOT_AN_ALTERNATIVE = re.compile(r"\bor\s+(?:more|less|fewer|greater|higher|lower|larger|smaller|above|below|so|"
                                 r"equal|later|earlier|longer|shorter)\b", re.IGNORECASE)  # "3 or more"
_NEGATED = re.compile(r"(?:(?<!\\)\bnot|n't|\bnever|\bnor|\brather\s+than|\binstead\s+of|\bother\s+than|\bexcept|"
                      r"\bexcluding)(?:\s+(?:equal\s+to|be|been|the|a|an|exactly|just|simply))*[\s:=]*$", re.IGNORECASE)
_NEGATED_TAIL = re.compile(r"\s*(?:[,;:(]|\u2014|\u2013|--?)?\s*(?:(?:but|and)\s+)?(?:(?<!\\)\bnot|\bnever|"
                           r"\brather\s+than|\binstead\s+of)\b.*$", re.IGNORECASE | re.DOTALL)  # "5 - not 3"
_NEGATION_WORDS = ("not", "n't", "never", "nor", "rather", "instead", "other", "except", "excluding")
_ENDS_INSIDE = re.compile(r"[.!?]\s*(?:\$\$?|\\\)|\\\])$")
_SENTENCE_BREAK = re.compile(r"[.!?](?=\s|$)|\n")
# A sentence that goes on with another value: "3. Or it could be 5.", "3. It might also be 5.", "3. Maybe 5."
_GOES_ON = re.compile(r"\s*(?:or|alternatively|otherwise|perhaps|maybe|possibly|"
                      r"(?:it|that|this|the\s+(?:answer|result|value))\s+(?:might|could|may))\b", re.IGNORECASE)
# A next sentence that offers the value right after it as a possibility: "3. It might also be 5", "3. Perhaps 5".
_OFFERED_NEXT = re.compile(r"[.!?;]\s+(?:(?:it|that|this|the\s+(?:answer|result|value))\s+(?:might|could|may)"
                           r"(?:\s+(?:also|instead|well|even|just))*\s+(?:be|equal)|(?:perhaps|maybe|possibly)"
                           r"(?:\s+(?:it\s+is|it's|also|instead))*)\s*[:=]?\s*$", re.IGNORECASE)
_CONCLUDES = re.compile(r"\b(?:therefore|thus|hence|so|consequently|in conclusion|finally|in total|altogether)\b|"
                        r"\banswer\s*(?:is|:|=)", re.IGNORECASE)
_GROUP = re.compile(r"\([^()\n]*\d[^()\n]*\)|\[[^\[\]\n]*\d[^\[\]\n]*\]")  # a tuple or interval is one value
_SENTENCE_WINDOW = 1000  # how far a sentence is followed from its answer, each way


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
    a completion that is nothing but the answer, and with `last_number` the last number (first, when
    it ends a concluding sentence after every math span).
    """
    region = final_region(text, prefilled_think)
    if region is None:
        return Extraction(None, NO_ANSWER, why="the think block is never closed")
    region = undouble_backslashes(region)
    boxes = find_boxes(region)
    if boxes and boxes[-1].closed:
        tail = region[_box_end(region, boxes[-1]):]
        for source, finder in _FALLBACKS[:2]:  # a final statement after the boxes overrides them
            found = finder(tail)
            if found is not None and len(found[0]) <= MAX_ANSWER_CHARS and normalize(found[0]) \
                    and not _PROSE.search(found[0]):
                return _checked(*found, source)
    if boxes:
        return _from_boxes(region, boxes)
    last_line = region.rstrip().rpartition("\n")[2].strip()
    if last_line.startswith("####"):  # a GSM8K-style final line outranks answer statements above it
        return _checked(last_line[4:], last_line[4:], "gsm8k")
    for source, finder in _FALLBACKS:
        found = finder(region)
        if found is not None:
            return _checked(*found, source)
    if loose:
        spans = _spans(region)
        for _ in range(MAX_BOXES):  # "$5$, not $3$": a rejected last span is not the answer
            if not spans or not _negated(region, spans[-1][0]):
                break
            spans.pop()
        number = _last_number_run(region) if last_number else None
        if number is not None and _concludes(region, number[1], spans[-1][1] if spans else 0):
            return _checked(number[0], _sentence_at(region, number[1]), "last_number")
        if spans:
            return _checked(_run(region, spans, len(spans) - 1, forward=False),
                            _sentence_at(region, spans[-1][0], spans[-1][1]), "math_span")
        bare = region.strip()
        if 0 < len(bare) <= MAX_ANSWER_CHARS and "\n" not in bare and not _PROSE.search(bare):
            return _checked(bare, bare, "whole")  # a bare answer, however long: no box, no `$`, no sentence
        if number is not None:
            return _checked(number[0], _sentence_at(region, number[1]), "last_number")
    return Extraction(None, NO_ANSWER, why="no boxed answer and no answer statement")


def reference_answer(reference: str) -> str:
    """The answer a reference states. A bare answer is itself; a full solution gives its answer
    the way a completion does: its last box (boxes a few words apart, as in `\\boxed{1} and
    \\boxed{2}`, list several values; boxes sentences apart are intermediate results then the
    answer), a final `#### 72` line, or a closing "the answer is ..." statement."""
    return _reference_answer(reference) if len(reference) <= 4096 else _find_reference_answer(reference)


def _find_reference_answer(reference: str) -> str:
    if "\\boxed" in reference or "\\fbox" in reference:
        found = extract_answer(reference, loose=False)
        if found.reason == HEDGE and found.candidates:
            boxes = [b for b in find_boxes(reference) if b.closed]
            gaps = [reference[_box_end(reference, a):b.start] for a, b in zip(boxes, boxes[1:])]
            if any(len(gap) > _LIST_GAP or _SENTENCE_END.search(gap) for gap in gaps):
                return found.candidates[-1]  # a worked solution boxing an intermediate result
            return ", ".join(found.candidates)
        if found.answer is not None:
            return found.answer
        closed = [b.content for b in find_boxes(reference) if b.closed]
        return ", ".join(closed) if closed else reference
    if "####" in reference:
        answer = reference.rpartition("####")[2].strip().partition("\n")[0].strip()
        return answer or reference
    if len(reference) > 80 and _PROSE.search(reference):  # a worked solution without a box
        found = extract_answer(reference, loose=False)
        if found.answer is not None and found.reason is None:
            return found.answer
    return reference


_reference_answer = functools.lru_cache(maxsize=1 << 14)(_find_reference_answer)  # a group shares its reference


def _checked(answer: str, sentence: str, source: str) -> Extraction:
    """The answer found in `sentence` by `source`, unless it is none or the sentence hedges."""
    if answer is _HEDGED:
        return Extraction(None, HEDGE, source, why="several different <answer> blocks")
    answer = answer.strip()
    if len(answer) > MAX_ANSWER_CHARS:
        return Extraction(None, NO_ANSWER, source, why=f"answer longer than {MAX_ANSWER_CHARS} characters")
    if not answer or not normalize(answer):
        return Extraction(None, NO_ANSWER, source, why="empty answer")
    if offers_alternatives(sentence):
        return Extraction(answer, HEDGE, source, why="another clause of the answer's sentence offers a different value")
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
    return _checked(contents[-1], _sentence_at(region, kept[-1].start, _box_end(region, kept[-1])), "boxed")


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


def _answer_tag(region: str) -> tuple[str, str] | None:
    found = _ANSWER_TAG.findall(region)
    if not found:
        return None
    if any(not _same(item, found[-1]) for item in found[-MAX_BOXES:]):
        return _HEDGED, ""  # several different answer blocks
    return found[-1], found[-1]


def _statement(pattern: re.Pattern[str]):
    def find(region: str) -> tuple[str, str] | None:
        """The answer the last statement gives, and the sentence it stands in."""
        last = None
        for match in pattern.finditer(region):
            last = match
        if last is None:
            return None
        rest = region[last.end():].lstrip()
        found = find_in(rest)
        return None if found is None else (found, _sentence_at(region, last.start(), len(region) - len(rest)))

    def find_in(rest: str) -> str | None:
        spans = _spans(rest)
        if spans and spans[0][0] == 0:  # "the answer is $\frac{1}{2}$." -> the math span(s)
            return _run(rest, spans, 0, forward=True)
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
        answer = _NEGATED_TAIL.sub("", answer).strip() or answer  # "5, not 3" answers 5
        if _PROSE.search(answer) and not has_hedge_words(answer):  # "Final Answer: it began 3 hours ago"
            numbers = _NUMBER.findall(answer)
            if len(numbers) == 1:
                return numbers[0].rstrip(".,")
        if answer.lower() in _VERDICT_WORDS:  # "our answer is correct": a check, not an answer
            return None
        return answer or None
    return find


def _last_math_span(text: str) -> str | None:
    """The content of the last math span in `text` (`$...$`, `$$...$$`, `\\(...\\)`, `\\[...\\]`, or a
    bare matrix environment); spans joined by "or", "and" or commas come back joined."""
    spans = _spans(text)
    return _run(text, spans, len(spans) - 1, forward=False) if spans else None


def _spans(text: str) -> list[tuple[int, int, str]]:
    """The math spans of `text` as (start, end, content), in order, outer spans only. Dollars pair
    up left to right; with an odd count the first one is taken for a currency sign. Linear."""
    found: list[tuple[int, int, str]] = []
    singles, doubles = [], []
    i = text.find("$")
    while 0 <= i < len(text):
        if i > 0 and text[i - 1] == "\\":
            i = text.find("$", i + 1)
            continue
        if text.startswith("$$", i):
            doubles.append(i)
            i = text.find("$", i + 2)
        else:
            singles.append(i)
            i = text.find("$", i + 1)
    for marks, width in ((singles, 1), (doubles, 2)):
        marks = marks[len(marks) % 2:]
        found.extend((marks[k], marks[k + 1] + width, text[marks[k] + width:marks[k + 1]])
                     for k in range(0, len(marks), 2))
    for opener, closer in (("\\(", "\\)"), ("\\[", "\\]")):
        i = text.find(opener)
        while i >= 0:
            if i > 0 and text[i - 1] == "\\":  # `\\[2pt]`: a row break, not display math
                i = text.find(opener, i + 2)
                continue
            j = text.find(closer, i + 2)
            if j < 0:
                break
            found.append((i, j + 2, text[i + 2:j]))
            i = text.find(opener, j + 2)
    unclosed: set[str] = set()  # an environment never closed after some point is never closed later
    for m in _ENV.finditer(text):
        if m.group(1) in unclosed:
            continue
        end = text.find(f"\\end{{{m.group(1)}}}", m.end())
        if end < 0:
            unclosed.add(m.group(1))
            continue
        end += len(m.group(1)) + 6
        found.append((m.start(), end, text[m.start():end]))
    found.sort(key=lambda span: (span[0], -span[1]))
    outer: list[tuple[int, int, str]] = []
    for span in found:
        if span[2].strip() and (not outer or span[0] >= outer[-1][1]):
            outer.append(span)
    return outer


def _joined(between: str) -> str | None:
    """How two neighbouring answers are joined: " or ", " and ", ", ", or None (not a join)."""
    between = between.strip()
    if _JOIN_OR.fullmatch(between):
        return " or "
    if _JOIN_AND.fullmatch(between):
        return " and " if "and" in between.lower() else ", "
    return None


def _run(text: str, spans: list[tuple[int, int, str]], at: int, *, forward: bool) -> str:
    """The answer at `spans[at]`, joined with its neighbours when they are alternatives (`$12$ or
    $13$`, `$3$, $4$ and $5$`): the hedge rule then sees the whole list. A join by "or" always
    counts; by "and" or a comma only when the list ends the sentence (`$5$, and $x$ is ...` is
    the answer 5 followed by more prose), or when every item is a plain number (`12 and 13 apples`)."""
    joins: list[str] = []
    step = 1 if forward else -1
    k = at
    while 0 <= k + step < len(spans) and len(joins) < MAX_BOXES:  # a longer list is no answer anyway
        left, right = sorted((k, k + step))
        join = _joined(text[spans[left][1]:spans[right][0]])
        if join is None:
            break
        joins.append(join)
        k += step
    first, last = (at, k) if forward else (k, at)
    if not forward:
        joins.reverse()
    if first == last:
        return spans[at][2].strip()
    if " or " not in joins and not all(_is_number(span[2]) for span in spans[first:last + 1]):
        sentence_end = _SENTENCE_END.search(text, spans[last][1])
        if not _NOTHING_MORE.fullmatch(text[spans[last][1]:sentence_end.start() if sentence_end else len(text)]):
            return spans[at][2].strip()
    parts = [spans[first][2].strip()]
    for join, span in zip(joins, spans[first + 1:last + 1]):
        parts.append(join + span[2].strip())
    return "".join(parts)


def _concludes(region: str, at: int, after: int) -> bool:
    """Whether the number at `at` stands after every math span (which end by `after`) in a concluding
    sentence ("Therefore, there are 12 sequences."): the conclusion outranks a formula before it."""
    start = max(region.rfind(". ", 0, at), region.rfind("\n", 0, at), after - 1) + 1
    return at >= after and bool(_CONCLUSION.match(region[start:at].lstrip(" .\n")))


def _is_number(text: str) -> bool:
    return len(text) < 100 and to_rational(normalize(text)) is not None


def _last_number_run(region: str) -> tuple[str, int] | None:
    """The last number of the text, joined with the numbers before it when they are alternatives
    (`12 or 13`), by the same rule as math spans; and where the last number starts."""
    for start in (max(0, len(region) - _NUMBER_WINDOW), 0):  # the tail first: a run is at most 64 numbers
        spans = []
        for m in _NUMBER.finditer(region, start):
            number = m.group().rstrip(".,")
            spans.append((m.start(), m.start() + len(number), number))
        for _ in range(MAX_BOXES):  # "It is 5, not 3.": a rejected last number is not the answer
            if not spans or not _negated(region, spans[-1][0]):
                break
            spans.pop()
        if spans:
            return _run(region, spans, len(spans) - 1, forward=False), spans[-1][0]
        if start == 0:
            return None
    return None


def _negated(text: str, at: int) -> bool:
    """Whether the value at `at` is rejected ("not 3", "rather than 3"): then it is not offered."""
    window = text[max(0, at - 40):at]
    lower = window.lower()
    return any(word in lower for word in _NEGATION_WORDS) and bool(_NEGATED.search(window))


def _masked(text: str, values=None) -> str:
    """`text` with the inside of its math spans and boxes (or of `values`) blanked out, same length."""
    if values is None:
        values = [(a, b) for a, b, _ in _spans(text)] + [(b.start, _box_end(text, b)) for b in find_boxes(text)
                                                         if b.closed]
    out, at = [], 0
    for start, end, *_ in sorted(values):
        start = max(start, at)
        if end > start:  # a span that ends its sentence inside (`$a = 13.$`) keeps that period
            stop = "." if _ENDS_INSIDE.search(text, start, end) else "x"
            out += [text[at:start], "x" * (end - start - 1), stop]
            at = end
    out.append(text[at:])
    return "".join(out)


def _sentence_at(region: str, start: int, end: int | None = None) -> str:
    """The sentence of `region` that holds `region[start:end]`, never cut inside a math span or box.
    A sentence that goes on with "Or ..." or "Alternatively, ..." is the same sentence."""
    end = start if end is None else end
    lo, hi = max(0, start - _SENTENCE_WINDOW), min(len(region), end + _SENTENCE_WINDOW)
    if not _ALT_JOIN.search(region, lo, hi) and not _POSSIBLE.search(region, lo, hi):
        return ""  # nothing near could join an alternative: no sentence needed
    text = _masked(region[lo:hi])
    first, last = 0, len(text)
    for m in _SENTENCE_BREAK.finditer(text):
        if _GOES_ON.match(text, m.end()):
            continue
        if m.end() <= start - lo:
            first = m.end()
        elif m.start() >= end - lo:
            last = m.start()
            break
    return region[lo + first:lo + last]


def _values(sentence: str) -> list[tuple[int, int, str, bool]]:
    """The values a sentence states, in order, as (start, end, text, boxed): math spans, boxes,
    bracketed tuples and intervals, numbers."""
    found = [(*span, False) for span in _spans(sentence)]
    found += [(b.start, _box_end(sentence, b), b.content, True) for b in find_boxes(sentence) if b.closed]
    for pattern in (_GROUP, _NUMBER):
        masked = _masked(sentence, found)
        for m in pattern.finditer(masked):
            value = m.group().rstrip(".,")
            found.append((m.start(), m.start() + len(value), value, False))
    found.sort(key=lambda v: (v[0], -v[1]))
    outer: list[tuple[int, int, str, bool]] = []
    for value in found:
        if not outer or value[0] >= outer[-1][1]:
            outer.append(value)
    return outer[-MAX_BOXES:]


def offers_alternatives(sentence: str) -> bool:
    """True when a clause of `sentence` offers a value other than the one before it as a possibility:
    "it could be 3, or it could be 5", "maybe 3, but it might also be 5". Two neighbouring values count
    when "or", "but", "though", ... stands between them followed by "could", "might", "may", "maybe",
    "perhaps", "possibly", ..., when the next sentence offers the later one ("3. It might also be 5."),
    or when a bare "or" joins a value to a box (`3 or \\boxed{5}`), and they
    differ; only values after the sentence's last conclusion ("so", "the answer is") are read. Not
    alternatives: a rejected value ("5, not 3"), "3 or more", the same value twice, a list of spans or
    numbers (`$3$ or $5$`: the answer's own list rule judges it), a tuple `(3, 5)`, a restatement
    ("150 minutes, or 9000 seconds") and a value the text between retracts."""
    if len(sentence) > 2 * _SENTENCE_WINDOW + MAX_ANSWER_CHARS or len(_NUMBER.findall(sentence)) + \
            sentence.count("$") < 2:
        return False
    sentence = _NOT_AN_ALTERNATIVE.sub(lambda m: " " * len(m.group()), sentence)
    if not _ALT_JOIN.search(sentence) and not _POSSIBLE.search(sentence):
        return False
    values = [v for v in _values(sentence) if not _negated(sentence, v[0])]
    prose = _masked(sentence, values)
    cut = max((m.end() for m in _CONCLUDES.finditer(prose) if any(v[0] >= m.end() for v in values)), default=0)
    values = [v for v in values if v[0] >= cut]
    for (_, end, a, boxed_a), (start, _, b, boxed_b) in zip(values, values[1:]):
        between = sentence[end:start]
        joined = _joined(between)
        if joined is not None and not (boxed_a or boxed_b):
            continue  # a list of spans or numbers: when it is the answer, the list rule judges it
        join = _ALT_JOIN.search(between)
        offered = joined == " or " or bool(join and _POSSIBLE.search(between, join.start())) or \
            bool(_OFFERED_NEXT.search(between))
        if offered and not _RETRACTION.search(between) and not _same(a.strip(), b.strip()):
            return True
    return False


def _gsm8k(region: str) -> tuple[str, str] | None:
    found = _GSM8K.findall(region)
    return (found[-1].strip(), found[-1]) if found else None


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
