"""Fast, bounded evaluation of arithmetic LaTeX: the symbolic stage for common answers.

Most answers that are not plain numbers are still simple: `2\\sqrt{3}`, `\\frac{5\\pi}{6}`,
`(x+1)(x+2)`, `3-4i`. A small recursive-descent parser evaluates them here, in the
caller's process, keeping values exact (`Fraction`) as long as possible and otherwise
at 60 significant digits with mpmath; variables are replaced by random rationals, so
polynomials and rational functions compare exactly at those points. Whatever it does
not know (subscripts, `\\log`, sets, unknown commands), or any step that could grow
without bound (huge powers, factorials, deep nesting), makes it give up and return None,
leaving the case to sympy in a worker process under the time limit.
"""

from __future__ import annotations

import random
import re
import threading
from fractions import Fraction

import mpmath

DIGITS = 60
REL_TOL = 1e-45  # relative agreement needed between two irrational values
NEAR_ZERO = 1e-40  # an inexact value smaller than this may be an exact 0 computed at 60 digits: sympy decides
MAX_DEPTH = 60
MAX_POWER_BITS = 4000
MAX_FACTORIAL = 300
MAX_INEXACT_BITS = 120
POINTS = 6

_local = threading.local()


def _c() -> mpmath.MPContext:
    """This thread's mpmath context: our own precision, untouched by other users of mpmath
    and by other threads (mpmath functions raise and restore a context's precision)."""
    ctx = getattr(_local, "ctx", None)
    if ctx is None:
        ctx = _local.ctx = mpmath.MPContext()
        ctx.dps = DIGITS
    return ctx


_TOKEN = re.compile(r"\s*(\d+\.\d*|\.\d+|\d+|\\[a-zA-Z]+|\\.|[a-zA-Z]|\S)")
_FUNCS = {"\\sin": "sin", "\\cos": "cos", "\\tan": "tan", "\\ln": "ln", "\\exp": "exp", "\\sec": "sec",
          "\\csc": "csc", "\\cot": "cot", "\\arcsin": "asin", "\\arccos": "acos", "\\arctan": "atan"}
_TIMES = ("*", "\\cdot", "\\times")
_DIVIDE = ("/", "\\div")


class GiveUp(Exception):
    """The expression is outside what this evaluator handles safely."""


def equal(a: str, b: str) -> bool | None:
    """Whether normalised expressions `a` and `b` have the same value; None if undecided."""
    try:
        ta, tb = _tokens(a), _tokens(b)
        names = sorted(_variables(ta) | _variables(tb))
        if not names:
            return _same(_Parser(ta, {}).run(), _Parser(tb, {}).run())
        rng = random.Random(1234)
        checked = 0
        for k in range(POINTS * 3):
            env = _point(rng, names, negative=k % 2 == 1)
            pa, pb = _Parser(ta, env), _Parser(tb, env)
            try:
                va, vb = pa.run(), pb.run()
            except ZeroDivisionError:
                continue
            if pa.left_reals or pb.left_reals:
                continue  # outside the real domain of one side: not evidence either way
            if not _same(va, vb):
                return False
            checked += 1
            if checked >= POINTS:
                return True
        return None
    except (GiveUp, ZeroDivisionError, ValueError, OverflowError, RecursionError):
        return None


def value(s: str):
    """The value of a constant expression (Fraction, or 60-digit mpmath number), else None."""
    try:
        tokens = _tokens(s)
        if _variables(tokens):
            return None
        v = _Parser(tokens, {}).run()
        return v if isinstance(v, Fraction) else complex(v)
    except (GiveUp, ZeroDivisionError, ValueError, OverflowError, RecursionError, TypeError):
        return None


def parses(s: str) -> bool:
    """Whether `s` is an expression this evaluator reads completely (values aside)."""
    try:
        tokens = _tokens(s)
        env = {n: Fraction(2) for n in _variables(tokens)}
        _Parser(tokens, env).run()
        return True
    except (ZeroDivisionError, OverflowError, ValueError):
        return True  # read fine; the value is just undefined here
    except (GiveUp, RecursionError, TypeError):
        return False


def proportional(a: tuple[str, str], b: tuple[str, str]) -> bool | None:
    """Whether equations `a` and `b` (lhs, rhs) are the same: `lhs - rhs` of one is a nonzero
    constant multiple of the other's at random points. None if undecided."""
    try:
        ta = [_tokens(a[0]), _tokens(a[1])]
        tb = [_tokens(b[0]), _tokens(b[1])]
        names = sorted(set().union(*(_variables(t) for t in ta + tb)))
        if not names:
            return None
        rng = random.Random(4321)
        ratio = None
        checked = 0
        for k in range(POINTS * 3):
            env = _point(rng, names, negative=k % 2 == 1)
            try:
                da = _add(_Parser(ta[0], env).run(), _neg(_Parser(ta[1], env).run()))
                db = _add(_Parser(tb[0], env).run(), _neg(_Parser(tb[1], env).run()))
            except ZeroDivisionError:
                continue
            if db == 0 or da == 0:
                if not (db == 0 and da == 0):
                    return False
                continue
            r = _div(da, db)
            if ratio is None:
                ratio = r
            elif not _same(ratio, r):
                return False
            checked += 1
            if checked >= POINTS:
                return True
        return None
    except (GiveUp, ZeroDivisionError, ValueError, OverflowError, RecursionError):
        return None


def _point(rng: random.Random, names: list[str], negative: bool) -> dict[str, Fraction]:
    """Random rationals for the variables; every other point has some negative coordinates, so
    that `|x|` and `\\sqrt{x^2}` are told apart from `x`."""
    return {n: Fraction(rng.randint(7, 997), rng.randint(5, 331)) * (-1 if negative and rng.random() < 0.7 else 1)
            for n in names}


def _same(x, y) -> bool:
    if isinstance(x, Fraction) and isinstance(y, Fraction):
        return x == y
    x, y = _c().mpmathify(_mp(x)), _c().mpmathify(_mp(y))
    scale = max(abs(x), abs(y))
    if scale == 0:
        return True
    if not (_c().isfinite(x) and _c().isfinite(y)):
        raise GiveUp("non-finite value")
    if min(abs(x), abs(y)) < NEAR_ZERO:  # `\sin(\pi)` is 1e-61 here, not 0: cancellation noise, not a value
        raise GiveUp("a value too near 0 to tell from rounding at 60 digits")
    return abs(x - y) <= REL_TOL * scale


def _tokens(s: str) -> list[str]:
    s = s.strip()
    tokens = _TOKEN.findall(s)
    if "".join(tokens) != re.sub(r"\s+", "", s):
        raise GiveUp("untokenisable")
    return tokens


def _variables(tokens: list[str]) -> set[str]:
    names = {t for t in tokens if len(t) == 1 and t.isalpha() and t not in ("e", "i")}
    if any(t == "_" for t in tokens):
        raise GiveUp("subscript")
    return names


def _mp(v):
    """A Fraction as a 60-digit float. A fraction finer than ~36 digits could hide a difference
    below the comparison tolerance (`\\sqrt{2} + 10^{-50}`), so those go to sympy instead."""
    if isinstance(v, Fraction):
        if max(v.numerator.bit_length(), v.denominator.bit_length()) > MAX_INEXACT_BITS:
            raise GiveUp("rational too fine for 60-digit comparison")
        return _c().mpf(v.numerator) / v.denominator
    return v


class _Parser:
    def __init__(self, tokens: list[str], env: dict[str, Fraction]):
        self.tokens = tokens
        self.pos = 0
        self.env = env
        self.depth = 0
        self.left_reals = False  # a root, power or log of a real gave a non-real value

    def real(self, value):
        """Note when a real computation leaves the reals (`\\sqrt{x}` at x < 0)."""
        if not isinstance(value, Fraction) and value.imag != 0 and "i" not in self.tokens:
            self.left_reals = True
        return value

    def run(self):
        value = self.expr()
        if self.pos != len(self.tokens):
            raise GiveUp(f"unexpected {self.tokens[self.pos]!r}")
        return value

    def peek(self) -> str | None:
        return self.tokens[self.pos] if self.pos < len(self.tokens) else None

    def take(self, expected: str | None = None) -> str:
        token = self.peek()
        if token is None or (expected is not None and token != expected):
            raise GiveUp(f"expected {expected!r}")
        self.pos += 1
        return token

    def expr(self):
        self.depth += 1
        if self.depth > MAX_DEPTH:
            raise GiveUp("too deep")
        value = self.term()
        while self.peek() in ("+", "-"):
            op = self.take()
            rhs = self.term()
            value = _add(value, rhs) if op == "+" else _add(value, _neg(rhs))
        self.depth -= 1
        return value

    def term(self):
        value = self.unary()
        while True:
            token = self.peek()
            if token in _TIMES:
                self.take()
                value = _mul(value, self.unary())
            elif token in _DIVIDE:
                self.take()
                value = _div(value, self.unary())
            elif token is not None and _starts_primary(token):
                value = _mul(value, self.power())
            else:
                return value

    def unary(self):
        if self.peek() == "-":
            self.take()
            return _neg(self.unary())
        if self.peek() == "+":
            self.take()
            return self.unary()
        return self.power()

    def power(self):
        base = self.postfix()
        if self.peek() == "^":
            self.take()
            exponent = self.exponent()
            return self.real(_pow(base, exponent))
        return base

    def exponent(self):
        token = self.peek()
        if token == "{":
            return self.group("{", "}")
        if token is not None and token.isdigit():  # `2^10` is read as people mean it: 1024
            self.take()
            return Fraction(int(token))
        if token == "-":
            self.take()
            return _neg(self.exponent())
        return self.postfix()

    def postfix(self):
        value = self.primary()
        while self.peek() in ("!", "%"):
            if self.take() == "%":
                value = _div(value, Fraction(100))
            else:
                value = _factorial(value)
        return value

    def group(self, open_: str, close: str):
        self.take(open_)
        value = self.expr()
        self.take(close)
        return value

    def primary(self):
        token = self.peek()
        if token is None:
            raise GiveUp("unexpected end")
        if token[0].isdigit() or token[0] == ".":
            self.take()
            return Fraction(token)
        if token == "(":
            return self.group("(", ")")
        if token == "{":
            return self.group("{", "}")
        if token == "[":
            return self.group("[", "]")
        if len(token) == 1 and token.isalpha():
            self.take()
            if token == "e":
                return _c().e
            if token == "i":
                return _c().mpc(0, 1)
            return self.env[token]
        if token == "\\pi":
            self.take()
            return _c().pi
        if token == "\\frac":
            self.take()
            num = self.group("{", "}")
            den = self.group("{", "}")
            return _div(num, den)
        if token == "\\sqrt":
            self.take()
            index = None
            if self.peek() == "[":
                index = self.group("[", "]")
            radicand = self.group("{", "}")
            return self.real(_root(radicand, index if index is not None else Fraction(2)))
        if token in _FUNCS:
            self.take()
            if self.peek() == "^":  # \sin^2 x: too ambiguous to guess here
                raise GiveUp("function power")
            if self.peek() in ("(", "{"):
                arg = self.group("(", ")") if self.peek() == "(" else self.group("{", "}")
            else:  # `\\cot x`, `\\sin x^2`; but `\\sin 2x` is too ambiguous to guess
                arg = self.power()
                if self.peek() is not None and _starts_primary(self.peek()):
                    raise GiveUp("ambiguous function argument")
            return self.real(getattr(_c(), _FUNCS[token])(_mp(arg)))
        raise GiveUp(f"unknown token {token!r}")


def _starts_primary(token: str) -> bool:
    return (token[0].isdigit() or token in ("(", "{", "\\pi", "\\frac", "\\sqrt") or token in _FUNCS
            or (len(token) == 1 and token.isalpha()))


def _add(x, y):
    if isinstance(x, Fraction) and isinstance(y, Fraction):
        return x + y
    return _mp(x) + _mp(y)


def _neg(x):
    return -x


def _mul(x, y):
    if isinstance(x, Fraction) and isinstance(y, Fraction):
        return x * y
    return _mp(x) * _mp(y)


def _div(x, y):
    if isinstance(y, Fraction):
        if y == 0:
            raise ZeroDivisionError
        return x / y if isinstance(x, Fraction) else _mp(x) / _mp(y)
    if y == 0:
        raise ZeroDivisionError
    return _mp(x) / y


def _pow(base, exponent):
    if isinstance(exponent, Fraction) and exponent.denominator == 1 and isinstance(base, Fraction):
        e = exponent.numerator
        bits = max(base.numerator.bit_length(), base.denominator.bit_length())
        if abs(e) * bits > MAX_POWER_BITS:
            raise GiveUp("power too large")
        if base == 0 and e < 0:
            raise ZeroDivisionError
        return base ** e
    b, e = _c().mpmathify(_mp(base)), _c().mpmathify(_mp(exponent))
    if abs(e) * max(1, abs(_c().log(abs(b), 2)) if b != 0 else 1) > MAX_POWER_BITS:
        raise GiveUp("power too large")
    if isinstance(exponent, Fraction) and isinstance(base, Fraction) and base > 0:
        root = _exact_root(base, exponent.denominator)
        if root is not None:
            return _pow(root, Fraction(exponent.numerator))
    return _c().power(b, e)


def _root(value, index):
    if not (isinstance(index, Fraction) and index.denominator == 1 and 2 <= index.numerator <= 64):
        raise GiveUp("unusual root")
    n = index.numerator
    if isinstance(value, Fraction):
        if value >= 0:
            exact = _exact_root(value, n)
            if exact is not None:
                return exact
        elif n % 2 == 1:
            exact = _exact_root(-value, n)
            if exact is not None:
                return -exact
    v = _c().mpmathify(_mp(value))
    if n == 2:
        return _c().sqrt(v)
    if isinstance(value, Fraction) and value < 0 and n % 2 == 1:
        return -_c().root(-v, n)  # the real cube root, as written by people
    return _c().root(v, n)


def _exact_root(value: Fraction, n: int) -> Fraction | None:
    num, den = _int_root(value.numerator, n), _int_root(value.denominator, n)
    return Fraction(num, den) if num is not None and den is not None else None


def _int_root(k: int, n: int) -> int | None:
    if k < 0 or k.bit_length() > MAX_POWER_BITS:
        return None
    r = round(k ** (1.0 / n)) if k.bit_length() < 1000 else None
    if r is None:
        return None
    for c in (r - 1, r, r + 1):
        if c >= 0 and c ** n == k:
            return c
    return None


def _factorial(x):
    if not (isinstance(x, Fraction) and x.denominator == 1 and 0 <= x.numerator <= MAX_FACTORIAL):
        raise GiveUp("factorial out of range")
    result = 1
    for k in range(2, x.numerator + 1):
        result *= k
    return Fraction(result)
