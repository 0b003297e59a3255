"""Locating the final answer region and the `\\boxed{}` answers in it.

Shared by the format rewards and the math verifier, so that both agree on what "the
final answer" is. Everything here is a single left-to-right scan: linear in the length
of the completion whatever it contains, so a 1 MB adversarial output costs milliseconds.
"""

from __future__ import annotations

from dataclasses import dataclass

THINK_OPEN = "<think>"
THINK_CLOSE = "</think>"
_BOX_COMMANDS = ("\\boxed", "\\fbox")


@dataclass(frozen=True)
class Box:
    content: str  # the text inside the braces (or after `\boxed ` up to `$`/end of line)
    closed: bool  # False when the output ended before the closing brace
    start: int  # offset of the backslash in the scanned text


def final_region(text: str, prefilled_think: bool = False) -> str | None:
    """The part of `text` where a final answer may stand, or None when there is none.

    With a think block, only what follows the last `</think>` counts: an answer given only
    while thinking is no answer. An opened but never closed think block (a truncated
    output) leaves no final region. With `prefilled_think` the chat template already opened
    the block, so the completion starts inside it and must close it.
    """
    lower = text.lower()
    close = lower.rfind(THINK_CLOSE)
    if close >= 0:
        return text[close + len(THINK_CLOSE):]
    if prefilled_think or THINK_OPEN in lower:
        return None
    return text


def find_boxes(text: str) -> list[Box]:
    """All top-level `\\boxed`/`\\fbox` answers in `text`, in order.

    Braces are matched with escapes (`\\{`, `\\}`) skipped; a box nested in another is part of
    the outer one. `\\boxed 5` (no brace) takes the rest of the token run up to `$` or the
    end of the line. An unclosed brace yields a box with `closed=False`, and ends the scan.
    """
    boxes: list[Box] = []
    i, n = 0, len(text)
    while True:
        i = text.find("\\", i)
        if i < 0:
            return boxes
        command = next((c for c in _BOX_COMMANDS if text.startswith(c, i)), None)
        if command is None or (i + len(command) < n and text[i + len(command)].isalpha()):
            i += 1  # another command (\boxedA is not \boxed)
            continue
        j = i + len(command)
        while j < n and text[j] in " \t":
            j += 1
        if j < n and text[j] == "{":
            end = match_brace(text, j)
            if end < 0:
                boxes.append(Box(text[j + 1:], False, i))
                return boxes
            boxes.append(Box(text[j + 1:end], True, i))
            i = end + 1
        else:
            stop = j
            while stop < n and text[stop] not in "$\n":
                stop += 1
            boxes.append(Box(text[j:stop].strip(), True, i))
            i = max(stop, i + 1)


def match_brace(text: str, open_at: int, open_ch: str = "{", close_ch: str = "}") -> int:
    """Index of the bracket closing the one at `open_at` (escaped ones skipped), or -1."""
    depth = 0
    i, n = open_at, len(text)
    while i < n:
        ch = text[i]
        if ch == "\\":
            i += 2
            continue
        if ch == open_ch:
            depth += 1
        elif ch == close_ch:
            depth -= 1
            if depth == 0:
                return i
        i += 1
    return -1


def last_boxed(text: str, prefilled_think: bool = False) -> str | None:
    """The content of the last closed box in the final region, or None."""
    region = final_region(text, prefilled_think)
    if region is None:
        return None
    boxes = find_boxes(region)
    if not boxes or not boxes[-1].closed:
        return None
    return boxes[-1].content
