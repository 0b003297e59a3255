"""Set-builder notation as the intervals it describes: `\\{x \\mid -1 < x < 1\\}` is `(-1, 1)`.

The condition is read as a disjunction ("or", `\\lor`) of conjunctions ("and", a comma) of
relations of the set's one variable: an inequality or a chain of two is an interval, `x = c` the
point set `\\{c\\}`, `x \\ne c` the reals without c, and two one-sided bounds joined by "and" the
interval between them. The variable ranges over the reals (no domain, or `\\mathbb{R}`); a set over
the integers (`\\{n \\in \\mathbb{Z} \\mid 1 \\le n \\le 3\\}` is `\\{1, 2, 3\\}`) or any condition
outside these shapes is left as written, and compares equal to nothing but itself.
"""

from __future__ import annotations

import re

from rlvr.verifiers.math import structures
from rlvr.verifiers.math.structures import Node, scalar

_BUILDER = re.compile(r"^\\\{\s*(?P<var>[a-zA-Z](?:_\{?\w+\}?)?|\\[a-zA-Z]+)\s*"
                      r"(?:\\in\s*(?:\(-\\infty,\\infty\)|R))?\s*(?:\\mid|\||:|\\colon)(?P<cond>.+)\\\}$", re.DOTALL)
_OR = (" or ", "\\lor", "\\vee")
_AND = (",", ";", " and ", "\\land", "\\wedge")


def parse(s: str) -> Node | None:
    """The interval, union or point set that normalised `s` describes, or None if it is not a
    set-builder expression of the shapes above."""
    m = _BUILDER.match(s.strip())
    if not m:
        return None
    var = m.group("var").strip()
    parts = []
    for disjunct in structures.split_top(m.group("cond"), _OR):
        conjuncts = [c for c in structures.split_top(disjunct, _AND) if c.strip()]
        nodes = [_condition(c, var) for c in conjuncts]
        if not nodes or any(n is None for n in nodes):
            return None
        node = nodes[0] if len(nodes) == 1 else _between(nodes)
        if node is None:
            return None
        parts.extend(node.items if node.kind == "union" else (node,))
    return parts[0] if len(parts) == 1 else Node("union", items=tuple(parts))


def _condition(text: str, var: str) -> Node | None:
    pieces, ops = structures.split_top_with(text, structures.RELATIONS)
    if not ops or var not in (p.strip() for p in pieces):
        return None
    if ops == ["="] and len(pieces) == 2 and pieces[0].strip() == var and pieces[1].strip():
        return Node("set", items=(scalar(pieces[1]),))
    node = structures.relation(text.strip())
    if node is None or node.kind not in ("tuple", "union"):
        return None
    return node


def _between(nodes: list[Node]) -> Node | None:
    """`x > a` and `x \\le b`: the interval from a to b."""
    if len(nodes) != 2 or any(n.kind != "tuple" or len(n.items) != 2 for n in nodes):
        return None
    lower = next((n for n in nodes if n.items[1].text == "\\infty"), None)
    upper = next((n for n in nodes if n.items[0].text == "-\\infty"), None)
    if lower is None or upper is None or lower is upper:
        return None
    return Node("tuple", items=(lower.items[0], upper.items[1]), open=lower.open, close=upper.close)
