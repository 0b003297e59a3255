"""Matrix arithmetic written out: `A + B`, `2A`, `A \\cdot B`, `A^2` with literal matrices.

A reference such as `\\begin{pmatrix}1&0\\\\0&1\\end{pmatrix} + \\begin{pmatrix}1&2\\\\3&4\\end{pmatrix}`
means the matrix it evaluates to. The arithmetic is done on the entries as text: the entry
of a sum is `(a)+(b)`, of a product `(a_11)(b_11)+(a_12)(b_21)`, so each entry is then
compared by the ordinary scalar stages (exact numbers, the evaluator, sympy), variables
included. Anything else (a parenthesised sum, a transpose, an unknown operator) is None.
"""

from __future__ import annotations

import re

from rlvr.verifiers.math.splitting import split_top_with

MAX_ENTRY_CHARS = 2000
MAX_POWER = 4
_ENV = re.compile(r"\\begin\{([pbBvV]?matrix|smallmatrix)\}(.*?)\\end\{\1\}", re.DOTALL)
_MARK = "\x01"
_TIMES = ("\\cdot", "\\times", "*")


def evaluate(s: str) -> list[list[str]] | None:
    """The entries of the matrix that normalised `s` evaluates to, or None if `s` is not a sum of
    products of literal matrices and scalars (or is just one literal matrix)."""
    literals = []

    def mark(m: re.Match) -> str:
        rows = [r for r in re.split(r"\\\\(?:\[[^\]]*\])?", m.group(2)) if r.strip()]
        literals.append([[c.strip() for c in r.split("&")] for r in rows])
        return f"{_MARK}{len(literals) - 1}{_MARK}"

    text = _ENV.sub(mark, s)
    if not literals or "\\begin" in text or text.strip() == f"{_MARK}0{_MARK}":
        return None
    if any(len(row) != len(m[0]) for m in literals for row in m):
        return None
    pieces, signs = split_top_with(text.strip(), ("+", "-"))
    total = None
    for k, piece in enumerate(pieces):
        sign = "-" if k > 0 and signs[k - 1] == "-" else ""
        if not piece.strip():
            if k == 0 and len(pieces) > 1:
                continue  # a leading minus: the next term is negated
            return None
        term = _term(piece, literals)
        if term is None:
            return None
        if sign:
            term = [[f"-({e})" for e in row] for row in term]
        total = term if total is None else _add(total, term)
        if total is None:
            return None
    if total is None or any(len(e) > MAX_ENTRY_CHARS for row in total for e in row):
        return None
    return total


def _term(piece: str, literals) -> list[list[str]] | None:
    """One product: scalars and marked matrices, joined by `\\cdot`, `\\times`, `*` or nothing."""
    for op in _TIMES:
        piece = piece.replace(op, " ")
    parts = re.split(rf"({_MARK}\d+{_MARK}(?:\^\{{?\d\}}?)?)", piece)
    scalars, matrix = [], None
    for part in parts:
        if not part.strip():
            continue
        if part.startswith(_MARK):
            index, _, power = part[1:].partition(_MARK)
            factor = literals[int(index)]
            times = int(power.strip("^{}")) if power else 1
            if not 1 <= times <= MAX_POWER:
                return None
            for _ in range(times):
                matrix = factor if matrix is None else _multiply(matrix, factor)
                if matrix is None:
                    return None
        else:
            if _MARK in part or not re.search(r"[\w\\]", part):
                return None
            scalars.append(part.strip())
    if matrix is None:
        return None
    if scalars:
        coefficient = "".join(f"({c})" for c in scalars)
        matrix = [[f"{coefficient}({e})" for e in row] for row in matrix]
    return matrix


def _add(x, y):
    if len(x) != len(y) or len(x[0]) != len(y[0]):
        return None
    return [[f"({a})+({b})" for a, b in zip(rx, ry)] for rx, ry in zip(x, y)]


def _multiply(x, y):
    if len(x[0]) != len(y):
        return None
    return [["+".join(f"({x[i][k]})({y[k][j]})" for k in range(len(y))) for j in range(len(y[0]))]
            for i in range(len(x))]
