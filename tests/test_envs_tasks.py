"""Procedural task sources: determinism, gold answers checked independently, the safe countdown check."""

from __future__ import annotations

import itertools
import re
import time
from fractions import Fraction

import gymnasium as gym
import pytest
import sympy
from gymnasium.utils.env_checker import check_env

import rlvr.envs  # noqa: F401  (registers the ids)
from rlvr.envs import score_groups
from rlvr.envs.expr import ExprError, evaluate_expression
from rlvr.envs.tasks_algebra import LinearEquationTasks
from rlvr.envs.tasks_arithmetic import ArithmeticTasks
from rlvr.envs.tasks_code import TEMPLATES, CodeTasks
from rlvr.envs.tasks_countdown import CountdownTasks, CountdownVerifier
from rlvr.envs.tasks_fractions import FractionTasks

MATH_GENERATED = [
    ("rlvr/LinearEquation-v0", {}), ("rlvr/LinearEquation-v0", {"difficulty": 8}),
    ("rlvr/LinearSystem-v0", {}), ("rlvr/LinearSystem-v0", {"unknowns": 3, "difficulty": 6}),
    ("rlvr/Fractions-v0", {"difficulty": 5}), ("rlvr/Countdown-v0", {"difficulty": 4, "use_all": True}),
    ("rlvr/MathSelfCheck-v0", {"tasks": "fractions"}),
]


@pytest.mark.parametrize("env_id,kwargs", MATH_GENERATED)
def test_check_env_passes(env_id, kwargs):
    check_env(gym.make(env_id, **kwargs).unwrapped)


@pytest.mark.parametrize("source", [
    ArithmeticTasks(digits=3, ops="+-*/", terms=4), LinearEquationTasks(unknowns=2, difficulty=7),
    FractionTasks(difficulty=9), CountdownTasks(difficulty=3), CodeTasks(difficulty=2),
])
def test_items_are_a_function_of_seed_and_index(source):
    again = type(source).__new__(type(source))
    again.__dict__.update(source.__dict__)
    assert [source.get(i) for i in range(5)] == [again.get(i) for i in range(5)]
    assert len({source.get(i).prompt for i in range(20)}) >= 15
    other_seed = type(source).__new__(type(source))
    other_seed.__dict__.update({**source.__dict__, "seed": 1})
    assert [source.get(i).prompt for i in range(5)] != [other_seed.get(i).prompt for i in range(5)]
    harder = source.with_difficulty(source.levels.stop - 1)
    assert harder.get(0).difficulty == source.levels.stop - 1 and harder.get(0) != source.get(0)


def _latex_to_sympy(text: str):
    text = re.sub(r"\\frac\{(-?\d+)\}\{(\d+)\}", r"(\1/\2)", text)
    text = text.replace("\\times", "*").replace("\\div", "/").replace("\\quad", "")
    text = re.sub(r"(\d)\s*([xyz])", r"\1*\2", text)
    return sympy.sympify(text, rational=True)


@pytest.mark.parametrize("unknowns,difficulty", [(1, 1), (1, 4), (1, 9), (2, 2), (2, 7), (3, 5)])
def test_linear_gold_answers_solve_the_shown_equations(unknowns, difficulty):
    source = LinearEquationTasks(unknowns=unknowns, difficulty=difficulty)
    names = sympy.symbols("x y z")[:unknowns]
    for i in range(8):
        task = source.get(i)
        shown = re.search(r"\$([^$]*=[^$]*)\$", task.prompt).group(1)
        values = [_latex_to_sympy(v) for v in task.reference.strip("()").split(",")]
        assert len(values) == unknowns
        for equation in shown.split(", \\quad"):
            lhs, rhs = equation.split("=")
            residual = (_latex_to_sympy(lhs) - _latex_to_sympy(rhs)).subs(dict(zip(names, values)))
            assert residual == 0, (task.prompt, task.reference)
        if difficulty < 6:
            assert all(v.is_integer for v in values)


@pytest.mark.parametrize("difficulty", [1, 5, 10])
def test_fraction_gold_answers(difficulty):
    source = FractionTasks(difficulty=difficulty)
    for i in range(10):
        task = source.get(i)
        shown = re.search(r"Compute \$(.+?)\$", task.prompt).group(1)
        assert _latex_to_sympy(shown) == _latex_to_sympy(task.reference)
        assert shown.count("\\frac") == 2 + (difficulty - 1) // 3


def _reachable(numbers: list[int], target: int) -> bool:
    """Brute force: can some subset of the numbers reach the target with + - * /?"""
    def values(nums: tuple[Fraction, ...]) -> set[Fraction]:
        if len(nums) == 1:
            return {nums[0]}
        out: set[Fraction] = set()
        for r in range(1, len(nums)):
            for left_idx in itertools.combinations(range(len(nums)), r):
                left = tuple(nums[i] for i in left_idx)
                right = tuple(nums[i] for i in range(len(nums)) if i not in left_idx)
                for a in values(left):
                    for b in values(right):
                        out |= {a + b, a - b, a * b}
                        if b:
                            out.add(a / b)
        return out

    fracs = [Fraction(n) for n in numbers]
    return any(target in values(subset) for r in range(1, len(fracs) + 1)
               for subset in itertools.combinations(fracs, r))


def test_countdown_targets_are_reachable():
    source = CountdownTasks(difficulty=1)
    for i in range(10):
        task = source.get(i)
        numbers = task.fields["numbers"]
        assert len(numbers) == 3 and int(task.reference) not in numbers
        assert 10 <= int(task.reference) <= 1000
        assert _reachable(numbers, int(task.reference))


@pytest.mark.parametrize("completion,value,reason", [
    ("<think>25*4=100</think> \\boxed{(25 - 5) * 3}", 1.0, None),
    ("\\boxed{3 \\times (25 - 5) = 60}", 1.0, None),
    ("\\boxed{\\left(25-5\\right) \\cdot 3}", 1.0, None),
    ("\\boxed{(25 - 5) * 3 * 3}", 0.0, "wrong"),  # 3 used twice
    ("\\boxed{(25 - 5) * 4 - 20}", 0.0, "wrong"),  # numbers not given
    ("\\boxed{25 + 5}", 0.0, "wrong"),  # a valid expression, another value
    ("\\boxed{__import__('os').system('true')}", 0.0, "parse_error"),
    ("\\boxed{9 ** 9 ** 9}", 0.0, "parse_error"),
    ("\\boxed{60.0}", 0.0, "parse_error"),
    ("\\boxed{25 / (5 - 5)}", 0.0, "parse_error"),
    ("(25 - 5) * 3", 0.0, "no_answer"),
    ("<think>\\boxed{(25 - 5) * 3}", 0.0, "no_answer"),
])
def test_countdown_verifier(completion, value, reason):
    score = CountdownVerifier().score(completion, "60", numbers=[25, 5, 3, 7])
    assert (score.value, score.reason) == (value, reason)


def test_countdown_use_all_and_hostile_input():
    verifier = CountdownVerifier()
    assert verifier.score("\\boxed{(25-5)*3}", "60", numbers=[25, 5, 3], use_all=True).value == 1.0
    assert verifier.score("\\boxed{(25-5)*3}", "60", numbers=[25, 5, 3, 1], use_all=True).reason == "wrong"
    assert verifier.score("\\boxed{60}", None, numbers=None).reason == "bad_reference"
    start = time.perf_counter()
    for hostile in ["(" * 5000 + "1" + ")" * 5000, "1+" * 100_000 + "1", "\\boxed{" + "(" * 300 + "1" + ")" * 300 + "}"]:
        assert verifier.score(f"\\boxed{{{hostile}}}", "60", numbers=[1]).value == 0.0
    assert time.perf_counter() - start < 2.0


def test_safe_evaluator_is_exact_and_refuses_code():
    assert evaluate_expression("7/2*2") == (Fraction(7), {7: 1, 2: 2})
    for bad in ["x + 1", "abs(-3)", "2**3", "1 if 1 else 2", "[1][0]", "1.5", "True + 1", "'a'"]:
        with pytest.raises(ExprError):
            evaluate_expression(bad)


@pytest.mark.parametrize("difficulty", [1, 2, 3])
def test_generated_code_tests_agree_with_the_reference_solutions(difficulty):
    """Run each generated assert against the template's own reference implementation."""
    by_name = {t.name: t for t in TEMPLATES}
    source = CodeTasks(difficulty=difficulty)
    names = set()
    for i in range(12):
        task = source.get(i)
        template = by_name[task.fields["entry_point"]]
        assert template.tier == difficulty and task.reference is None
        assert 1 <= len(task.fields["test_list"]) <= 5 and task.fields["test_list"][0] in task.prompt
        for test in task.fields["test_list"]:
            exec(test, {template.name: template.reference})  # trusted: our own reference code
        names.add(template.name)
    assert len(names) >= 2


def test_generator_arguments_are_checked():
    with pytest.raises(ValueError, match="difficulty"):
        LinearEquationTasks(difficulty=11)
    with pytest.raises(ValueError, match="unknowns"):
        LinearEquationTasks(unknowns=4)
    with pytest.raises(ValueError, match="ops"):
        FractionTasks(ops="^")
    with pytest.raises(ValueError, match="difficulty"):
        CountdownTasks(difficulty=0)
    with pytest.raises(ValueError, match="digit count"):
        ArithmeticTasks(digits=2, difficulty=3)
    with pytest.raises(ValueError, match="tasks must be one of"):
        gym.make("rlvr/MathSelfCheck-v0", tasks="poetry")


@pytest.mark.parametrize("env_id,kwargs", [
    ("rlvr/Arithmetic-v0", {"digits": 6, "ops": "+-*/", "terms": 5}), ("rlvr/LinearEquation-v0", {"difficulty": 9}),
    ("rlvr/LinearSystem-v0", {"difficulty": 8}), ("rlvr/LinearSystem-v0", {"unknowns": 3, "difficulty": 10}),
    ("rlvr/Fractions-v0", {"difficulty": 10}),
])
def test_the_math_verifier_accepts_the_gold_answers_and_rejects_altered_ones(env_id, kwargs):
    envs = [gym.make(env_id, **kwargs) for _ in range(15)]
    for i, env in enumerate(envs):
        env.reset(options={"index": i})
    golds = [env.unwrapped.task.reference for env in envs]
    altered = [re.sub(r"\d", lambda m: str((int(m.group()) + 1) % 10), g, count=1) for g in golds]  # first digit + 1
    results = score_groups(envs, [[f"\\boxed{{{g}}}", f"\\boxed{{{a}}}"] for g, a in zip(golds, altered)])
    assert [row[0][1]["correct"] for row in results] == [True] * 15
    assert [row[1][1]["correct"] for row in results] == [False] * 15


def test_fractions_ask_for_lowest_terms_and_get_them():
    env = gym.make("rlvr/Fractions-v0", difficulty=5)
    env.reset(seed=2)
    gold = env.unwrapped.task.reference  # e.g. \\frac{7}{12}
    num, den = re.fullmatch(r"(-?)\\frac\{(\d+)\}\{(\d+)\}", gold).groups()[1:] if "frac" in gold else (gold, "1")
    unreduced = f"\\frac{{{2 * int(num)}}}{{{2 * int(den)}}}"
    shown = re.search(r"Compute \$(.+)\$\. Give", env.unwrapped.task.prompt).group(1)
    results = env.unwrapped.score_group([f"\\boxed{{{gold}}}", f"\\boxed{{{unreduced}}}", f"\\boxed{{{shown}}}"])
    assert [r for r, _ in results] == [1.0, 0.0, 0.0]
