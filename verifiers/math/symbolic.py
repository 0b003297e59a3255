"""Symbolic equivalence of scalar answers through latex2sympy and sympy, behind guards.

This is the expensive stage and only runs in worker processes with a hard wall-clock
limit. The guards refuse before evaluation what would blow up anyway: power towers,
huge exponents and factorials, deep nesting. Decimals are rewritten as exact fractions
before parsing, so floats never enter. Constants are compared by high-precision
evaluation relative to their size (`1/2^{99}` differs from `1/2^{98}` by a factor of two,
never by "1e-30 absolute"); expressions with free variables by simplifying the
difference and, failing that, evaluating at random points.
"""

from __future__ import annotations

import functools
import math
import random
import re

import sympy
from latex2sympy2_extended import NormalizationConfig, latex2sympy
from latex2sympy2_extended.latex2sympy2 import ConversionConfig

MAX_DEPTH = 40
MAX_POW_BITS = 20_000  # |exponent| * log2|base| allowed for an integer power
MAX_FACTORIAL = 10_000
PRECISION = 60  # digits for comparing constants
REL_TOL_CONST = sympy.Float("1e-100", 120)  # evalf noise on a true zero
NEAR_ZERO = sympy.Float(f"1e-{PRECISION}", 120)  # both sides this small: simplify decides, not digits
REL_TOL_POINTS = 1e-9

_L2S_NORM = NormalizationConfig(basic_latex=True, units=True, malformed_operators=True, nits=True,
                                boxed="none", equations=False)
_L2S_CONV = ConversionConfig(interpret_as_mixed_fractions=True, interpret_simple_eq_as_assignment=False,
                             interpret_contains_as_eq=True, lowercase_symbols=False)
_DECIMAL = re.compile(r"(?<![\d.])(\d*)\.(\d+)(?![\d.])")
_IMAG = sympy.Symbol("i")


class Guarded(Exception):
    """The expression would be too costly to evaluate (a power tower, a huge factorial...)."""


def check_text(s: str) -> None:
    """Cheap textual guards, run before parsing."""
    depth = deepest = 0
    for ch in s:
        if ch in "({[":
            depth += 1
            deepest = max(deepest, depth)
        elif ch in ")}]":
            depth -= 1
    if deepest > MAX_DEPTH:
        raise Guarded(f"nesting deeper than {MAX_DEPTH}")
    if s.count("^") > 40 or s.count("!") > 10:
        raise Guarded("too many powers or factorials")


@functools.lru_cache(maxsize=4096)
def parse(s: str):
    """Parse normalised LaTeX `s` into sympy (exact numbers, `i` as the imaginary unit).

    Cached per process: the reference shared by a group of completions is parsed once.
    """
    check_text(s)
    s = _DECIMAL.sub(lambda m: f"\\frac{{{m.group(1) or '0'}{m.group(2)}}}{{1{'0' * len(m.group(2))}}}", s)
    s = s.replace("%", "\\%").replace("\\\\%", "\\%")
    expr = latex2sympy(s, normalization_config=_L2S_NORM, conversion_config=_L2S_CONV)
    check_tree(expr)
    if isinstance(expr, sympy.Basic) and expr.has(sympy.UnevaluatedExpr):  # `50\%` is 50 * (1/100)
        expr = expr.replace(lambda e: isinstance(e, sympy.UnevaluatedExpr), lambda e: e.args[0])
    if isinstance(expr, sympy.Basic) and _IMAG in getattr(expr, "free_symbols", ()):
        expr = expr.subs(_IMAG, sympy.I)
    return expr


def check_tree(expr) -> None:
    """Refuse power towers, huge powers and factorials before anything evaluates them."""
    if not isinstance(expr, sympy.Basic):
        return
    stack = [(expr, 0)]
    while stack:
        node, depth = stack.pop()
        if depth > 4 * MAX_DEPTH:
            raise Guarded("expression tree too deep")
        if isinstance(node, sympy.Pow):
            _check_pow(node)
        elif isinstance(node, (sympy.factorial, sympy.factorial2, sympy.gamma, sympy.subfactorial)):
            arg = node.args[0]
            if not arg.is_number or (arg.is_real and abs(float(arg.evalf(15))) > MAX_FACTORIAL):
                if arg.is_number:
                    raise Guarded("factorial too large")
        elif isinstance(node, sympy.Integer) and node.p.bit_length() > 4 * MAX_POW_BITS:
            raise Guarded("integer too large")
        stack.extend((a, depth + 1) for a in node.args)


def _check_pow(node) -> None:
    base, exponent = node.args
    if exponent.has(sympy.Pow) and base.is_number and exponent.is_number:
        inner = [p for p in exponent.atoms(sympy.Pow) if p.args[1].is_number and p.args[0].is_number]
        for p in inner:
            b, e = p.args
            if abs(float(e.evalf(15))) * max(1.0, _log2(b)) > 64:
                raise Guarded("power tower")
    if base.is_number and exponent.is_number:
        try:
            e = float(sympy.N(exponent, 15))
        except (TypeError, ValueError):
            return
        if abs(e) > 1 and abs(e) * max(1.0, _log2(base)) > MAX_POW_BITS:
            raise Guarded("power too large")


def _log2(value) -> float:
    try:
        v = abs(complex(sympy.N(value, 15)))
    except (TypeError, ValueError, OverflowError):
        raise Guarded("power base cannot be bounded") from None
    if v in (0.0, 1.0):
        return 0.0
    return abs(math.log2(v)) if v == v and v != float("inf") else float("inf")


def value(expr):
    """The numeric value of a constant sympy expression as a complex, else None."""
    try:
        if isinstance(expr, sympy.Expr) and not expr.free_symbols:
            return complex(sympy.N(expr, 30))
    except (TypeError, ValueError, OverflowError):
        pass
    return None


def solve_inequality(text: str):
    """The solution set of a one-variable inequality over the reals, or None."""
    rel = parse(text)
    if not isinstance(rel, sympy.Rel) or len(rel.free_symbols) != 1:
        return None
    var = next(iter(rel.free_symbols))
    real = sympy.Symbol(var.name, real=True)
    return sympy.solve_univariate_inequality(rel.subs(var, real), real, relational=False)


def union_of(parts):
    """A sympy set from (open bracket, start, end, close bracket) intervals."""
    out = sympy.S.EmptySet
    for opening, start, end, closing in parts:
        out = sympy.Union(out, sympy.Interval(start, end, left_open=opening == "(", right_open=closing == ")"))
    return out


def equal(a, b) -> bool:
    """Whether two parsed answers are equal (sympy expressions, sets, matrices, relations)."""
    if isinstance(a, sympy.MatrixBase) or isinstance(b, sympy.MatrixBase):
        if not (isinstance(a, sympy.MatrixBase) and isinstance(b, sympy.MatrixBase)) or a.shape != b.shape:
            return False
        return all(equal(x, y) for x, y in zip(a, b))
    if isinstance(a, sympy.Set) or isinstance(b, sympy.Set):
        return isinstance(a, sympy.Set) and isinstance(b, sympy.Set) and _set_equal(a, b)
    if isinstance(a, sympy.Rel) or isinstance(b, sympy.Rel):
        return _relation_equal(a, b)
    if not (isinstance(a, sympy.Expr) and isinstance(b, sympy.Expr)):
        return a == b
    return expr_equal(a, b)


def expr_equal(a: sympy.Expr, b: sympy.Expr) -> bool:
    if a.has(sympy.zoo, sympy.nan) or b.has(sympy.zoo, sympy.nan):
        return False  # undefined (`1/0`): equal to nothing, not even itself
    if a == b:
        return True
    if a.has(sympy.oo, -sympy.oo, sympy.zoo) or b.has(sympy.oo, -sympy.oo, sympy.zoo):
        return sympy.simplify(a - b) == 0 if not (a.is_infinite or b.is_infinite) else a == b
    free = a.free_symbols | b.free_symbols
    if not free:
        return _constants_equal(a, b)
    return _functions_equal(a, b, sorted(free, key=str))


def _constants_equal(a: sympy.Expr, b: sympy.Expr) -> bool:
    """Exact constants. sympy's evalf targets the relative precision of the *difference*, so a
    real difference, however tiny (`\\sqrt{2} + 10^{-50}`), comes out nonzero, while an identity
    that sympy does not simplify by itself comes out as 0 (or as noise far below its scale)."""
    va, vb = sympy.N(a, PRECISION), sympy.N(b, PRECISION)
    if not (va.is_number and vb.is_number):
        return sympy.simplify(a - b) == 0
    diff = sympy.N(a - b, PRECISION)
    if diff == 0:
        return True
    if not diff.is_number:
        return False
    try:
        scale = max(abs(va), abs(vb))
        if scale < NEAR_ZERO:  # `\sin(\pi)` evaluates to 0.e-136, no digit known: a value, or a zero?
            return sympy.simplify(a - b) == 0
        return bool(abs(diff) <= REL_TOL_CONST * scale)
    except TypeError:  # a value sympy cannot order (an unevaluated part): decide symbolically
        return sympy.simplify(a - b) == 0


def _functions_equal(a: sympy.Expr, b: sympy.Expr, symbols: list) -> bool:
    """Equal at random real points (relative tolerance), or a difference that simplifies to 0.

    Every other point has negative coordinates (`|x|` is not `x`); a point where a side
    that does not use `i` takes a non-real value is outside its real domain and skipped."""
    rng = random.Random(0)
    real = not (a.has(sympy.I) or b.has(sympy.I))
    agreed = 0
    for k in range(18):
        point = {s: sympy.Rational(rng.randint(11, 290), 97) * (-1 if k % 2 and rng.random() < 0.7 else 1)
                 for s in symbols}
        try:
            va, vb = complex(a.subs(point).evalf(30)), complex(b.subs(point).evalf(30))
        except (TypeError, ValueError, ZeroDivisionError, OverflowError):
            continue
        if any(v != v or abs(v) == float("inf") for v in (va, vb)):
            continue
        if real and (abs(va.imag) > 1e-12 * max(1.0, abs(va)) or abs(vb.imag) > 1e-12 * max(1.0, abs(vb))):
            continue
        if abs(va - vb) > REL_TOL_POINTS * max(1.0, abs(va), abs(vb)):
            return False
        agreed += 1
        if agreed >= 5:
            return True
    return sympy.simplify(a - b) == 0


def _set_equal(a, b) -> bool:
    if isinstance(a, sympy.FiniteSet) and isinstance(b, sympy.FiniteSet):
        left, right = list(a.args), list(b.args)
        if len(left) != len(right):
            return False
        for x in left:
            hit = next((k for k, y in enumerate(right) if equal(x, y)), None)
            if hit is None:
                return False
            right.pop(hit)
        return True
    if isinstance(a, sympy.Interval) and isinstance(b, sympy.Interval):
        return (a.left_open == b.left_open and a.right_open == b.right_open
                and equal(a.start, b.start) and equal(a.end, b.end))
    if isinstance(a, sympy.Union) and isinstance(b, sympy.Union):
        return _set_equal(sympy.FiniteSet(*a.args), sympy.FiniteSet(*b.args))
    return a == b


def _relation_equal(a, b) -> bool:
    """Equations are equal when `lhs - rhs` of one is a nonzero constant multiple of the other's."""
    if not (isinstance(a, sympy.Rel) and isinstance(b, sympy.Rel)):
        return False
    if isinstance(a, sympy.Eq) != isinstance(b, sympy.Eq):
        return False
    da, db = a.lhs - a.rhs, b.lhs - b.rhs
    if isinstance(a, sympy.Eq):
        if db == 0:
            return da == 0
        ratio = sympy.simplify(da / db)
        return bool(ratio.is_number and ratio != 0 and ratio.is_finite)
    # Inequalities: same direction after moving everything to one side, positive multiple.
    if type(a) is not type(b):
        b = b.reversed
        db = b.lhs - b.rhs
        if type(a) is not type(b):
            return False
    ratio = sympy.simplify(da / db) if db != 0 else None
    return bool(ratio is not None and ratio.is_number and ratio.is_positive)
