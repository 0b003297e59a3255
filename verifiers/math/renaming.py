"""A free variable renamed: `f(z) = z` for `f(x) = x`, `n\\pi` for `k\\pi`, `(3t, 5t)` for `(3x, 5x)`.

The name of a function's argument, of the integer parameter of a periodic family or of a curve's
parameter carries no meaning, so an answer that differs from the reference only by that name is
the same answer. Elsewhere a name does carry meaning: `2y` is not `2x` (the question named x), and
`x^2 + y^2 = 1` is not `x^2 + t^2 = 1`. So the rule reads only values (scalars, tuples, lists,
sets, and the right side of an assignment, whose left side is a label), renames exactly one
variable (the answer's one name that the reference lacks, into the reference's one name that
the answer lacks), and only where the name is a dummy:
- bound by a function label on both sides: `f(z) = z` for `f(x) = x`;
- a parameter used in two or more parts of a tuple or list on both sides: `(-32+3t, 64-5t)`;
- an integer parameter (k, m, n, j, l) of a family with pi on both sides: `\\frac{\\pi}{4} + n\\pi`.
In the last two the name must stand in an expression (`3t`, `k\\pi`), not only as a bare letter.
"""

from __future__ import annotations

import re

from rlvr.verifiers.math.structures import Node, is_name, parse_structure

_GREEK = frozenset(("\\alpha", "\\beta", "\\gamma", "\\delta", "\\epsilon", "\\varepsilon", "\\zeta", "\\eta",
                    "\\theta", "\\vartheta", "\\kappa", "\\lambda", "\\mu", "\\nu", "\\xi", "\\rho", "\\sigma",
                    "\\tau", "\\phi", "\\varphi", "\\chi", "\\psi", "\\omega"))
_INTEGER_NAMES = frozenset("kmnjl")  # the usual names of an integer parameter (`x = \\frac{\\pi}{4} + k\\pi`)
_CONSTANTS = frozenset(("e", "i"))  # Euler's number and the imaginary unit are never renamed
_TOKEN = re.compile(r"\\[A-Za-z]+|[A-Za-z](?:_\{[^{}]*\}|_[A-Za-z0-9])?")
_WORD = re.compile(r"(?<![\\A-Za-z])[A-Za-z]{3,}")  # a word: text, not a product of variables
_FUNCTION = re.compile(r"(?:\\?[A-Za-z]+)(?:_\{?\w+\}?)?\s*\(([^()]*)\)")  # `f(x)`, `P(x, y)`


def names(text: str) -> list[str]:
    """The variable names of normalised `text`, in order of first use (letters with their
    subscripts and Greek letters; commands such as `\\frac` and the constants e, i are not names)."""
    out = []
    for token in _TOKEN.findall(text):
        name = token if not token.startswith("\\") or token in _GREEK else None
        if name is not None and name not in _CONSTANTS and name not in out:
            out.append(name)
    return out


def rename(text: str, old: str, new: str) -> str:
    """`text` with every use of the variable `old` written `new` (whole tokens only)."""
    return _TOKEN.sub(lambda m: new if m.group(0) == old else m.group(0), text)


def renamed_answer(answer: str, reference: str, node_a: Node, node_r: Node) -> str | None:
    """The answer with its one free variable written as the reference's, when the two differ by
    that name alone; None when the rule does not apply."""
    if _WORD.search(answer) or _WORD.search(reference):
        return None
    seen_a, seen_r = _values(node_a), _values(node_r)
    if seen_a is None or seen_r is None:
        return None
    (leaves_a, bound_a), (leaves_r, bound_r) = seen_a, seen_r
    vars_a = {n for leaf in leaves_a for n in names(leaf)}
    vars_r = {n for leaf in leaves_r for n in names(leaf)}
    only_a, only_r = vars_a - vars_r, vars_r - vars_a
    if len(only_a) != 1 or len(only_r) != 1:
        return None
    old, new = only_a.pop(), only_r.pop()
    if new in names(answer) or old in names(reference):
        return None  # the new name already means something in the answer (a label, another part)
    bound = old in bound_a and new in bound_r
    parametric = _uses(old, leaves_a) >= 2 and _uses(new, leaves_r) >= 2
    periodic = old in _INTEGER_NAMES and new in _INTEGER_NAMES and "\\pi" in answer and "\\pi" in reference
    if not (bound or ((parametric or periodic) and _in_expression(old, leaves_a) and _in_expression(new, leaves_r))):
        return None
    return rename(answer, old, new)


def _values(node: Node) -> tuple[list[str], set[str]] | None:
    """The value leaves of a parsed answer and the names its labels bind (`f(z) = ...` binds z);
    None when it holds an equation or relation between expressions, whose names are coordinates."""
    leaves: list[str] = []
    bound: set[str] = set()
    stack = [node]
    while stack:
        item = stack.pop()
        if item.kind == "scalar":
            leaves.append(item.text)
        elif item.kind == "eq":
            lhs = item.items[0].text
            if not is_name(lhs):
                return None
            for m in _FUNCTION.finditer(lhs):  # `f(z)`, `(P(x), Q(x))`
                bound.update(names(m.group(1)))
            stack.append(parse_structure(item.items[1].text))
        elif item.kind == "rel":
            return None
        else:
            stack.extend(item.items)
    return leaves, bound


def _uses(name: str, leaves: list[str]) -> int:
    return sum(name in names(leaf) for leaf in leaves)


def _in_expression(name: str, leaves: list[str]) -> bool:
    """Whether `name` is used inside an expression (`3t`, `k\\pi`), not only as a bare letter."""
    return any(name in names(leaf) and leaf.replace(" ", "") != name for leaf in leaves)
