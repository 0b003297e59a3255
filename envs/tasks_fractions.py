"""Fraction arithmetic: a few fractions joined by + - × ÷, answered in lowest terms.

Difficulty (1..10) raises the largest denominator (3 + 2 x level) and, every third
level, the number of terms. The value is computed exactly with `Fraction`.
"""

from __future__ import annotations

import random
from fractions import Fraction
from typing import Any

from rlvr.envs.expr import evaluate_expression
from rlvr.envs.tasks import Generator

_SHOWN = {"+": "+", "-": "-", "*": "\\times", "/": "\\div"}


class FractionTasks(Generator):
    family = "fractions"

    def __init__(self, ops: str = "+-*/", difficulty: int = 1, seed: int = 0):
        super().__init__(difficulty=difficulty, seed=seed)
        if not isinstance(ops, str) or not ops or set(ops) - set(_SHOWN):
            raise ValueError(f"ops must be a non-empty string of '+-*/', got {ops!r}")
        self.ops = "".join(sorted(set(ops), key="+-*/".index))

    def params(self) -> str:
        return f"d{self.difficulty}:{self.ops}"

    def make(self, rng: random.Random) -> tuple[str, Any, dict[str, Any]]:
        terms = 2 + (self.difficulty - 1) // 3
        top = 3 + 2 * self.difficulty
        fractions = []
        for _ in range(terms):
            q = rng.randint(2, top)
            fractions.append(Fraction(rng.randint(1, q - 1), q))
        ops = [rng.choice(self.ops) for _ in range(terms - 1)]
        ascii_expr = f"({fractions[0].numerator}/{fractions[0].denominator})" + "".join(
            f" {op} ({f.numerator}/{f.denominator})" for op, f in zip(ops, fractions[1:]))
        value, _ = evaluate_expression(ascii_expr)
        shown = _latex(fractions[0]) + "".join(f" {_SHOWN[op]} {_latex(f)}" for op, f in zip(ops, fractions[1:]))
        prompt = f"Compute ${shown}$. Give the answer as a fraction in lowest terms (or an integer) in \\boxed{{}}."
        return prompt, _latex(value), {"simplified": True}  # lowest terms, as asked: no unevaluated sums


def _latex(value: Fraction) -> str:
    if value.denominator == 1:
        return str(value.numerator)
    sign = "-" if value < 0 else ""
    return f"{sign}\\frac{{{abs(value.numerator)}}}{{{value.denominator}}}"
