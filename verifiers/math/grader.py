"""Answer equivalence, cheapest test first.

`grade(answer, reference, symbolic=False)` returns True/False when the cheap stages can
decide (normalised string match, exact rationals, text, choice letters, bases) and None
when a scalar pair needs sympy; the verifier then reruns it with `symbolic=True` in a
worker process under a hard time limit. Shapes (tuples, sets, intervals, matrices,
equations) are compared element by element, so each leaf takes the cheapest path too.

Conventions where graders differ (see docs/math.md):
- `50%` equals `0.5` and also `50` (a dropped percent sign); `0.5` does not equal `50`.
- Degrees are plain numbers: `30^\\circ` equals `30`, not `\\frac{\\pi}{6}`.
- Units after a number are dropped: `5\\text{ cm}` equals `5`.
- An unsimplified answer with the right value (`\\boxed{1+1}` for 2) is accepted unless the
  task field `simplified=True` asks for a plain number.
- A decimal equals a fraction only if it is exact: `0.33` is not `\\frac{1}{3}`, `0.\\overline{3}` is.
- Base subscripts compare digits: `1010_2` equals `1010`, not `1010_3` nor `10`.
- A comma is a decimal point where it cannot separate thousands: `1,22` is 1.22, `1,500` is 1500.
- Huge power references (`10^{10^{10}}`) are compared by structure, never expanded (powers.py).
"""

from __future__ import annotations

import contextvars
import functools
import itertools
import re
from fractions import Fraction

from rlvr.verifiers.math import expressions, numeric, powers, renaming, structures
from rlvr.verifiers.math.normalize import normalize, text_key
from rlvr.verifiers.math.splitting import split_top
from rlvr.verifiers.math.structures import Node, is_name, parse_structure

_CHOICE = re.compile(r"^\(?([A-Ea-e])\)?[.:]?$")
_CHOICE_ANSWER = re.compile(r"^(?:option|choice)?\s*(?:\(([A-Ea-e])\)|([A-Ea-e])(?:[).:]|\s|$))", re.IGNORECASE)
_CLOCK = re.compile(r"^\d{1,2}:\d{2}(?::\d{2})?(?:\s*(?:am|pm|a\.m\.|p\.m\.))?$", re.IGNORECASE)
_LABELLED_CHOICE = re.compile(r"^\(?[A-E](?:\)|\.|:)")
_OTHER_CHOICE = re.compile(r"(?<![A-Za-z\\])[A-E](?![A-Za-z])")
_BASE = re.compile(r"^\(?([0-9A-Za-z]+)\)?_\{?\(?(\d+)\)?\}?$")
_DECIMAL_LITERAL = re.compile(r"(-?)(\d*)\.(\d+)")
MIN_ROUNDED_DIGITS = 10
_WORDS = re.compile(r"^[A-Za-z][A-Za-z' -]*$")
_FUNCTION_WORDS = frozenset({"sin", "cos", "tan", "log", "ln", "exp", "sqrt", "pi", "infty", "frac"})


MAX_PM_SIGNS = 4  # a tuple with more `\\pm` signs is not expanded (2^4 = 16 tuples at most)
# Whether a decimal reference may be a rounding of the exact answer (`6.46` for 84/13): set per call
_rounded_references: contextvars.ContextVar[bool] = contextvars.ContextVar("rounded_references", default=True)


class NeedsSymbolic(Exception):
    """A scalar pair the fast stages cannot decide."""


def grade(answer: str, reference: str, *, symbolic: bool = False, split_words: bool = False,
          simplified: bool = False, rounded_references: bool = True) -> bool | None:
    """Whether `answer` equals `reference` (both raw, unboxed); None if sympy is needed.

    `rounded_references` accepts an exact answer that rounds to a decimal reference at the
    reference's own number of decimals (see `rounds_to_reference`)."""
    token = _rounded_references.set(rounded_references)
    try:
        return _grade(answer, reference, symbolic, split_words, simplified)
    finally:
        _rounded_references.reset(token)


def _grade(answer: str, reference: str, symbolic: bool, split_words: bool, simplified: bool) -> bool | None:
    a, r = normalize(answer), normalize(reference)
    if _key(a) == _key(r):
        return True
    if _decimal_comma_equal(answer, a, reference, r, simplified):
        return True
    va, vr = numeric.to_rational(a), numeric.to_rational(r)
    if va is not None and vr is not None:  # the common case: two plain numbers
        return scalar_equal(a, r, symbolic, simplified)
    choice = _choice(r, reference)
    if choice is not None:
        return choice == _choice_of_answer(a)
    labelled = _choice_of_answer(r) if _LABELLED_CHOICE.match(r) else None
    if labelled is not None and _choice_of_answer(a) is not None:  # `C. x = 42` answered by `C`
        return labelled == _choice_of_answer(a)
    try:
        node_a = parse_structure(a, split_words=split_words)
        node_r = parse_structure(r, split_words=split_words)
        if _equal(node_a, node_r, symbolic, simplified):
            return True
        renamed = renaming.renamed_answer(a, r, node_a, node_r) if _LETTER.search(a) else None
        if renamed is None:
            return False
        return _equal(parse_structure(renamed, split_words=split_words), node_r, symbolic, simplified)
    except NeedsSymbolic:
        return None


_LETTER = re.compile(r"[A-Za-z]")


# `1,22`, `0,111`, `1000,99`, `-3,5`, `1.234,5`: a comma that cannot be a thousands separator
_DECIMAL_COMMA = re.compile(r"([-+]?)(\d+),(\d+)(%?)")
_EUROPEAN = re.compile(r"([-+]?)(\d{1,3}(?:\.\d{3})+),(\d+)(%?)")


def decimal_comma(raw: str, norm: str) -> str | None:
    """The number a decimal comma writes (`1,22` -> `1.22`), or None.

    Safe by default: the comma is a decimal separator only where it cannot be a thousands
    separator, i.e. unless exactly three digits follow it after a group of one to three digits
    that does not start with 0 (`1,500` stays 1500, as in English text and GSM8K). `1, 22`,
    with a space, is a list. `1.234,5` (dots grouping thousands) is 1234.5."""
    if "," not in norm or re.search(r",\s", raw):
        return None
    m = _EUROPEAN.fullmatch(norm)
    if m:
        return f"{m.group(1)}{m.group(2).replace('.', '')}.{m.group(3)}{m.group(4)}"
    m = _DECIMAL_COMMA.fullmatch(norm)
    if not m:
        return None
    whole, frac = m.group(2), m.group(3)
    if len(frac) == 3 and len(whole) <= 3 and not whole.startswith("0"):
        return None  # `1,500`: thousands
    return f"{m.group(1)}{whole}.{frac}{m.group(4)}"


def _decimal_comma_equal(answer: str, a: str, reference: str, r: str, simplified: bool) -> bool:
    """`1,22` against 1.22 (either side): read the comma as a decimal point when the other side
    is one value. Only ever accepts: a list reading `1, 22` cannot equal one number anyway."""
    da, dr = decimal_comma(answer, a), decimal_comma(reference, r)
    if da is None and dr is None:
        return False
    a2, r2 = da or a, dr or r
    if len(split_top(a2, (",", ";"))) > 1 or len(split_top(r2, (",", ";"))) > 1:
        return False
    try:
        return scalar_equal(a2, r2, False, simplified) is True
    except NeedsSymbolic:
        return False


def numeric_value(reference: str) -> Fraction | None:
    """The exact value of a plain-number reference, decimal commas included."""
    norm = normalize(reference)
    return numeric.to_rational(decimal_comma(reference, norm) or norm)


def _key(s: str) -> str:
    return s.replace(" ", "").lstrip("+")


def _choice(norm: str, raw: str) -> str | None:
    """The letter of a multiple-choice reference (`B`, `(B)`, `\\text{(B)}`), else None."""
    m = _CHOICE.match(norm.strip())
    if m and ("(" in raw or m.group(1).isupper()):
        return m.group(1).upper()
    return None


def _choice_of_answer(norm: str) -> str | None:
    """The one letter an answer picks: `B`, `(B)`, `B) 12`, `\\textbf{(B)}`; None for `(B), (C)`."""
    m = _CHOICE.match(norm.strip())
    if m:
        return m.group(1).upper()
    m = _CHOICE_ANSWER.match(norm.strip())
    if not m or _OTHER_CHOICE.search(norm.strip()[m.end():]):
        return None  # `(B) or (C)`, `(B), (C)`: not one choice
    return (m.group(1) or m.group(2)).upper()


def _equal(a: Node, r: Node, symbolic: bool, simplified: bool) -> bool:
    # An assignment `x = 3` (or `3 = x`, or a chain `x = 1 + 2 = 3`) answers `3`, and `3` answers it.
    if a.kind == "eq" and r.kind != "eq":
        a = _assigned_value(a)
    if r.kind == "eq" and a.kind != "eq":
        r = _assigned_value(r)
    if a.kind in ("list", "set") and r.kind in ("list", "set"):
        named = _by_name(a.items, r.items, symbolic, simplified)
        if named is not None:
            return named
        if _labelled(a.items) or _labelled(r.items):  # `Minimum: 1, Maximum: 3`: in the reference's order
            return _ordered(_unassign(a.items), _unassign(r.items), symbolic, simplified)
        return _unordered(_unassign(a.items), _unassign(r.items), symbolic, simplified)
    if a.kind == "tuple" and r.kind in ("list", "set") and len(r.items) > 1 and _has_pm(a):
        return _unordered(_expand_pm(a), r.items, symbolic, simplified)
    if r.kind == "tuple" and a.kind in ("list", "set") and len(a.items) > 1 and _has_pm(r):
        return _unordered(a.items, _expand_pm(r), symbolic, simplified)
    if a.kind in ("list", "set") and len(a.items) == 1:
        return _equal(a.items[0], r, symbolic, simplified)
    if r.kind in ("list", "set") and len(r.items) == 1:
        return _equal(a, r.items[0], symbolic, simplified)
    if a.kind == "list" and r.kind == "tuple":  # `1, 2` for the point `(1, 2)`: in order
        return _ordered(_unassign(a.items), r.items, symbolic, simplified)
    if r.kind == "list" and a.kind == "tuple":  # `(1, 2)` for `a = 1, b = 2`
        return _ordered(a.items, _unassign(r.items), symbolic, simplified)
    if {a.kind, r.kind} == {"list", "union"}:  # `x < -2 or x > 2`, on either side
        return _unordered(a.items, r.items, symbolic, simplified)
    if a.kind == "matrix" or r.kind == "matrix":
        return _matrix_equal(a, r, symbolic, simplified)
    if {a.kind, r.kind} in ({"rel", "tuple"}, {"rel", "union"}):
        return _relation_as_set(a, r, symbolic)
    if a.kind != r.kind:
        return False
    if a.kind == "scalar":
        return scalar_equal(a.text, r.text, symbolic, simplified)
    if a.kind == "tuple":
        if len(a.items) == 2 and (a.open, a.close) != (r.open, r.close):
            return False  # interval ends differ
        return _ordered(a.items, r.items, symbolic, simplified)
    if a.kind == "union":
        return _unordered(a.items, r.items, symbolic, simplified)
    if a.kind == "eq":
        return _equation_equal(a, r, symbolic, simplified)
    if a.kind == "rel":
        if a.text != r.text:
            return _relation_symbolic(a, r, symbolic)
        return _ordered(a.items, r.items, symbolic, simplified) or _relation_symbolic(a, r, symbolic)
    return False


def _assigned_value(node: Node) -> Node:
    """The value an equation states: the right side of `x = 3`, of a true `2 + 3 = 5` or of a chain
    `a = b + c = 7` ending in a number; the left side of `3 = x`; an equation between two
    expressions stays an equation."""
    lhs, rhs = node.items[0].text, node.items[1].text
    if is_name(lhs) or _true_statement(node) or (node.text == "chain" and numeric.to_rational(rhs) is not None):
        return parse_structure(rhs)  # a chain of equalities ending in a number states that number
    if is_name(rhs):
        return parse_structure(lhs)
    return node


def _true_statement(node: Node) -> bool:
    """`5 + 1 = 6`: a worked computation whose two numeric sides agree; its value is the right side."""
    lhs, rhs = node.items[0].text, node.items[1].text
    if re.search(r"[a-zA-Z]", lhs.replace("\\frac", "").replace("\\sqrt", "").replace("\\cdot", "")
                 .replace("\\times", "")):
        return False
    return expressions.equal(lhs, rhs) is True


def _by_name(a: tuple[Node, ...], r: tuple[Node, ...], symbolic: bool, simplified: bool) -> bool | None:
    """`x = 1, y = 2` against `y = 2, x = 1`: assignments to distinct names on both sides are matched by
    name (`x = 2, y = 1` is wrong); None unless both sides are such lists of the same names."""
    names_a, names_r = _assignments(a), _assignments(r)
    if names_a is None or names_r is None or set(names_a) != set(names_r):
        return None
    return all(_equal(parse_structure(names_a[k]), parse_structure(names_r[k]), symbolic, simplified) for k in names_a)


def _assignments(items: tuple[Node, ...]) -> dict[str, str] | None:
    out = {}
    for item in items:
        if item.kind != "eq" or item.text == "chain" or not is_name(item.items[0].text):
            return None
        out[_key(item.items[0].text).lower() if item.text == "label" else _key(item.items[0].text)] = item.items[1].text
    return out if len(out) == len(items) > 1 else None


def _labelled(items: tuple[Node, ...]) -> bool:
    return any(item.kind == "eq" and item.text == "label" for item in items)


def _has_pm(node: Node) -> bool:
    return any(item.kind == "set" and item.text == "pm" for item in node.items)


def _expand_pm(node: Node) -> tuple[Node, ...]:
    """`(\\pm\\sqrt{2}, 0, \\pm\\sqrt{2})` as its four tuples: each `\\pm` takes either sign on its own;
    with a `\\mp` in the tuple the signs go together (`(\\pm 1, \\mp 2)` is (1, -2) and (-1, 2))."""
    signed = [k for k, item in enumerate(node.items) if item.kind == "set" and item.text == "pm"]
    if len(signed) > MAX_PM_SIGNS:
        return (node,)
    if any(node.items[k].open == "mp" for k in signed):
        choices = [(j,) * len(signed) for j in (0, 1)]
    else:
        choices = list(itertools.product((0, 1), repeat=len(signed)))
    out = []
    for choice in choices:
        items = list(node.items)
        for k, j in zip(signed, choice):
            items[k] = items[k].items[j]
        out.append(Node("tuple", items=tuple(items), open=node.open, close=node.close))
    return tuple(out)


def _unassign(items: tuple[Node, ...]) -> tuple[Node, ...]:
    """`x = 1, x = 2` -> `1, 2` (a solution list); a `±` member counts as its two values."""
    out = []
    for item in items:
        if item.kind == "eq" and is_name(item.items[0].text):
            item = parse_structure(item.items[1].text)
        out.extend(item.items if item.kind == "set" and item.text == "pm" else (item,))
    return tuple(out)


def _ordered(a, r, symbolic, simplified) -> bool:
    return len(a) == len(r) and all(_equal(x, y, symbolic, simplified) for x, y in zip(a, r))


def _unordered(a, r, symbolic, simplified) -> bool:
    a, r = _dedupe(a), _dedupe(r)
    if len(a) != len(r):
        return False
    pending: NeedsSymbolic | None = None
    remaining = list(r)
    for x in a:
        hit = None
        for k, y in enumerate(remaining):
            try:
                if _equal(x, y, symbolic, simplified):
                    hit = k
                    break
            except NeedsSymbolic as exc:
                pending = exc
        if hit is None:
            if pending is not None:
                raise pending
            return False
        remaining.pop(hit)
    return True


def _dedupe(items):
    seen, out = set(), []
    for item in items:
        key = repr(item)
        if key not in seen:
            seen.add(key)
            out.append(item)
    return out


def _matrix_equal(a: Node, r: Node, symbolic, simplified) -> bool:
    rows_a, rows_r = _matrix_rows(a), _matrix_rows(r)
    if rows_a is None or rows_r is None:
        return False
    if len(rows_a) != len(rows_r):
        # a column vector equals the same entries written as a row or a tuple
        flat_a, flat_r = _flat_vector(rows_a), _flat_vector(rows_r)
        if flat_a is None or flat_r is None:
            return False
        return _ordered(flat_a, flat_r, symbolic, simplified)
    return all(_ordered(x, y, symbolic, simplified) for x, y in zip(rows_a, rows_r))


def _matrix_rows(node: Node):
    if node.kind == "matrix":
        return [row.items for row in node.items]
    if node.kind in ("tuple",) and len(node.items) > 0:
        return [node.items]
    return None


def _flat_vector(rows):
    if all(len(row) == 1 for row in rows):
        return tuple(row[0] for row in rows)
    if len(rows) == 1:
        return tuple(rows[0])
    return None


def _equation_equal(a: Node, r: Node, symbolic: bool, simplified: bool) -> bool:
    la, lr = a.items[0].text, r.items[0].text
    if is_name(la) and is_name(lr) and _key(la) == _key(lr) and not _is_expression(r.items[1].text, lr):
        # `D = (0, 1)` against `D = (0, 1.5)`: the same name, so the values decide
        return _equal(parse_structure(a.items[1].text), parse_structure(r.items[1].text), symbolic, simplified)
    fast = expressions.proportional((la, a.items[1].text), (lr, r.items[1].text))
    if fast is not None:
        return fast
    if not symbolic:
        raise NeedsSymbolic("equation")
    from rlvr.verifiers.math import symbolic as sym

    return sym.equal(sym.parse(f"{a.items[0].text}={a.items[1].text}"),
                     sym.parse(f"{r.items[0].text}={r.items[1].text}"))


def _is_expression(rhs: str, name: str) -> bool:
    """Whether the right side uses the named variable (`y = 2y - 3`): then it is an equation."""
    return bool(re.search(rf"(?<![A-Za-z\\]){re.escape(name.strip())}(?![A-Za-z])", rhs)) if len(name.strip()) == 1 else False


def _relation_as_set(a: Node, r: Node, symbolic: bool) -> bool:
    """`-x > -1` against `(-\\infty, 1)`: solve the inequality (or a chain of two) for its one variable."""
    if not symbolic:
        raise NeedsSymbolic("inequality")
    from rlvr.verifiers.math import symbolic as sym

    rel, other = (a, r) if a.kind == "rel" else (r, a)
    ops = rel.text.split()
    if len(ops) != len(rel.items) - 1 or len(ops) > 2 or any(op not in ("<", ">", "\\leq", "\\geq") for op in ops):
        return False
    # `1 \\leq |z| \\leq 2` is `1 \\leq |z|` and `|z| \\leq 2`
    solved = None
    for k, op in enumerate(ops):
        part = sym.solve_inequality(f"{rel.items[k].text}{op}{rel.items[k + 1].text}")
        if part is None:
            return False
        solved = part if solved is None else solved.intersect(part)
    parts = other.items if other.kind == "union" else (other,)
    if any(p.kind != "tuple" or len(p.items) != 2 for p in parts):
        return False
    target = sym.union_of([(p.open, sym.parse(p.items[0].text), sym.parse(p.items[1].text), p.close) for p in parts])
    return sym.equal(solved, target)


def _relation_symbolic(a: Node, r: Node, symbolic: bool) -> bool:
    if not symbolic:
        raise NeedsSymbolic("relation")
    if len(a.items) != 2 or len(r.items) != 2:
        return False
    from rlvr.verifiers.math import symbolic as sym

    ta = f"{a.items[0].text}{a.text}{a.items[1].text}"
    tr = f"{r.items[0].text}{r.text}{r.items[1].text}"
    return sym.equal(sym.parse(ta), sym.parse(tr))


def scalar_equal(a: str, r: str, symbolic: bool, simplified: bool = False) -> bool:
    """Two scalar answers: exact rationals, text, bases, then (when allowed) sympy."""
    if _key(a) == _key(r):
        return True
    huge = powers.equal(a, r)
    if huge is not None:
        return huge
    if simplified and numeric.is_plain_number(r) and not numeric.is_simplified(a):
        return False  # the task asks for simplest form: `1+1` and `\\frac{2}{4}` are not
    base = _base_equal(a, r)
    if base is not None:
        return base
    if _CLOCK.match(r.strip()) or _CLOCK.match(a.strip()):  # a time of day is text: `12:00` is not `1:00`
        return _key(a).lower() == _key(r).lower()
    va, vr = numeric.to_rational(a), numeric.to_rational(r)
    if va is not None and vr is not None:
        if va == vr:
            return True
        return _percent_dropped(a, r, va, vr) or _rounded(a, vr) or _rounded(r, va) or rounds_to_reference(va, r)
    text = _text_equal(a, r)
    if text is not None:
        return text
    fast = expressions.equal(a, r)
    if fast is not None:
        if fast:
            return True
        value_a = expressions.value(a)
        return _rounded(a, expressions.value(r)) or _rounded(r, value_a) or rounds_to_reference(value_a, r)
    if not symbolic:
        raise NeedsSymbolic(f"{a!r} vs {r!r}")
    from rlvr.verifiers.math import symbolic as sym

    pa, pr = sym.parse(a), sym.parse(r)
    if sym.equal(pa, pr):
        return True
    if _rounded(a, sym.value(pr)) or _rounded(r, sym.value(pa)):
        return True
    if _DECIMAL_LITERAL.fullmatch(r.replace(" ", "")) and rounds_to_reference(sym.value(pa), r):
        return True
    if a.endswith("%") != r.endswith("%"):  # a dropped percent sign: compare the bare numbers
        return sym.equal(sym.parse(a.rstrip("%")), sym.parse(r.rstrip("%")))
    return False


def _rounded(decimal: str, exact) -> bool:
    """A decimal of at least `MIN_ROUNDED_DIGITS` significant digits that is `exact` correctly
    rounded: `0.0833333333333333` for 1/12, `4.123105625617661` for \\sqrt{17}. Shorter
    approximations (`0.33` for 1/3) stay wrong: they are different numbers."""
    m = _DECIMAL_LITERAL.fullmatch(decimal.replace(" ", ""))
    if exact is None or not m:
        return False
    digits = (m.group(2) + m.group(3)).lstrip("0")
    if len(digits) < MIN_ROUNDED_DIGITS:
        return False
    places = len(m.group(3))
    value = Fraction(decimal.replace(" ", ""))
    try:
        gap = abs(Fraction(exact) - value) if isinstance(exact, Fraction) else abs(complex(exact) - float(value))
    except (TypeError, ValueError, OverflowError):
        return False
    return bool(gap <= Fraction(1, 2 * 10 ** places) * Fraction(1001, 1000))


def rounds_to_reference(exact, reference: str) -> bool:
    """A decimal reference that is a rounding: `6.46` for the exact 84/13 = 6.4615...

    True when the reference is a decimal with d >= 1 places, the answer's exact value rounds to it
    at d places (|value - reference| < 0.5 * 10^-d), and that value has no finite decimal expansion
    (a fraction whose denominator has a prime factor other than 2 and 5, or an irrational number).
    A value with a finite expansion would have been written exactly, so `2.45` is never taken
    for `2.5`, and an answer that is itself a decimal (`6.47`, `6.461`) is compared exactly. Off when
    `grade(..., rounded_references=False)` (`MathVerifier(rounded_references=False)`)."""
    if exact is None or not _rounded_references.get():
        return False
    m = _DECIMAL_LITERAL.fullmatch(reference.replace(" ", ""))
    if not m:
        return False
    places = len(m.group(3))
    gold = Fraction(reference.replace(" ", ""))
    half = Fraction(1, 2 * 10 ** places)
    if isinstance(exact, Fraction):
        den = exact.denominator
        for p in (2, 5):
            while den % p == 0:
                den //= p
        return den != 1 and abs(exact - gold) < half
    try:
        value = complex(exact)
    except (TypeError, ValueError, OverflowError):
        return False
    if abs(value.imag) > 1e-30 or value.real != value.real:
        return False
    return abs(Fraction(value.real) - gold) < half * Fraction(999, 1000)


def _percent_dropped(a: str, r: str, va: Fraction, vr: Fraction) -> bool:
    """`50%` answers `50` and `50` answers `50%`: the percent sign is only a unit. Not below 1,
    where both readings are plausible numbers (`0.5%` is not `0.5`)."""
    if a.endswith("%") == r.endswith("%"):
        return False
    bare = numeric.to_rational(a.rstrip("%"))
    return bare is not None and abs(bare) >= 1 and bare == numeric.to_rational(r.rstrip("%"))


def _base_equal(a: str, r: str) -> bool | None:
    """Numbers with a base subscript: same base and same digits (leading zeros aside); a bare
    answer `1010` for `1010_2` is read in the reference's base. None when neither has a base."""
    ma, mr = _BASE.match(a.replace(" ", "")), _BASE.match(r.replace(" ", ""))
    if not ma and not mr:
        return None
    if ma and mr and int(ma.group(2)) != int(mr.group(2)):
        return False
    bare = r if ma and not mr else a if mr and not ma else None
    if bare is not None and not re.fullmatch(r"[0-9A-Za-z]+", bare.replace(" ", "")):
        return None
    digits_a = (ma.group(1) if ma else a.replace(" ", "")).lstrip("0").upper()
    digits_r = (mr.group(1) if mr else r.replace(" ", "")).lstrip("0").upper()
    return digits_a == digits_r


def _text_equal(a: str, r: str) -> bool | None:
    """Short text answers (`Monday`, `\\text{no solution}`): case and spacing insensitive."""
    if not (_is_words(a) and _is_words(r)):
        if _is_words(r) and len(r) > 3 and re.fullmatch(r"[-\d.\s/]+", a):
            return False  # a number for a word answer
        return None
    return text_key(a) == text_key(r)


def _is_words(s: str) -> bool:
    """Looks like words rather than a product of variables: `yes`, `Monday`, `no solution`."""
    s = s.strip()
    if not _WORDS.match(s):
        return False
    words = s.replace("-", " ").split()
    if any(w.lower() in _FUNCTION_WORDS for w in words):
        return False
    return len(words) > 1 or len(s) > 3 or (len(s) == 3 and any(c in "aeiouAEIOU" for c in s))


_KNOWN_LEAVES = frozenset({"\\infty", "-\\infty", "+\\infty", "\\emptyset"})


@functools.lru_cache(maxsize=1 << 14)
def reference_readable(reference: str) -> bool:
    """Whether every part of the reference is something the in-process stages can read (a
    number, a word, a choice letter, an expression the evaluator parses). False means only
    that sympy must confirm it parses, not that it is bad."""
    norm = normalize(reference)
    if _choice(norm, reference) is not None or (_LABELLED_CHOICE.match(norm) and _choice_of_answer(norm)):
        return True
    return all(_leaf_readable(leaf) for leaf in leaves(parse_structure(normalize(reference), split_words=True)))


def leaves(node: Node):
    """The scalar strings of a parsed answer, depth first. The sides of an equation between
    expressions are parsed as shapes too; the label of an assignment is not a leaf: `(p, q) = (3, 2)`
    has the leaves 3 and 2."""
    if node.kind == "scalar":
        yield node.text
    if node.kind == "eq" and is_name(node.items[0].text):  # a label (`m_{\\max} = ...`) need not parse
        yield from leaves(parse_structure(node.items[1].text))
        return
    for item in node.items:
        yield from leaves(parse_structure(item.text) if node.kind in ("eq", "rel") else item)


def _leaf_readable(leaf: str) -> bool:
    leaf = leaf.strip()
    return bool(leaf) and (leaf in _KNOWN_LEAVES or numeric.to_rational(leaf) is not None or _is_words(leaf)
                           or _BASE.match(leaf.replace(" ", "")) is not None or _CLOCK.match(leaf) is not None
                           or expressions.parses(leaf) or powers.parse(leaf) is not None)


def offers_several(answer: str, reference: str) -> bool:
    """A wrong answer that lists several values (`3, 4`, `\\pm 3`, `\\{3, 4\\}`) for a single-valued
    reference: a hedge rather than a plain mistake."""
    if answer_count(reference) != 1 or parse_structure(normalize(reference)).kind in ("tuple", "matrix", "union"):
        return False
    node = parse_structure(normalize(answer))
    return node.kind in ("list", "set") and len(_dedupe(node.items)) > 1


@functools.lru_cache(maxsize=1 << 14)
def is_union(reference: str) -> bool:
    """Whether the reference is a union of intervals (whose answer may join parts with "or")."""
    return parse_structure(normalize(reference)).kind == "union"


@functools.lru_cache(maxsize=1 << 14)
def answer_count(reference: str) -> int:
    """How many values the reference lists (to tell a hedge from a list answer)."""
    return structures.size(parse_structure(normalize(reference), split_words=True))
