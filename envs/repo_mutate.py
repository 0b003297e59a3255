"""Bugs by AST mutation: small, single-line, always-parsing changes to a package's source.

Each operator finds nodes with `ast` and rewrites only the exact source span of the node (or
of its operator), so the patch is one changed line and the rest of the file keeps its
formatting. Operators: comparison flips (< <=, == !=, in / not in, is / is not), arithmetic
and bitwise swaps (+ -, * //, ...), and/or swaps, off-by-one integer constants, True/False,
removed `not`, a negated `if`/`while` condition, a `return` of None, a deleted statement
(replaced by `pass`) and break/continue swaps. `unified_diff` writes patches that `git apply`
takes, including files without a final newline.
"""

from __future__ import annotations

import ast
import difflib
import random
from collections.abc import Iterator
from dataclasses import dataclass

COMPARE_SWAP = {ast.Lt: "<=", ast.LtE: "<", ast.Gt: ">=", ast.GtE: ">", ast.Eq: "!=", ast.NotEq: "==",
                ast.In: "not in", ast.NotIn: "in", ast.Is: "is not", ast.IsNot: "is"}
COMPARE_TEXT = {ast.Lt: "<", ast.LtE: "<=", ast.Gt: ">", ast.GtE: ">=", ast.Eq: "==", ast.NotEq: "!=",
                ast.In: "in", ast.NotIn: "not in", ast.Is: "is", ast.IsNot: "is not"}
BINOP_SWAP = {ast.Add: ("+", "-"), ast.Sub: ("-", "+"), ast.Mult: ("*", "//"), ast.FloorDiv: ("//", "*"),
              ast.Div: ("/", "*"), ast.Mod: ("%", "//"), ast.BitAnd: ("&", "|"), ast.BitOr: ("|", "&"),
              ast.LShift: ("<<", ">>"), ast.RShift: (">>", "<<")}


@dataclass(frozen=True)
class Mutant:
    file: str
    operator: str
    description: str
    line: int
    source: str          # the whole mutated file


def _replace(lines: list[str], line: int, start: int, end: int, text: str) -> str | None:
    """Replace columns [start, end) of 1-based `line` (ast gives UTF-8 byte offsets)."""
    raw = lines[line - 1].encode()
    if end > len(raw) or start > end:
        return None
    new = raw[:start] + text.encode() + raw[end:]
    out = list(lines)
    out[line - 1] = new.decode()
    return "".join(out)


def _between(lines, node_a, node_b, old: str, new: str):
    """Swap the operator text `old` found between two operands on one line."""
    if node_a.end_lineno != node_b.lineno:
        return None
    raw = lines[node_b.lineno - 1].encode()
    gap = raw[node_a.end_col_offset:node_b.col_offset].decode(errors="replace")
    stripped = gap.strip().strip("()").strip()
    if stripped != old:
        return None
    at = gap.index(old)
    start = node_a.end_col_offset + len(gap[:at].encode())
    return _replace(lines, node_b.lineno, start, start + len(old.encode()), new)


def _docstring_nodes(tree: ast.AST) -> set[int]:
    ids = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                ids.add(id(first))
                ids.add(id(first.value))
    return ids


def mutants(path: str, text: str) -> Iterator[Mutant]:
    """Every single-line mutant of one source file that still parses."""
    try:
        tree = ast.parse(text)
    except SyntaxError:
        return
    lines = text.splitlines(keepends=True)
    skip = _docstring_nodes(tree)
    seen: set[str] = set()

    def emit(node, operator, description, source):
        if source is None or source == text or source in seen:
            return None
        try:
            ast.parse(source)
        except SyntaxError:
            return None
        seen.add(source)
        return Mutant(path, operator, description, node.lineno, source)

    for node in ast.walk(tree):
        if id(node) in skip or not hasattr(node, "lineno") or node.lineno != getattr(node, "end_lineno", None) \
                and not isinstance(node, (ast.If, ast.While, ast.Return)):
            continue
        found = []
        if isinstance(node, ast.Compare) and len(node.ops) == 1:
            op = type(node.ops[0])
            if op in COMPARE_SWAP:
                src = _between(lines, node.left, node.comparators[0], COMPARE_TEXT[op], COMPARE_SWAP[op])
                found.append(("compare", f"{COMPARE_TEXT[op]} -> {COMPARE_SWAP[op]}", src))
        elif isinstance(node, ast.BinOp) and type(node.op) in BINOP_SWAP:
            old, new = BINOP_SWAP[type(node.op)]
            if not (isinstance(node.op, ast.Mod) and isinstance(node.left, (ast.Constant, ast.JoinedStr))):
                found.append(("binop", f"{old} -> {new}", _between(lines, node.left, node.right, old, new)))
        elif isinstance(node, ast.BoolOp) and len(node.values) == 2:
            old, new = ("and", "or") if isinstance(node.op, ast.And) else ("or", "and")
            found.append(("boolop", f"{old} -> {new}", _between(lines, node.values[0], node.values[1], old, new)))
        elif isinstance(node, ast.Constant) and type(node.value) is int and 0 <= node.value <= 1000:
            new = str(node.value + 1) if node.value in (0, 1) or node.value % 2 else str(node.value - 1)
            found.append(("constant", f"{node.value} -> {new}",
                          _replace(lines, node.lineno, node.col_offset, node.end_col_offset, new)))
        elif isinstance(node, ast.Constant) and type(node.value) is bool:
            new = str(not node.value)
            found.append(("constant", f"{node.value} -> {new}",
                          _replace(lines, node.lineno, node.col_offset, node.end_col_offset, new)))
        elif isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not) \
                and node.operand.end_lineno == node.lineno:
            raw = lines[node.lineno - 1].encode()
            inner = raw[node.operand.col_offset:node.operand.end_col_offset].decode()
            found.append(("not", "removed not",
                          _replace(lines, node.lineno, node.col_offset, node.end_col_offset, inner)))
        elif isinstance(node, (ast.If, ast.While)) and node.test.lineno == node.test.end_lineno == node.lineno:
            raw = lines[node.lineno - 1].encode()
            cond = raw[node.test.col_offset:node.test.end_col_offset].decode()
            found.append(("condition", f"negated {type(node).__name__.lower()} condition",
                          _replace(lines, node.lineno, node.test.col_offset, node.test.end_col_offset,
                                   f"not ({cond})")))
        elif isinstance(node, ast.Return) and node.value is not None and node.lineno == node.end_lineno \
                and not (isinstance(node.value, ast.Constant) and node.value.value is None):
            found.append(("return", "return None",
                          _replace(lines, node.lineno, node.value.col_offset, node.value.end_col_offset, "None")))
        elif isinstance(node, (ast.Assign, ast.AugAssign, ast.Expr)) and node.lineno == node.end_lineno \
                and not (isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant)):
            found.append(("delete", "statement replaced by pass",
                          _replace(lines, node.lineno, node.col_offset, node.end_col_offset, "pass")))
        elif isinstance(node, (ast.Break, ast.Continue)):
            new = "continue" if isinstance(node, ast.Break) else "break"
            found.append(("loop", f"{type(node).__name__.lower()} -> {new}",
                          _replace(lines, node.lineno, node.col_offset, node.end_col_offset, new)))
        for operator, description, source in found:
            mutant = emit(node, operator, description, source)
            if mutant is not None:
                yield mutant


def sample_mutants(files: dict[str, str], limit: int, seed: int = 0) -> list[Mutant]:
    """Up to `limit` mutants spread over files, operators and lines (one per line at most)."""
    rng = random.Random(seed)
    pool = [m for path in sorted(files) for m in mutants(path, files[path])]
    rng.shuffle(pool)
    by_operator: dict[str, list[Mutant]] = {}
    for m in pool:
        by_operator.setdefault(m.operator, []).append(m)
    picked, lines_used = [], set()
    while len(picked) < limit and any(by_operator.values()):
        for operator in sorted(by_operator):
            bucket = by_operator[operator]
            while bucket:
                m = bucket.pop()
                if (m.file, m.line) not in lines_used:
                    lines_used.add((m.file, m.line))
                    picked.append(m)
                    break
            if len(picked) >= limit:
                break
    return picked


def unified_diff(path: str, old: str, new: str) -> str:
    """A `git apply`-able diff of one file (a/ and b/ prefixes, no-newline markers)."""
    old_lines = old.splitlines(keepends=True)
    new_lines = new.splitlines(keepends=True)
    out = []
    for line in difflib.unified_diff(old_lines, new_lines, f"a/{path}", f"b/{path}", n=3):
        if line.startswith(("---", "+++")):
            out.append(line.rstrip("\n") + "\n")
        elif line.endswith("\n"):
            out.append(line)
        else:
            out.append(line + "\n\\ No newline at end of file\n")
    return "".join(out)
