"""Exact, safe evaluation of untrusted arithmetic such as a countdown answer.

Model output is never passed to `eval`: the text is parsed with `ast` and only integer
literals, `+ - * /`, unary minus and parentheses are accepted; anything else (names,
calls, attributes, `**`, floats) is refused. Values are `Fraction`s, so `7/2*2` is
exactly 7. Length and nesting are capped, so the walk is cheap on any input.
"""

from __future__ import annotations

import ast
from collections import Counter
from fractions import Fraction

MAX_CHARS = 500
MAX_DEPTH = 100

_OPS = {
    ast.Add: lambda a, b: a + b,
    ast.Sub: lambda a, b: a - b,
    ast.Mult: lambda a, b: a * b,
    ast.Div: lambda a, b: a / b,
}


class ExprError(ValueError):
    """The text is not an allowed arithmetic expression (or divides by zero)."""


def evaluate_expression(text: str) -> tuple[Fraction, Counter]:
    """The exact value of `text` and the multiset of integer literals it uses."""
    if len(text) > MAX_CHARS:
        raise ExprError(f"expression longer than {MAX_CHARS} characters")
    normalized = text.replace("×", "*").replace("·", "*").replace("÷", "/").replace("−", "-")
    normalized = normalized.replace("\\times", "*").replace("\\cdot", "*").replace("\\div", "/")
    try:
        tree = ast.parse(normalized.strip(), mode="eval")
    except (SyntaxError, ValueError) as exc:
        raise ExprError(f"not an arithmetic expression: {exc.__class__.__name__}") from None
    literals: Counter = Counter()
    return _walk(tree.body, literals, 0), literals


def _walk(node: ast.AST, literals: Counter, depth: int) -> Fraction:
    if depth > MAX_DEPTH:
        raise ExprError("expression nested too deeply")
    if isinstance(node, ast.Constant) and type(node.value) is int:
        literals[node.value] += 1
        return Fraction(node.value)
    if isinstance(node, ast.BinOp) and type(node.op) in _OPS:
        left = _walk(node.left, literals, depth + 1)
        right = _walk(node.right, literals, depth + 1)
        if isinstance(node.op, ast.Div) and right == 0:
            raise ExprError("division by zero")
        return _OPS[type(node.op)](left, right)
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        value = _walk(node.operand, literals, depth + 1)
        return -value if isinstance(node.op, ast.USub) else value
    raise ExprError(f"{type(node).__name__} is not allowed (only integers, + - * / and parentheses)")
