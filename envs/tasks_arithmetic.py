"""Arithmetic drills: `terms` integers of `digits` digits joined by operators from `ops`.

The difficulty knob is the number of digits. Before a division the first number of its
`*`/`/` run is multiplied by the divisor, so every answer is an integer; the value is computed with the same
safe evaluator that checks countdown answers, never with `eval`.
"""

from __future__ import annotations

import random
from typing import Any

from rlvr.envs.expr import evaluate_expression
from rlvr.envs.tasks import Generator

OPERATORS = "+-*/"


class ArithmeticTasks(Generator):
    family = "arithmetic"
    levels = range(1, 19)

    def __init__(self, digits: int | None = None, ops: str = "+", terms: int = 2, difficulty: int | None = None,
                 seed: int = 0):
        if digits is not None and difficulty is not None and digits != difficulty:
            raise ValueError(f"arithmetic difficulty is the digit count: got digits={digits}, difficulty={difficulty}")
        level = digits if digits is not None else (difficulty if difficulty is not None else 2)
        super().__init__(difficulty=level, seed=seed)
        if not isinstance(ops, str) or not ops or set(ops) - set(OPERATORS):
            raise ValueError(f"ops must be a non-empty string of {OPERATORS!r}, got {ops!r}")
        if not isinstance(terms, int) or isinstance(terms, bool) or not 2 <= terms <= 10:
            raise ValueError(f"terms must be an int in 2..10, got {terms!r}")
        self.ops = "".join(sorted(set(ops), key=OPERATORS.index))
        self.terms = terms

    @property
    def digits(self) -> int:
        return self.difficulty

    def params(self) -> str:
        return f"d{self.difficulty}:{self.ops}:{self.terms}"

    def make(self, rng: random.Random) -> tuple[str, Any, dict[str, Any]]:
        numbers = [self._number(rng)]
        ops: list[str] = []
        chunk = 0  # index of the first number of the current * / run
        for _ in range(self.terms - 1):
            op = rng.choice(self.ops)
            number = self._number(rng)
            if op == "/":  # scale the run's first number so that the quotient stays exact
                number = max(number, 1)
                numbers[chunk] *= number
            elif op in "+-":
                chunk = len(numbers)
            ops.append(op)
            numbers.append(number)
        expression = str(numbers[0]) + "".join(f" {op} {n}" for op, n in zip(ops, numbers[1:]))
        value, _ = evaluate_expression(expression)
        prompt = f"Compute {expression}. Give the result as an integer in \\boxed{{}}."
        # `simplified`: the integer itself, as asked; `(623*685)` has the value but is no answer
        return prompt, str(value.numerator), {"simplified": True}

    def _number(self, rng: random.Random) -> int:
        low = 10 ** (self.digits - 1) if self.digits > 1 else 0
        return rng.randint(low, 10**self.digits - 1)
