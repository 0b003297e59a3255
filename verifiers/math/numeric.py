"""Exact rational values of plain numeric answers, without sympy.

Most RL math answers are integers, decimals or fractions. Reading them as `Fraction`s
and comparing exactly is a thousand times cheaper than a symbolic parse, and exact: two
different tiny numbers (`1.7e-19`, `1.6e-19`; `1/2^{99}`, `1/2^{98}`) never compare
equal through float rounding. Anything not recognised returns None and goes on to the
symbolic stage. Exponents are capped so that `10^{10^{9}}` cannot allocate a huge integer.
"""

from __future__ import annotations

import math
import re
from fractions import Fraction

MAX_EXPONENT = 400  # |k| in 10^k or a^k handled exactly here; beyond that, the symbolic stage decides
MAX_DIGITS = 400

_SIGN = r"[-+]?"
_DEC = r"(?:\d+(?:\.\d*)?|\.\d+)"
_RE_DECIMAL = re.compile(rf"({_SIGN})({_DEC})")
_RE_SCI_E = re.compile(rf"({_SIGN}{_DEC})[eE]([-+]?\d+)")
_RE_SCI_TEX = re.compile(rf"(?:({_SIGN}{_DEC})(?:\\times|\\cdot|\*))?10\^(?:\{{([-+]?\d+)\}}|([-+]?\d))")
_RE_FRAC = re.compile(r"([-+]?)\\frac\{([-+]?[\d.]+)\}\{([-+]?[\d.]+)\}")
_RE_SLASH = re.compile(rf"({_SIGN})({_DEC})/({_DEC})")
_RE_MIXED = re.compile(r"([-+]?)(\d+)\s*\\frac\{(\d+)\}\{(\d+)\}")
_RE_REPEAT = re.compile(r"([-+]?)(\d*)\.(\d*)\\overline\{(\d+)\}")
_RE_REPEAT_PAREN = re.compile(r"([-+]?)(\d*)\.(\d*)\((\d+)\)")
_RE_ELLIPSIS = re.compile(r"([-+]?)(\d*)\.(\d+)(?:\.\.\.|\\ldots|\\cdots|\u2026)")
_RE_POW = re.compile(r"([-+]?)(\d+)\^(?:\{([-+]?\d+)\}|(\d))")
_RE_FRAC_POW = re.compile(r"([-+]?)\\frac\{(\d+)\}\{(\d+)\^(?:\{(\d+)\}|(\d))\}")


def to_rational(s: str) -> Fraction | None:
    """The exact value of a normalised numeric answer, or None if it is not one.

    Accepts integers, decimals, `a/b`, `\\frac{a}{b}` (decimals inside allowed), mixed
    numbers (`2\\frac{1}{3}`), percentages (`12.5%` as 0.125), scientific notation
    (`1.7\\times10^{-19}`, `1.7e-19`), powers of integers (`2^{10}`, `\\frac{1}{2^{99}}`) and
    repeating decimals (`0.\\overline{3}`, `0.1(6)`). `s` must already be normalised.
    """
    s = s.replace(" ", "")
    if not s or len(s) > MAX_DIGITS:
        return None
    if s.endswith("%"):
        inner = to_rational(s[:-1])
        return None if inner is None else inner / 100
    if s.startswith("(") and s.endswith(")") and s.count("(") == 1:
        return to_rational(s[1:-1])
    for parse in _PARSERS:
        value = parse(s)
        if value is not None:
            return value
    return None


def _decimal(s: str) -> Fraction | None:
    m = _RE_DECIMAL.fullmatch(s)
    if not m:
        return None
    value = Fraction(m.group(2))
    return -value if m.group(1) == "-" else value


def _sci_e(s: str) -> Fraction | None:
    m = _RE_SCI_E.fullmatch(s)
    if not m or abs(int(m.group(2))) > MAX_EXPONENT:
        return None
    return Fraction(m.group(1)) * Fraction(10) ** int(m.group(2))


def _sci_tex(s: str) -> Fraction | None:
    m = _RE_SCI_TEX.fullmatch(s)
    if not m:
        return None
    exponent = int(m.group(2) or m.group(3))
    if abs(exponent) > MAX_EXPONENT:
        return None
    mantissa = Fraction(m.group(1)) if m.group(1) else Fraction(1)
    return mantissa * Fraction(10) ** exponent


def _frac(s: str) -> Fraction | None:
    m = _RE_FRAC.fullmatch(s)
    if not m:
        return None
    try:
        num, den = Fraction(m.group(2)), Fraction(m.group(3))
    except ValueError:
        return None
    if den == 0:
        return None
    value = num / den
    return -value if m.group(1) == "-" else value


def _slash(s: str) -> Fraction | None:
    m = _RE_SLASH.fullmatch(s)
    if not m:
        return None
    den = Fraction(m.group(3))
    if den == 0:
        return None
    value = Fraction(m.group(2)) / den
    return -value if m.group(1) == "-" else value


def _mixed(s: str) -> Fraction | None:
    m = _RE_MIXED.fullmatch(s)
    if not m or int(m.group(4)) == 0:
        return None
    value = int(m.group(2)) + Fraction(int(m.group(3)), int(m.group(4)))
    return -value if m.group(1) == "-" else value


def _repeating(s: str) -> Fraction | None:
    m = _RE_REPEAT.fullmatch(s) or _RE_REPEAT_PAREN.fullmatch(s)
    if not m:
        return None
    whole, fixed, period = m.group(2) or "0", m.group(3), m.group(4)
    # x = whole.fixed(period): the period adds period / (10^len(period) - 1) shifted past `fixed`.
    value = Fraction(int(whole)) + (Fraction(int(fixed), 10 ** len(fixed)) if fixed else 0)
    value += Fraction(int(period), (10 ** len(period) - 1) * 10 ** len(fixed))
    return -value if m.group(1) == "-" else value


def _ellipsis(s: str) -> Fraction | None:
    """`0.333...`, `0.1666\\ldots`, `0.142857142857...`: a visibly repeating tail. The period must
    show at least twice (three times for one digit); `0.14...` is read as the 0.14 it shows."""
    m = _RE_ELLIPSIS.fullmatch(s)
    if not m:
        return None
    digits = m.group(3)
    for period in range(1, len(digits) // 2 + 1):
        for start in range(len(digits) - 2 * period + 1):
            tail = digits[start:]
            block = tail[:period]
            reps = len(tail) // period
            if reps >= (3 if period == 1 else 2) and tail == (block * (reps + 1))[:len(tail)]:
                return _repeating(f"{m.group(1)}{m.group(2)}.{digits[:start]}\\overline{{{block}}}")
    return _decimal(f"{m.group(1)}{m.group(2)}.{digits}")  # no visible period: the digits shown


def _power(s: str) -> Fraction | None:
    m = _RE_POW.fullmatch(s)
    if not m:
        return None
    exponent = int(m.group(3) or m.group(4))
    base = int(m.group(2))
    if abs(exponent) > MAX_EXPONENT or (base == 0 and exponent < 0) or base.bit_length() * abs(exponent) > 4000:
        return None
    value = Fraction(base) ** exponent
    return -value if m.group(1) == "-" else value


def _frac_power(s: str) -> Fraction | None:
    m = _RE_FRAC_POW.fullmatch(s)
    if not m:
        return None
    base, exponent = int(m.group(3)), int(m.group(4) or m.group(5))
    if base == 0 or exponent > MAX_EXPONENT or base.bit_length() * exponent > 4000:
        return None
    value = Fraction(int(m.group(2)), base ** exponent)
    return -value if m.group(1) == "-" else value


_PARSERS = (_decimal, _frac, _slash, _mixed, _sci_e, _sci_tex, _repeating, _ellipsis, _power, _frac_power)


def is_simplified(s: str) -> bool:
    """A plain number in simplest form: an integer or decimal, or a fraction in lowest terms
    with a denominator above 1 (`\\frac{3}{4}`, `-7/2`; not `\\frac{2}{4}`, `\\frac{6}{3}`)."""
    s = s.replace(" ", "")
    m = _RE_FRAC.fullmatch(s) or _RE_SLASH.fullmatch(s)
    if m is None:
        return bool(_RE_DECIMAL.fullmatch(s.rstrip("%")))
    num, den = m.group(2), m.group(3)
    if not (num.lstrip("-+").isdigit() and den.lstrip("-+").isdigit()):
        return False
    n, d = abs(int(num)), abs(int(den))
    return d > 1 and math.gcd(n, d) == 1


def is_plain_number(s: str) -> bool:
    """True for a literal with no operation in it: `42`, `-0.5`, `\\frac{3}{4}`, `3/4`, `12%`."""
    s = s.replace(" ", "").rstrip("%")
    return bool(_RE_DECIMAL.fullmatch(s) or _RE_FRAC.fullmatch(s) or _RE_SLASH.fullmatch(s)
                or _RE_MIXED.fullmatch(s))
