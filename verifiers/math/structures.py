"""Reading the shape of an answer: scalar, tuple, set, interval, union, matrix, equation.

Shapes are recognised on the normalised string by bracket matching, before any symbolic
parsing, so that the comparison rules of each shape are explicit (a set is unordered, a
tuple is not, an interval's ends matter) instead of depending on how a LaTeX parser
guesses `(1, 2)`. The leaves are scalar strings compared by the grader.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from fractions import Fraction

from rlvr.verifiers.math import matrices
from rlvr.verifiers.math.splitting import CLOSE, OPEN, closing, continues, split_top, split_top_with

MAX_ITEMS = 64  # a longer list is compared as a single string
MAX_NESTING = 100  # deeper brackets are refused before any parsing (recursion stays bounded)

_RELATIONS = ("\\leq", "\\geq", "\\ne", "<", ">", "=")
RELATIONS = _RELATIONS
_MATRIX = re.compile(r"^\\begin\{([pbBvV]?matrix|smallmatrix|array)\}(?:\{[^{}]*\})?(.*)\\end\{\1\}$", re.DOTALL)
_MEMBER = re.compile(r"^[a-zA-Z](?:_\{?\w+\}?)?\s*\\in\b\s*")
_SYMBOL = re.compile(r"^(?:[a-zA-Z]|\\[a-zA-Z]+)(?:_\{?[\w]+\}?)?(?:\([a-z]\))?$")


@dataclass(frozen=True)
class Node:
    """A parsed answer shape. `kind` is one of scalar, set, list, tuple, matrix, union, eq, rel."""

    kind: str
    text: str = ""  # scalar: the expression; rel: the operator; "pm" for the two values of a ±; eq: "chain" for
    # a = b = c, "label" for `Minimum: 1`
    items: tuple[Node, ...] = ()  # elements; eq/rel: (lhs, rhs); matrix: rows as tuple nodes
    open: str = ""  # tuple: bracket characters (for intervals); "mp" on the values of a `\\mp`
    close: str = ""


def scalar(text: str) -> Node:
    return Node("scalar", text.strip())


def parse_structure(s: str, *, split_words: bool = False) -> Node:
    """The shape of normalised answer `s`. With `split_words`, "or"/"and" also separate items."""
    s = s.strip()
    s = _MEMBER.sub("", s, count=1)
    if not s:
        return scalar(s)
    difference = split_top(s, ("\\setminus",)) if "\\setminus" in s else ()
    if len(difference) == 2:
        node = _difference(parse_structure(difference[0]), parse_structure(difference[1]))
        if node is not None:
            return node
    union = [p for p in split_top(s, ("\\cup",)) if p.strip()]
    if len(union) > 1:
        return Node("union", items=tuple(parse_structure(p) for p in union))
    seps = (",", ";")
    if split_words:
        s = re.sub(r"\\text\{\s*(or|and)\s*\}", r" \1 ", s)
        s = re.sub(r"(?<=[)\]}])\s*(or|and)\s*(?=[(\[{\\\d-])", r" \1 ", s)  # `(11,7)or(7,11)`
        s = re.sub(r"(?<=[\w)\]}])\s+(or|and)(?=[-+])", r" \1 ", s)  # `7 and-5`, as normalised
        seps = (",", ";", " or ", " and ", "\\lor", "\\vee", "\\text{or}", "\\text{and}")
    parts = [p for p in split_top(s, seps) if p.strip()]
    if 1 < len(parts) <= MAX_ITEMS:
        return Node("list", items=tuple(_item(p) for p in parts))
    labelled = _label(s)
    return labelled if labelled is not None else _single(s)


_LABEL = re.compile(r"^\s*([A-Za-z][A-Za-z ]*[A-Za-z])\s*:\s*(\S.*)$", re.DOTALL)  # `Minimum: 1`
_WORDS_AFTER = re.compile(r"^\s*([-+]?\d[\d.,]*|[-+]?\\frac\{\d+\}\{\d+\})\s+[A-Za-z]{3,}(?:\s+[A-Za-z]{3,})?\s*$")


def _label(s: str) -> Node | None:
    """`Minimum: 1`: a value named by words and a colon, as an equation whose left side is the label
    (its `text` is "label": a list of them is compared in order)."""
    m = _LABEL.match(s)
    if not m or m.group(1).strip().lower() in ("or", "and"):
        return None
    return Node("eq", text="label", items=(scalar(m.group(1)), scalar(m.group(2))))


def _item(part: str) -> Node:
    """One item of a list: `40 chocolate candies` is the number 40 (the words name what is counted)."""
    m = _WORDS_AFTER.match(part)
    return parse_structure(m.group(1) if m else part)


def _single(s: str) -> Node:
    if "matrix}" in s and (s.count("\\begin{") > 1 or not _MATRIX.match(s)):
        entries = matrices.evaluate(s)
        if entries is not None:  # `A + B`, `2A` with written-out matrices: the resulting matrix
            return Node("matrix", items=tuple(Node("tuple", items=tuple(scalar(e) for e in row)) for row in entries))
    m = _MATRIX.match(s)
    if m:
        rows = [r for r in re.split(r"\\\\(?:\[[^\]]*\])?", m.group(2)) if r.strip() and not r.strip().startswith("\\hline")]
        cells = tuple(Node("tuple", items=tuple(scalar(c) for c in r.split("&"))) for r in rows)
        return Node("matrix", items=cells)
    if s.startswith("\\{") and ("\\mid" in s or "|" in s or ":" in s):
        described = _set_builder(s)
        if described is not None:
            return described
    braced = s.startswith("{") and s.endswith("}") and closing(s, 0) == len(s) - 1 and "," in s
    if braced or (s.startswith("\\{") and closing(s, 0) == len(s) - 2 and s.endswith("\\}")):
        inner = s[1:-1] if braced else s[2:-2]
        parts = [p for p in split_top(inner, (",", ";")) if p.strip()] if inner.strip() else []
        return Node("set", items=tuple(parse_structure(p) for p in parts))
    opener = "\\langle" if s.startswith("\\langle") else s[:1]
    if opener in ("(", "[", "\\langle") and closing(s, 0) == len(s) - (7 if s.endswith("\\rangle") else 1):
        inner = s[len(opener):-(7 if s.endswith("\\rangle") else 1)]
        parts = split_top(inner, (",", ";"))
        if len(parts) >= 2 and all(p.strip() for p in parts):
            close = "\\rangle" if s.endswith("\\rangle") else s[-1]
            return Node("tuple", items=tuple(parse_structure(p) for p in parts),
                        open="(" if opener == "\\langle" else opener, close=")" if close == "\\rangle" else close)
        if (opener == "(" and s.endswith(")")) or inner.strip().startswith("\\begin{"):
            return _single(inner.strip())  # `(3)`, and a matrix in brackets
    relation = _relation(s)
    if relation is not None:
        return relation
    pm = split_top(s, ("\\pm", "\\mp"))
    if len(pm) == 2:
        left, right = pm[0].strip(), pm[1].strip()
        plus, minus = (f"{left}+{right}", f"{left}-({right})") if left else (right, f"-({right})")
        if "\\pm" not in s:  # `\\mp`: the lower sign first, so that `(\\pm a, \\mp b)` pairs a with -b
            return Node("set", text="pm", items=(scalar(minus), scalar(plus)), open="mp")
        return Node("set", text="pm", items=(scalar(plus), scalar(minus)))
    signs = s.count("\\pm") + s.count("\\mp")
    if signs == 1 and not continues(s, s.find("\\pm") if "\\pm" in s else s.find("\\mp"), "\\pm"):
        # `\\frac{-1 \\pm \\sqrt{13}}{4}`: inside a group, the sign applies to the next term
        upper, lower = ("+", "-") if "\\pm" in s else ("-", "+")
        token = "\\pm" if "\\pm" in s else "\\mp"
        return Node("set", text="pm", items=(scalar(s.replace(token, upper)), scalar(s.replace(token, lower))),
                    open="" if token == "\\pm" else "mp")
    return scalar(s)


def relation(s: str) -> Node | None:
    """The relation `s` states (an interval for `x > 3`, an equation, a chain), or None."""
    return _relation(s)


def _relation(s: str) -> Node | None:
    pieces, ops = split_top_with(s, _RELATIONS)
    if not ops:
        return None
    if any(not p.strip() for p in pieces):
        return None
    if set(ops) == {"="}:  # `z = 1 + 1 = 2`: the first name and the final value
        return Node("eq", text="chain" if len(pieces) > 2 else "", items=(scalar(pieces[0]), scalar(pieces[-1])))
    interval = _as_interval(pieces, ops)
    if interval is not None:
        return interval
    if ops == ["\\ne"] and is_symbol(pieces[0]) and not is_symbol(pieces[1]):  # `x \ne 3`: all reals but 3
        everything = Node("tuple", items=(scalar("-\\infty"), scalar("\\infty")), open="(", close=")")
        excluded = _difference(everything, scalar(pieces[1]))
        if excluded is not None:
            return excluded
    return Node("rel", text=" ".join(ops), items=tuple(scalar(p) for p in pieces))


def _difference(whole: Node, removed: Node) -> Node | None:
    """`\\mathbb{R} \\setminus \\{-2\\}` -> `(-\\infty,-2) \\cup (-2,\\infty)`: an interval (or union)
    minus finitely many real points, as the union of intervals it leaves; None otherwise."""
    from rlvr.verifiers.math import expressions

    intervals = whole.items if whole.kind == "union" else (whole,)
    points = removed.items if removed.kind == "set" else (removed,) if removed.kind == "scalar" else ()
    if not points or any(p.kind != "scalar" for p in points):
        return None
    if any(i.kind != "tuple" or len(i.items) != 2 or i.open not in "([" or i.close not in ")]" for i in intervals):
        return None

    def where(text: str):
        t = text.replace(" ", "")
        if t in ("\\infty", "+\\infty", "-\\infty"):
            return float("-inf") if t.startswith("-") else float("inf")
        v = expressions.value(text)
        return None if v is None or (not isinstance(v, Fraction) and v.imag != 0) else (
            v if isinstance(v, Fraction) else v.real)

    cut = sorted(((where(p.text), p.text) for p in points), key=lambda x: (x[0] is None, x[0]))
    if any(v is None for v, _ in cut):
        return None
    pieces = []
    for interval in intervals:
        lo, hi = where(interval.items[0].text), where(interval.items[1].text)
        if lo is None or hi is None:
            return None
        start, start_text, opener = lo, interval.items[0].text, interval.open
        for value, text in cut:
            if value < start or value > hi or (value == start and opener == "("):
                continue
            if value > start:
                pieces.append(Node("tuple", items=(scalar(start_text), scalar(text)), open=opener, close=")"))
            start, start_text, opener = value, text, "("
        if start < hi or (start == hi and opener == "[" and interval.close == "]"):
            close = ")" if any(v == hi for v, _ in cut) else interval.close
            pieces.append(Node("tuple", items=(scalar(start_text), interval.items[1]), open=opener, close=close))
    if not pieces:
        return None
    return pieces[0] if len(pieces) == 1 else Node("union", items=tuple(pieces))


_FLIP = {"<": ">", ">": "<", "\\leq": "\\geq", "\\geq": "\\leq"}


def _as_interval(pieces: list[str], ops: list[str]) -> Node | None:
    """`x > 3` -> (3, \\infty); `-1 \\leq x < 2` -> [-1, 2); anything else: None."""
    if any(op not in _FLIP for op in ops):
        return None
    pieces = [p.strip() for p in pieces]
    if len(ops) == 1:
        if is_symbol(pieces[0]) and not is_symbol(pieces[1]):
            var, op, bound = pieces[0], ops[0], pieces[1]
        elif is_symbol(pieces[1]) and not is_symbol(pieces[0]):
            var, op, bound = pieces[1], _FLIP[ops[0]], pieces[0]
        else:
            return None
        del var
        closed = op in ("\\leq", "\\geq")
        if op in ("<", "\\leq"):
            return Node("tuple", items=(scalar("-\\infty"), scalar(bound)), open="(", close="]" if closed else ")")
        return Node("tuple", items=(scalar(bound), scalar("\\infty")), open="[" if closed else "(", close=")")
    if len(ops) == 2 and is_symbol(pieces[1]) and not is_symbol(pieces[0]) and not is_symbol(pieces[2]):
        if ops[0] in ("<", "\\leq") and ops[1] in ("<", "\\leq"):
            lo, hi, lo_op, hi_op = pieces[0], pieces[2], ops[0], ops[1]
        elif ops[0] in (">", "\\geq") and ops[1] in (">", "\\geq"):
            lo, hi, lo_op, hi_op = pieces[2], pieces[0], _FLIP[ops[1]], _FLIP[ops[0]]
        else:
            return None
        return Node("tuple", items=(scalar(lo), scalar(hi)), open="[" if lo_op == "\\leq" else "(",
                    close="]" if hi_op == "\\leq" else ")")
    return None


def is_symbol(s: str) -> bool:
    """A single variable name: `x`, `y_1`, `\\theta`, `f(x)` (the left side of an assignment)."""
    s = s.strip()
    return bool(_SYMBOL.match(s)) and s not in ("\\pi", "\\infty", "e", "i")


def nesting_depth(s: str) -> int:
    """The deepest bracket nesting in `s` (one linear pass, any bracket type)."""
    depth = deepest = 0
    for ch in s:
        if ch in OPEN:
            depth += 1
            deepest = max(deepest, depth)
        elif ch in CLOSE:
            depth -= 1
    return deepest


def is_name(s: str) -> bool:
    """The left side of an assignment that names the answer: `x`, `(p, q)`, `|AB|`, `A:B`,
    `V_{1}:V_{2}`, `f(x)` - anything without a number outside subscripts."""
    s = s.strip()
    if is_symbol(s):
        return True
    bare = re.sub(r"_\{[^{}]*\}|_\w", "", s)
    return (0 < len(s) <= 40 and re.search(r"[A-Za-z]", bare) is not None and not re.search(r"\d", bare)
            and "\\infty" not in s and "\\pi" not in s)


def size(node: Node) -> int:
    """How many top-level values the answer states (1 for a scalar or equation)."""
    return len(node.items) if node.kind in ("list", "set") else 1


# Set-builder notation as the intervals it describes: `\{x \mid -1 < x < 1\}` is `(-1, 1)`.
#
# The condition is read as a disjunction ("or", `\lor`) of conjunctions ("and", a comma) of
# relations of the set's one variable: an inequality or a chain of two is an interval, `x = c` the
# point set `\{c\}`, `x \ne c` the reals without c, and two one-sided bounds joined by "and" the
# interval between them. The variable ranges over the reals (no domain, or `\mathbb{R}`); a set over
# the integers (`\{n \in \mathbb{Z} \mid 1 \le n \le 3\}` is `\{1, 2, 3\}`) or any condition
# outside these shapes is left as written, and compares equal to nothing but itself.
_BUILDER = re.compile(r"^\\\{\s*(?P<var>[a-zA-Z](?:_\{?\w+\}?)?|\\[a-zA-Z]+)\s*"
                      r"(?:\\in\s*(?:\(-\\infty,\\infty\)|R))?\s*(?:\\mid|\||:|\\colon)(?P<cond>.+)\\\}$", re.DOTALL)
_OR = (" or ", "\\lor", "\\vee")
_AND = (",", ";", " and ", "\\land", "\\wedge")


def _set_builder(s: str) -> Node | None:
    """The interval, union or point set that normalised `s` describes, or None if it is not a
    set-builder expression of the shapes above."""
    m = _BUILDER.match(s.strip())
    if not m:
        return None
    var = m.group("var").strip()
    parts = []
    for disjunct in split_top(m.group("cond"), _OR):
        conjuncts = [c for c in split_top(disjunct, _AND) if c.strip()]
        nodes = [_builder_condition(c, var) for c in conjuncts]
        if not nodes or any(n is None for n in nodes):
            return None
        node = nodes[0] if len(nodes) == 1 else _builder_between(nodes)
        if node is None:
            return None
        parts.extend(node.items if node.kind == "union" else (node,))
    return parts[0] if len(parts) == 1 else Node("union", items=tuple(parts))


def _builder_condition(text: str, var: str) -> Node | None:
    pieces, ops = split_top_with(text, RELATIONS)
    if not ops or var not in (p.strip() for p in pieces):
        return None
    if ops == ["="] and len(pieces) == 2 and pieces[0].strip() == var and pieces[1].strip():
        return Node("set", items=(scalar(pieces[1]),))
    node = relation(text.strip())
    if node is None or node.kind not in ("tuple", "union"):
        return None
    return node


def _builder_between(nodes: list[Node]) -> Node | None:
    """`x > a` and `x \\le b`: the interval from a to b."""
    if len(nodes) != 2 or any(n.kind != "tuple" or len(n.items) != 2 for n in nodes):
        return None
    lower = next((n for n in nodes if n.items[1].text == "\\infty"), None)
    upper = next((n for n in nodes if n.items[0].text == "-\\infty"), None)
    if lower is None or upper is None or lower is upper:
        return None
    return Node("tuple", items=(lower.items[0], upper.items[1]), open=lower.open, close=upper.close)
