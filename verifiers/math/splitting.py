"""Splitting an answer at separators outside brackets, the first step of reading any shape.

Interval brackets need not match in type (`[1, 2)`), so depth counts any opener against any
closer; `\\{`, `\\}` and `\\langle`, `\\rangle` count as brackets too.
"""

from __future__ import annotations

OPEN = "([{"
CLOSE = ")]}"


def split_top(s: str, seps: tuple[str, ...]) -> list[str]:
    """Split `s` at separators outside any brackets (`(`, `[`, `{`, `\\{` ... of either kind).

    Interval brackets need not match in type (`[1, 2)`), so depth counts any opener
    against any closer.
    """
    return split_top_with(s, seps)[0]


def split_top_with(s: str, seps: tuple[str, ...]) -> tuple[list[str], list[str]]:
    """`split_top`, also returning which separator stood at each cut (one linear pass)."""
    parts, found, depth, start, i, n = [], [], 0, 0, 0, len(s)
    while i < n:
        ch = s[i]
        if ch == "\\":
            if s.startswith("\\{", i) or s.startswith("\\langle", i):
                depth += 1
            elif s.startswith("\\}", i) or s.startswith("\\rangle", i):
                depth -= 1
            elif depth == 0:
                sep = next((t for t in seps if s.startswith(t, i) and not continues(s, i, t)), None)
                if sep:
                    parts.append(s[start:i])
                    found.append(sep)
                    i += len(sep)
                    start = i
                    continue
            i += 2 if not s.startswith("\\langle", i) else 7
            continue
        if ch in OPEN:
            depth += 1
        elif ch in CLOSE:
            depth -= 1
        elif depth == 0:
            sep = next((t for t in seps if s.startswith(t, i)), None)
            if sep:
                parts.append(s[start:i])
                found.append(sep)
                i += len(sep)
                start = i
                continue
        i += 1
    parts.append(s[start:])
    return parts, found


def continues(s: str, i: int, token: str) -> bool:
    """`\\cup` must not match the start of `\\cupcake`."""
    end = i + len(token)
    return token[-1].isalpha() and end < len(s) and s[end].isalpha()


def closing(s: str, at: int) -> int:
    """Index of the bracket (any type) closing the one at `at`, or -1."""
    depth, i, n = 0, at, len(s)
    while i < n:
        ch = s[i]
        if ch == "\\":
            if s.startswith("\\{", i) or s.startswith("\\langle", i):
                depth += 1
            elif s.startswith("\\}", i) or s.startswith("\\rangle", i):
                depth -= 1
                if depth == 0:
                    return i
            i += 2 if not s.startswith("\\langle", i) else 7
            continue
        if ch in OPEN:
            depth += 1
        elif ch in CLOSE:
            depth -= 1
            if depth == 0:
                return i
        i += 1
    return -1
