"""Entry points of the built-in envs (what `gymnasium.make("rlvr/...")` calls)."""

from __future__ import annotations

from typing import Any

from rlvr.envs.base import env_factory
from rlvr.envs.datasets import (
    AIMETasks,
    DeepScaleRTasks,
    GSM8KTasks,
    HumanEvalTasks,
    MathTasks,
    MathTrainTasks,
    MBPPTasks,
)
from rlvr.envs.mixture import MixedTasks
from rlvr.envs.multiturn import CodeFeedbackEnv, MathSelfCheckEnv
from rlvr.envs.tasks import TaskSource
from rlvr.envs.tasks_algebra import LinearEquationTasks
from rlvr.envs.tasks_arithmetic import ArithmeticTasks
from rlvr.envs.tasks_code import CodeTasks
from rlvr.envs.tasks_contests import APPSTasks, CodeContestsTasks, TACOTasks
from rlvr.envs.tasks_countdown import CountdownTasks
from rlvr.envs.tasks_fractions import FractionTasks
from rlvr.envs.tasks_instructions import InstructionTasks
from rlvr.envs.tasks_reasoning_gym import ReasoningGymTasks
from rlvr.envs.tasks_stdio import StdioTasks

CODE_SOURCES = {"mbpp": MBPPTasks, "humaneval": HumanEvalTasks, "codegen": CodeTasks, "stdio": StdioTasks}
MATH_SOURCES = {"arithmetic": ArithmeticTasks, "gsm8k": GSM8KTasks, "math500": MathTasks,
                "linear": LinearEquationTasks, "fractions": FractionTasks}


def _linear_system(unknowns: int = 2, **kwargs: Any) -> LinearEquationTasks:
    return LinearEquationTasks(unknowns=unknowns, **kwargs)


def _aime(year: int) -> Any:
    def source(**kwargs: Any) -> AIMETasks:
        return AIMETasks(year=year, **kwargs)

    source.__name__ = f"aime{year}"
    return source


def _pick(table: dict[str, type[TaskSource]]):
    def source(tasks: str = next(iter(table)), **kwargs: Any) -> TaskSource:
        if tasks not in table:
            raise ValueError(f"tasks must be one of {', '.join(table)}; got {tasks!r}")
        return table[tasks](**kwargs)

    return source


def _mixture(table: dict[str, type[TaskSource]]):
    def source(parts: dict[str, dict[str, Any]] | None = None) -> MixedTasks:
        """`parts`: {source name: its kwargs, with an optional `weight` (default 1)}; by default MBPP's
        train split and CodeGen at difficulty 1, alike."""
        if parts is None:
            parts = {"mbpp": {"split": "train"}, "codegen": {"difficulty": 1}}
        if not isinstance(parts, dict) or not parts:
            raise ValueError(f"parts must map source names ({', '.join(table)}) to their kwargs; got {parts!r}")
        unknown = sorted(set(parts) - set(table))
        if unknown:
            raise ValueError(f"unknown part(s) {', '.join(unknown)}; known: {', '.join(table)}")
        built = []
        for name, kwargs in parts.items():
            kwargs = dict(kwargs or {})
            weight = kwargs.pop("weight", 1.0)
            built.append((table[name](**kwargs), weight))
        return MixedTasks(built)

    return source


arithmetic = env_factory(ArithmeticTasks)
linear_equation = env_factory(LinearEquationTasks)
linear_system = env_factory(_linear_system)
fractions = env_factory(FractionTasks)
countdown = env_factory(CountdownTasks)
codegen = env_factory(CodeTasks)
gsm8k = env_factory(GSM8KTasks)
math500 = env_factory(MathTasks)
humaneval = env_factory(HumanEvalTasks)
mbpp = env_factory(MBPPTasks)
stdio_code = env_factory(StdioTasks)
instruction_following = env_factory(InstructionTasks)
math_full = env_factory(MathTrainTasks)
deepscaler = env_factory(DeepScaleRTasks)
aime2024 = env_factory(_aime(2024))
aime2025 = env_factory(_aime(2025))
code_contests = env_factory(CodeContestsTasks)
taco = env_factory(TACOTasks)
apps = env_factory(APPSTasks)
reasoning_gym = env_factory(ReasoningGymTasks)  # rg/<dataset>-v0, with kwargs {"dataset": ...}
code_mix = env_factory(_mixture(CODE_SOURCES))
code_feedback = env_factory(_pick(CODE_SOURCES), CodeFeedbackEnv, ("max_turns",))
math_self_check = env_factory(_pick(MATH_SOURCES), MathSelfCheckEnv, ("self_check",))
