"""The values that cross between the judge and the runner, as the judge sees them.

Arguments go to the runner as tagged data inside `marshal` frames; return values come back
as JSON that `decode` turns strictly into values of exact builtin types (the runner's side
of the format is described in `runner.py`). Anything else the solution returns stays in the
runner and is represented here by an `Opaque` handle.
"""

from __future__ import annotations

import builtins
import marshal
import sys

# Parsing a decimal int is quadratic: a returned 10-million-digit number must not stall the judge.
if hasattr(sys, "set_int_max_str_digits"):
    sys.set_int_max_str_digits(100_000)


class Ref:
    """A name in the solution's namespace; passed as an argument, it stands for that value."""

    name: str


def encode(value, depth=0):
    """Arguments for the runner; a `Remote` stands for a value that lives there."""
    if depth > 200:
        raise ValueError("argument nested too deeply")
    kind = type(value)
    if isinstance(value, Ref):
        return {"~": "ref", "v": value.name}
    if kind is Opaque:
        return {"~": "handle", "v": value.index}
    if kind is type and getattr(builtins, getattr(value, "__name__", ""), None) is value:
        return {"~": "type", "v": value.__name__}
    if value is None or kind in (bool, int, float, str):
        return value
    if kind is list:
        return [encode(v, depth + 1) for v in value]
    if kind is tuple:
        return {"~": "tuple", "v": [encode(v, depth + 1) for v in value]}
    if kind is dict:
        return {"~": "dict", "v": [[encode(k, depth + 1), encode(v, depth + 1)] for k, v in value.items()]}
    if kind in (set, frozenset):
        return {"~": kind.__name__, "v": [encode(v, depth + 1) for v in value]}
    if kind is bytes:
        return {"~": "bytes", "v": value.hex()}
    if kind is complex:
        return {"~": "complex", "v": [value.real, value.imag]}
    raise TypeError(f"cannot pass a value of type {kind.__name__} to the solution")


def decode(data):
    """Strictly rebuild a returned value from plain JSON; anything unexpected raises."""
    kind = type(data)
    if data is None or kind in (bool, int, float, str):
        return data
    if kind is list:
        return [decode(v) for v in data]
    if kind is not dict or set(data) != {"~", "v"}:
        raise ValueError("malformed value")
    tag, body = data["~"], data["v"]
    if tag == "handle" and type(body) is int:
        return Opaque(body)
    if tag == "bytes" and type(body) is str:
        return bytes.fromhex(body)
    if tag == "complex" and type(body) is list and len(body) == 2:
        re_, im = (float(x) if type(x) in (int, float) else _bad() for x in body)
        return complex(re_, im)
    if type(body) is not list:
        raise ValueError("malformed value")
    if tag == "dict":
        pairs = [decode(p) for p in body]
        if any(type(p) is not list or len(p) != 2 for p in pairs):
            raise ValueError("malformed dict")
        return {k: v for k, v in pairs}
    builder = {"tuple": tuple, "set": set, "frozenset": frozenset}.get(tag)
    if builder is None:
        raise ValueError(f"unknown value tag {tag!r}")
    return builder(decode(v) for v in body)


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
    """A length-prefixed marshal frame for the runner (judge to runner only: trusted data)."""
    body = marshal.dumps(message)
    return len(body).to_bytes(4, "big") + body


def describe(exc):
    return f"{type(exc).__name__}: {exc}"[:500]
