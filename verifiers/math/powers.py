"""Huge integer powers compared by structure: `10^{10^{10}}`, `2024^{4046}`, `100^{10^{9}}`.

Such references are legitimate answers, but their values have billions of digits: the
evaluator and sympy rightly refuse to expand them. Here a power of integers is written as
`r^E`, with `r` the smallest integer whose power the base is (100 is 10^2) and `E` an
exact integer or, when even the exponent is too large, a multiple `k * s^F` of such a
power. By unique factorisation two such forms are equal exactly when their parts are,
so equality and inequality are both proved without computing the number. Values up to
`EXACT_BITS` bits are plain Python integers and compare exactly.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

EXACT_BITS = 200_000  # 2024^{4046} has 44,000 bits: exact; 10^{10^{10}} is structural
MAX_CHARS = 200
_TOKEN = re.compile(r"\d+|[\^{}()]")


@dataclass(frozen=True)
class Tower:
    """`root ** exponent` with `root` not itself a perfect power and a value over EXACT_BITS bits.
    The exponent is an int, or a `Scaled` (k times a Tower)."""

    root: int
    exponent: int | Scaled


@dataclass(frozen=True)
class Scaled:
    """`k * tower`, with k not divisible by the tower's root (so the form is unique)."""

    k: int
    tower: Tower


Value = int | Tower


def parse(s: str) -> Value | None:
    """The value of a normalised power expression (`a^{b^{c}}`, `a^b`, digits, braces and
    parentheses), or None if `s` is anything else or the form cannot be kept unique."""
    s = s.replace(" ", "")
    if not s or len(s) > MAX_CHARS or "^" not in s or re.search(r"[^\d^{}()]", s):
        return None
    tokens = _TOKEN.findall(s)
    if "".join(tokens) != s:
        return None
    try:
        value, end = _power(tokens, 0, 0)
    except _Unsupported:
        return None
    return value if end == len(tokens) else None


def equal(answer: str, reference: str) -> bool | None:
    """Whether the answer equals a huge power reference: None unless the reference is a power
    expression beyond the other stages' reach and the answer is a power or a plain integer.
    (A huge answer to an ordinary reference is left to the guards, which refuse it.)"""
    vr = parse(reference)
    if vr is None or not _is_huge(vr):
        return None
    va = parse(answer)
    if va is None:
        plain = _plain_integer(answer)
        if plain is None:
            return None
        return False if isinstance(vr, Tower) else vr == plain
    return va == vr


def _is_huge(v: Value) -> bool:
    return isinstance(v, Tower) or v.bit_length() > 4000


def _plain_integer(s: str) -> int | None:
    s = s.replace(" ", "")
    return int(s) if re.fullmatch(r"-?\d{1,2000}", s) else None


class _Unsupported(Exception):
    pass


def _power(tokens: list[str], i: int, depth: int) -> tuple[Value, int]:
    if depth > 20:
        raise _Unsupported
    base, i = _atom(tokens, i, depth)
    if i < len(tokens) and tokens[i] == "^":
        i += 1
        if i < len(tokens) and tokens[i].isdigit() and len(tokens[i]) > 1:  # `2^10`: the whole number
            exponent, i = int(tokens[i]), i + 1
        else:
            exponent, i = _power(tokens, i, depth + 1)
        return _pow(base, exponent), i
    return base, i


def _atom(tokens: list[str], i: int, depth: int) -> tuple[Value, int]:
    if i >= len(tokens):
        raise _Unsupported
    token = tokens[i]
    if token.isdigit():
        return int(token), i + 1
    close = {"{": "}", "(": ")"}.get(token)
    if close is None:
        raise _Unsupported
    value, i = _power(tokens, i + 1, depth + 1)
    if i >= len(tokens) or tokens[i] != close:
        raise _Unsupported
    return value, i + 1


def _pow(base: Value, exponent: Value) -> Value:
    if isinstance(base, Tower):  # (r^E)^x = r^(E x)
        return _tower(base.root, _times(base.exponent, exponent))
    if base in (0, 1):
        if exponent == 0 and base == 0:
            raise _Unsupported
        return base if exponent != 0 else 1
    if isinstance(exponent, int) and _fits(base, exponent):
        return base ** exponent
    if base.bit_length() > 256:
        raise _Unsupported  # a huge base of a huge power: its root is not worth searching for
    root, k = _perfect_power(base)
    if isinstance(exponent, int):
        return Tower(root, k * exponent)
    return _tower(root, _times(k, exponent))


def _tower(root: int, exponent: int | Scaled | Tower) -> Tower:
    if isinstance(exponent, int) and _fits(root, exponent):
        raise _Unsupported  # only reached through a product that cannot be that small
    if isinstance(exponent, Tower):
        exponent = Scaled(1, exponent)
    return Tower(root, exponent)


def _times(x: int | Scaled | Tower, y: Value) -> int | Scaled:
    """The exponent product, kept in the unique form `k * r^F` (k not divisible by r)."""
    if isinstance(x, int) and isinstance(y, int):
        return x * y
    if isinstance(x, Tower):
        x = Scaled(1, x)
    if isinstance(y, Tower):
        y = Scaled(1, y)
    if isinstance(x, Scaled) and isinstance(y, Scaled):
        raise _Unsupported  # a product of two towers: no unique form kept here
    k, scaled = (x, y) if isinstance(x, int) else (y, x)
    k *= scaled.k
    tower = scaled.tower
    while k % tower.root == 0:  # k r^F with r | k: fold into the exponent (F + 1)
        if not isinstance(tower.exponent, int):
            raise _Unsupported
        k //= tower.root
        tower = Tower(tower.root, tower.exponent + 1)
    return Scaled(k, tower)


def _fits(base: int, exponent: int) -> bool:
    """Whether base ** exponent has at most EXACT_BITS bits (base >= 2, exponent >= 0)."""
    return exponent.bit_length() <= 32 and exponent * math.log2(base) <= EXACT_BITS


def _perfect_power(n: int) -> tuple[int, int]:
    """(r, k) with r ** k == n and k as large as possible (n >= 2)."""
    for k in range(n.bit_length(), 1, -1):
        r = _iroot(n, k)
        if r > 1 and r ** k == n:
            return r, k
    return n, 1


def _iroot(n: int, k: int) -> int:
    """The integer part of the k-th root of n >= 1 (Newton's method on integers, exact)."""
    x = 1 << -(-n.bit_length() // k)
    while True:
        y = ((k - 1) * x + n // x ** (k - 1)) // k
        if y >= x:
            return x
        x = y
