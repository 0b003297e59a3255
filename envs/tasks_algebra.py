"""Linear equations in one unknown and linear systems in two or three, built with sympy.

The generator picks coefficients, lets sympy solve the system, and keeps only items with
a unique solution, so the gold answer is sympy's, not a hand-derived formula. Difficulty
(1..10) widens the coefficient range; from level 4 one-unknown equations have the unknown
on both sides, and from level 6 solutions may be fractions.
"""

from __future__ import annotations

import random
from typing import Any

import sympy

from rlvr.envs.tasks import Generator

_NAMES = "xyz"


class LinearEquationTasks(Generator):
    family = "linear"

    def __init__(self, unknowns: int = 1, difficulty: int = 1, seed: int = 0):
        super().__init__(difficulty=difficulty, seed=seed)
        if unknowns not in (1, 2, 3):
            raise ValueError(f"unknowns must be 1, 2 or 3, got {unknowns!r}")
        self.unknowns = unknowns
        if unknowns > 1:
            self.family = "linear_system"

    def params(self) -> str:
        return f"d{self.difficulty}:n{self.unknowns}"

    def make(self, rng: random.Random) -> tuple[str, Any, dict[str, Any]]:
        symbols = sympy.symbols(list(_NAMES[: self.unknowns]))
        span = 2 + 2 * self.difficulty
        while True:
            chosen = {s: rng.randint(-span, span) for s in symbols}
            equations = [self._equation(rng, symbols, span, chosen) for _ in symbols]
            solutions = sympy.solve(equations, symbols, dict=True)
            if len(solutions) == 1 and len(solutions[0]) == len(symbols):
                break
        values = [solutions[0][s] for s in symbols]
        shown = ", \\quad ".join(sympy.latex(e) for e in equations)
        if self.unknowns == 1:
            prompt = f"Solve for $x$: ${shown}$. Give the value of $x$ in \\boxed{{}}."
            reference = sympy.latex(values[0])
        else:
            names = ", ".join(_NAMES[: self.unknowns])
            prompt = (f"Solve the system ${shown}$. Give the solution as an ordered tuple $({names})$ "
                      f"in \\boxed{{}}.")
            reference = "(" + ", ".join(sympy.latex(v) for v in values) + ")"
        return prompt, reference, {}

    def _equation(self, rng: random.Random, symbols: list, span: int, chosen: dict) -> sympy.Eq:
        """`lhs = rhs` whose solution is `chosen` below level 6, and arbitrary (often a fraction) above."""

        def coefficient() -> int:
            return rng.choice([c for c in range(-span, span + 1) if c != 0])

        lhs = sum(coefficient() * s for s in symbols) + rng.randint(-span, span)
        moved = coefficient() * symbols[0] if self.unknowns == 1 and self.difficulty >= 4 else sympy.Integer(0)
        if self.difficulty >= 6:
            constant = sympy.Integer(rng.randint(-span * span, span * span))
        else:
            constant = (lhs - moved).subs(chosen)
        return sympy.Eq(lhs, moved + constant, evaluate=False)
