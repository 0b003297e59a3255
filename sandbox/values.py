"""The values that cross between the tester and the runner, as the tester sees them.

Arguments go to the runner as tagged data inside `marshal` frames; return values come back
as JSON that `decode` turns strictly into values of exact builtin types (the runner's side
of the format is described in `runner.py`). Anything else the solution returns stays in the
runner and is represented here by an `Opaque` handle.
"""

from __future__ import annotations

import builtins
import marshal
import sys

# Parsing a decimal int is quadratic: a returned 10-million-digit number must not stall the tester.
if hasattr(sys, "set_int_max_str_digits"):
    sys.set_int_max_str_digits(100_000)


class Ref:
    """A name in the solution's namespace; passed as an argument, it stands for that value."""

    name: str


# Values cross as a flat token list in prefix order (a container token, then its items), so
# neither side recurses: a value nested as deep as the interpreter allows crosses intact.
CONTAINERS = ("list", "tuple", "dict", "set", "frozenset")
MAX_DEPTH = 100_000  # nesting the tester rebuilds; deeper is refused as unusable, not a crash
MAX_TOKENS = 10_000_000  # a cyclic argument would otherwise never end


def encode(value):
    """Arguments for the runner as flat tokens; a `Remote` stands for a value that lives there."""
    out, todo = [], [value]
    while todo:
        if len(out) >= MAX_TOKENS:
            raise ValueError("argument too large (or cyclic)")
        value = todo.pop()
        kind = type(value)
        if isinstance(value, Ref):
            out.append({"~": "ref", "v": value.name})
        elif kind is Opaque:
            out.append({"~": "handle", "v": value.index})
        elif kind is type and getattr(builtins, getattr(value, "__name__", ""), None) is value:
            out.append({"~": "type", "v": value.__name__})
        elif value is None or kind in (bool, int, float, str):
            out.append(value)
        elif kind in (list, tuple, set, frozenset):
            out.append({"~": kind.__name__, "n": len(value)})
            todo.extend(reversed(list(value)))
        elif kind is dict:
            out.append({"~": "dict", "n": len(value)})
            for key, item in reversed(list(value.items())):
                todo.append(item)
                todo.append(key)
        elif kind is bytes:
            out.append({"~": "bytes", "v": value.hex()})
        elif kind is complex:
            out.append({"~": "complex", "v": [value.real, value.imag]})
        else:
            raise TypeError(f"cannot pass a value of type {kind.__name__} to the solution")
    return out


def decode(tokens):
    """Strictly rebuild a returned value from its flat tokens; anything unexpected raises."""
    if type(tokens) is not list or not tokens:
        raise ValueError("malformed value")
    stack, result, done = [], None, False
    for token in tokens:
        if done:
            raise ValueError("malformed value: trailing data")
        kind = type(token)
        if token is None or kind in (bool, int, float, str):
            value = token
        elif kind is dict and token.keys() == {"~", "n"} and token["~"] in CONTAINERS:
            count = token["n"]
            if type(count) is not int or count < 0:
                raise ValueError("malformed container size")
            if count:
                if len(stack) >= MAX_DEPTH:
                    raise ValueError(f"value nested deeper than {MAX_DEPTH}")
                stack.append([token["~"], count * 2 if token["~"] == "dict" else count, []])
                continue
            value = _build(token["~"], [])
        elif kind is dict and token.keys() == {"~", "v"}:
            value = _leaf(token["~"], token["v"])
        else:
            raise ValueError("malformed value")
        while stack:
            frame = stack[-1]
            frame[2].append(value)
            frame[1] -= 1
            if frame[1]:
                break
            stack.pop()
            value = _build(frame[0], frame[2])
        else:
            result, done = value, True
    if not done:
        raise ValueError("malformed value: truncated")
    return result


def _build(tag, items):
    if tag == "dict":
        return dict(zip(items[0::2], items[1::2]))
    return {"list": list, "tuple": tuple, "set": set, "frozenset": frozenset}[tag](items)


def _leaf(tag, body):
    if tag == "handle" and type(body) is int:
        return Opaque(body)
    if tag == "bytes" and type(body) is str:
        return bytes.fromhex(body)
    if tag == "complex" and type(body) is list and len(body) == 2:
        re_, im = (float(x) if type(x) in (int, float) else _bad() for x in body)
        return complex(re_, im)
    raise ValueError(f"unknown or malformed value tag {tag!r}")


class Opaque:
    """An object the solution returned that is not plain data: it stays in the runner.

    It can be passed back to the solution, but it equals nothing but itself and has no
    truth value, so no assert can pass on it.
    """

    __slots__ = ("index",)

    def __init__(self, index):
        self.index = index

    def __eq__(self, other):
        return self is other

    def __hash__(self):
        return id(self)

    def __bool__(self):
        raise TypeError("an opaque object returned by the solution has no truth value")

    def __repr__(self):
        return f"<solution object #{self.index}>"


def _bad():
    raise ValueError("malformed complex")


def frame(message):
    """A length-prefixed marshal frame for the runner (tester to runner only: trusted data)."""
    body = marshal.dumps(message)
    return len(body).to_bytes(4, "big") + body


def describe(exc):
    return f"{type(exc).__name__}: {exc}"[:500]
