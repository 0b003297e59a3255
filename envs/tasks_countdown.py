"""Countdown: reach a target number with the given numbers and + - * /.

Item generation combines randomly drawn numbers with random operators (exact divisions
only) until a positive target that is not simply one of the numbers comes out. The
verifier reads the expression from the final `\\boxed{}`, evaluates it with the safe
`rlvr.envs.expr` parser (never `eval`) and checks the target and the use of the numbers.
"""

from __future__ import annotations

import random
from collections import Counter
from typing import Any

from rlvr.envs.expr import ExprError, evaluate_expression
from rlvr.envs.tasks import Generator
from rlvr.verifiers.boxes import final_region, find_boxes
from rlvr.verifiers.core import BAD_REFERENCE, NO_ANSWER, PARSE_ERROR, WRONG, Score, Verifier, completion_text

_LATEX = (("\\left", ""), ("\\right", ""), ("{", "("), ("}", ")"), ("\\,", ""), ("$", ""))


class CountdownVerifier(Verifier):
    """1 when the boxed expression equals `reference` (the target) using the `numbers` field.

    Each given number may be used at most as often as it is given; with the task field
    `use_all=True`, exactly as often. An `= target` tail after the expression is allowed.
    """

    name = "countdown"

    def score(self, completion: Any, reference: Any = None, *, numbers: list[int] | None = None,
              use_all: bool = False, **ignored: Any) -> Score:
        if numbers is None or reference is None:
            return Score(0.0, BAD_REFERENCE, info={"why": "task has no numbers or target"})
        region = final_region(completion_text(completion))
        boxes = find_boxes(region) if region is not None else []
        if not boxes or not boxes[-1].closed:
            return Score(0.0, NO_ANSWER, info={"why": "no closed \\boxed{} expression"})
        text = boxes[-1].content
        for old, new in _LATEX:
            text = text.replace(old, new)
        expression = text.split("=")[0]
        try:
            value, used = evaluate_expression(expression)
        except ExprError as exc:
            return Score(0.0, PARSE_ERROR, info={"answer": boxes[-1].content, "why": str(exc)})
        info = {"answer": boxes[-1].content, "value": str(value)}
        given = Counter(int(n) for n in numbers)
        if used - given:
            return Score(0.0, WRONG, info={**info, "why": f"uses numbers not given: {sorted((used - given).elements())}"})
        if use_all and used != given:
            return Score(0.0, WRONG, info={**info, "why": "does not use every number exactly once"})
        if value != int(reference):
            return Score(0.0, WRONG, info={**info, "why": f"evaluates to {value}, not {reference}"})
        return Score(1.0, info=info)


class CountdownTasks(Generator):
    """`difficulty` 1..5 gives 2 + difficulty numbers; `use_all` requires every number once."""

    family = "countdown"
    levels = range(1, 6)

    def __init__(self, difficulty: int = 2, use_all: bool = False, max_target: int = 1000, seed: int = 0):
        super().__init__(difficulty=difficulty, seed=seed)
        if not isinstance(max_target, int) or max_target < 10:
            raise ValueError(f"max_target must be an int >= 10, got {max_target!r}")
        self.use_all = bool(use_all)
        self.max_target = max_target

    system_hint = "Put your final expression in \\boxed{}."

    def params(self) -> str:
        return f"d{self.difficulty}:{self.use_all}:{self.max_target}"

    def verifier_spec(self) -> tuple[str, dict[str, Any]]:
        return "countdown", {}

    def make(self, rng: random.Random) -> tuple[str, Any, dict[str, Any]]:
        count = self.difficulty + 2
        while True:
            numbers = [rng.choice([rng.randint(1, 10), rng.randint(1, 25), rng.choice((25, 50, 75, 100))])
                       for _ in range(count)]
            target = _combine(numbers, rng)
            if target is not None and 10 <= target <= self.max_target and target not in numbers:
                break
        how = "each exactly once" if self.use_all else "each at most once"
        prompt = (
            f"Using the numbers {numbers} ({how}) and the operations +, -, *, / with parentheses, "
            f"write an expression that equals {target}. Put the expression in \\boxed{{}}, "
            "for example \\boxed{(25 - 5) * 3}."
        )
        return prompt, str(target), {"numbers": numbers, "use_all": self.use_all}


def _combine(numbers: list[int], rng: random.Random) -> int | None:
    """Fold the numbers, in random order, with random operators; None if a step is not exact."""
    pool = numbers[:]
    rng.shuffle(pool)
    value = pool[0]
    for n in pool[1:]:
        op = rng.choice("+-*/")
        if op == "+":
            value += n
        elif op == "-":
            value = value - n if value > n else n - value
        elif op == "*":
            value *= n
        elif n and value % n == 0:
            value //= n
        elif value and n % value == 0:
            value = n // value
        else:
            return None
    return value
