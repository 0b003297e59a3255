"""Format rewards, hardened where the usual checks are gameable.

Peers' format rewards are regexes that a policy learns to satisfy without reasoning:
empty think blocks, two think blocks, the answer hidden inside the thinking, a stream of
boxes, text after the closing answer tag. Each check here is a single linear scan built
on `str.count`/`str.find` (no backtracking regex), returns 0 with reason `format`,
`no_answer` or `hedge` when it fails, and says in `info["why"]` what it saw.

Tags are matched case-insensitively, so `<THINK>` counts as a second think tag rather
than slipping past the count.
"""

from __future__ import annotations

from typing import Any

from rlvr.verifiers.boxes import THINK_CLOSE, THINK_OPEN, final_region, find_boxes
from rlvr.verifiers.core import (
    FORMAT,
    HEDGE,
    NO_ANSWER,
    OVERLONG,
    REPETITION,
    Score,
    Verifier,
    completion_text,
)

ANSWER_OPEN = "<answer>"
ANSWER_CLOSE = "</answer>"


def _fail(reason: str, why: str) -> Score:
    return Score(0.0, reason, info={"why": why})


def _split_think(text: str, lower: str, prefilled: bool) -> tuple[str, str] | str:
    """(thinking, rest) for a well-formed leading think block, else a description of the fault."""
    opens, closes = lower.count(THINK_OPEN), lower.count(THINK_CLOSE)
    if prefilled:
        if opens:
            return "a <think> tag although the template already opened the block"
        start = 0
    else:
        if opens == 0:
            return "no <think> tag"
        if opens > 1:
            return "more than one <think> tag"
        if lower.lstrip().find(THINK_OPEN) != 0:
            return "text before <think>"
        start = lower.find(THINK_OPEN) + len(THINK_OPEN)
    if closes == 0:
        return "the think block is never closed"
    if closes > 1:
        return "more than one </think> tag"
    end = lower.find(THINK_CLOSE)
    if end < start:
        return "</think> before <think>"
    thinking = text[start:end]
    if not thinking.strip():
        return "empty think block"
    return thinking, text[end + len(THINK_CLOSE):]


def _check_answer_tags(rest: str, strict: bool) -> str | None:
    """None when `rest` holds exactly one non-empty <answer> block (and, if strict, nothing else)."""
    lower = rest.lower()
    if lower.count(ANSWER_OPEN) != 1 or lower.count(ANSWER_CLOSE) != 1:
        return "not exactly one <answer>...</answer> after the think block"
    a, b = lower.find(ANSWER_OPEN), lower.find(ANSWER_CLOSE)
    if b < a:
        return "</answer> before <answer>"
    if not rest[a + len(ANSWER_OPEN):b].strip():
        return "empty answer block"
    if strict and rest[:a].strip():
        return "text between </think> and <answer>"
    if strict and rest[b + len(ANSWER_CLOSE):].strip():
        return "text after </answer>"
    return None


class ThinkFormat(Verifier):
    """Strict: exactly one `<think>` block at the start, not empty, then a non-empty answer.

    With `answer_tags`, the answer is exactly one `<answer>...</answer>` right after the think
    block with nothing after it, and no answer tags inside the thinking. With
    `prefilled_think` the chat template has already emitted `<think>`: the completion
    starts inside the block and must close it.
    """

    name = "think_format"

    def __init__(self, answer_tags: bool = False, prefilled_think: bool = False):
        self.answer_tags = answer_tags
        self.prefilled_think = prefilled_think

    strict = True  # answer block must be the whole rest of the completion

    def score(self, completion: Any, reference: Any = None, **task_fields: Any) -> Score:
        text = completion_text(completion)
        lower = text.lower()
        split = self._split(text, lower)
        if isinstance(split, str):
            return _fail(FORMAT, split)
        thinking, rest = split
        if self.answer_tags:
            low_thinking = thinking.lower()
            if ANSWER_OPEN in low_thinking or ANSWER_CLOSE in low_thinking:
                return _fail(FORMAT, "answer tags inside the think block")
            fault = _check_answer_tags(rest, self.strict)
            if fault:
                return _fail(FORMAT, fault)
        elif not rest.strip():
            return _fail(NO_ANSWER, "nothing after </think>")
        return Score(1.0)

    def _split(self, text: str, lower: str) -> tuple[str, str] | str:
        return _split_think(text, lower, self.prefilled_think)

    def __repr__(self) -> str:
        return f"{type(self).__name__}(answer_tags={self.answer_tags}, prefilled_think={self.prefilled_think})"


class SoftThinkFormat(ThinkFormat):
    """Lenient: text may precede the think block and follow the answer block.

    Still exactly one closed, non-empty think block and a non-empty answer after it: the
    leniency is about surrounding chatter, never about empty or duplicated blocks.
    """

    name = "soft_think_format"
    strict = False

    def _split(self, text: str, lower: str) -> tuple[str, str] | str:
        if self.prefilled_think:
            return _split_think(text, lower, True)
        if lower.count(THINK_OPEN) != 1:
            return "not exactly one <think> tag"
        start = lower.find(THINK_OPEN)
        # Re-use the strict check on the text from <think> on; chatter before it is allowed.
        return _split_think(text[start:], lower[start:], False)


class TagCount(Verifier):
    """Partial credit for the tag structure: one equal share per check that holds.

    Checks, in order: one `<think>` at the start (none when prefilled); one `</think>` after
    non-empty thinking; then with `answer_tags` one `<answer>` after `</think>` and one
    `</answer>` after non-empty answer text with nothing behind it, else a non-empty answer
    after `</think>`. Unlike counting tags alone, empty or misplaced tags earn nothing.
    """

    name = "tag_count"

    def __init__(self, answer_tags: bool = True, prefilled_think: bool = False):
        self.answer_tags = answer_tags
        self.prefilled_think = prefilled_think

    def score(self, completion: Any, reference: Any = None, **task_fields: Any) -> Score:
        text = completion_text(completion)
        lower = text.lower()
        opens, closes = lower.count(THINK_OPEN), lower.count(THINK_CLOSE)
        open_at = lower.find(THINK_OPEN)
        close_at = lower.find(THINK_CLOSE)
        checks: dict[str, bool] = {}
        if self.prefilled_think:
            checks["open"] = opens == 0
            think_start = 0
        else:
            checks["open"] = opens == 1 and lower.lstrip().startswith(THINK_OPEN)
            think_start = open_at + len(THINK_OPEN)
        checks["close"] = (
            checks["open"] and closes == 1 and close_at >= think_start and bool(text[think_start:close_at].strip())
        )
        rest = text[close_at + len(THINK_CLOSE):] if checks["close"] else ""
        if self.answer_tags:
            low_rest = rest.lower()
            a, b = low_rest.find(ANSWER_OPEN), low_rest.find(ANSWER_CLOSE)
            one_each = lower.count(ANSWER_OPEN) == 1 and lower.count(ANSWER_CLOSE) == 1
            checks["answer_open"] = checks["close"] and one_each and a >= 0 and not rest[:a].strip()
            checks["answer_close"] = (
                checks["answer_open"] and b > a
                and bool(rest[a + len(ANSWER_OPEN):b].strip())
                and not rest[b + len(ANSWER_CLOSE):].strip()
            )
        else:
            checks["answer"] = checks["close"] and bool(rest.strip())
        value = sum(checks.values()) / len(checks)
        failed = [k for k, ok in checks.items() if not ok]
        if not failed:
            return Score(1.0)
        return Score(value, FORMAT, info={"why": f"failed checks: {', '.join(failed)}"})


class FinalBoxed(Verifier):
    """Exactly one final `\\boxed{}` answer, after the think block if there is one.

    Repeating the same box is tolerated; two different boxes are a hedge. An empty box,
    an unclosed box (a truncated output) and a box only inside the thinking earn nothing.
    """

    name = "boxed"

    def __init__(self, prefilled_think: bool = False):
        self.prefilled_think = prefilled_think

    def score(self, completion: Any, reference: Any = None, **task_fields: Any) -> Score:
        region = final_region(completion_text(completion), self.prefilled_think)
        if region is None:
            return _fail(NO_ANSWER, "no text after the think block")
        boxes = find_boxes(region)
        if not boxes:
            return _fail(NO_ANSWER, "no \\boxed{} answer")
        if not boxes[-1].closed:
            return _fail(FORMAT, "unclosed \\boxed{")
        contents = {"".join(b.content.split()) for b in boxes}
        if "" in contents:
            return _fail(FORMAT, "empty \\boxed{}")
        if len(contents) > 1:
            return _fail(HEDGE, f"{len(contents)} different boxed answers")
        return Score(1.0, info={"answer": boxes[-1].content})


class OverlongPenalty(Verifier):
    """DAPO's soft overlong punishment: 0 up to `max_length - buffer`, then a linear ramp
    down to -1 at `max_length`, and -1 beyond.

    Length is counted in tokens when the caller passes the task field `completion_tokens`
    (the trainer does), else with `tokenizer.encode` if one is given, else in characters.
    """

    name = "overlong"
    best = 0.0

    def __init__(self, max_length: int = 4096, buffer: int = 1024, tokenizer: Any = None):
        if not 0 < buffer <= max_length:
            raise ValueError(f"need 0 < buffer <= max_length, got buffer={buffer}, max_length={max_length}")
        self.max_length = int(max_length)
        self.buffer = int(buffer)
        self.tokenizer = tokenizer

    def score(self, completion: Any, reference: Any = None, **task_fields: Any) -> Score:
        length = task_fields.get("completion_tokens")
        if not isinstance(length, int) or isinstance(length, bool):
            text = completion_text(completion)
            length = len(self.tokenizer.encode(text)) if self.tokenizer is not None else len(text)
        safe = self.max_length - self.buffer
        if length <= safe:
            return Score(0.0, info={"length": length})
        value = -1.0 if length > self.max_length else (safe - length) / self.buffer
        return Score(value, OVERLONG, info={"length": length})


class RepetitionPenalty(Verifier):
    """Penalty proportional to the share of repeated word n-grams: `max_penalty * (1 - unique/total)`.

    Catches degenerate loops ("the the the", repeated boxes) that pad a completion.
    Completions shorter than one n-gram are not penalised.
    """

    name = "repetition"
    best = 0.0

    def __init__(self, ngram_size: int = 3, max_penalty: float = -1.0):
        if ngram_size < 1:
            raise ValueError(f"ngram_size must be >= 1, got {ngram_size}")
        if max_penalty > 0:
            raise ValueError(f"max_penalty must be <= 0, got {max_penalty}")
        self.ngram_size = int(ngram_size)
        self.max_penalty = float(max_penalty)

    def score(self, completion: Any, reference: Any = None, **task_fields: Any) -> Score:
        words = completion_text(completion).lower().split()
        n = self.ngram_size
        total = len(words) - n + 1
        if total < 1:
            return Score(0.0)
        unique = len({tuple(words[i:i + n]) for i in range(total)})
        repeated = 1.0 - unique / total
        if repeated == 0:
            return Score(0.0)
        return Score(self.max_penalty * repeated, REPETITION, info={"repeated_fraction": repeated})
