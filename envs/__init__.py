"""Gymnasium environments for math and code tasks.

Importing this package registers every built-in env id (`rlvr/Arithmetic-v0`, ...) and
every reasoning-gym dataset (`rg/<dataset>-v0`) with gymnasium and with `rlvr list`, by
entry-point string only: nothing heavy is imported until an env is made. `score_groups`
scores B prompts x G completions as one concurrent batch; `register_env` adds a task of
your own. A new built-in id is one line in BUILTINS (its entry point in `catalog.py`) and
its family in FAMILIES.
"""

from rlvr.envs import tasks_reasoning_gym
from rlvr.envs.base import TaskEnv
from rlvr.envs.curriculum import Curriculum, CurriculumWrapper
from rlvr.envs.group_scoring import score_groups
from rlvr.envs.multiturn import CodeFeedbackEnv, MathSelfCheckEnv, MultiTurnEnv
from rlvr.envs.registration import make, register_env
from rlvr.envs.spaces import AnyText, Messages
from rlvr.envs.tasks import Generator, ListTasks, RequireBoxed, Task, TaskSource
from rlvr.registry import register_verifier

__all__ = [
    "AnyText", "CodeFeedbackEnv", "Curriculum", "CurriculumWrapper", "Generator", "ListTasks", "MathSelfCheckEnv",
    "Messages", "MultiTurnEnv", "RequireBoxed", "Task", "TaskEnv", "TaskSource", "make", "register_env",
    "score_groups",
]

BUILTINS = [
    ("rlvr/Arithmetic-v0", "arithmetic", "integer arithmetic drills (digits, ops, terms)"),
    ("rlvr/LinearEquation-v0", "linear_equation", "linear equations in x, solved by sympy (difficulty 1-10)"),
    ("rlvr/LinearSystem-v0", "linear_system", "2x2 or 3x3 linear systems, solved by sympy (unknowns, difficulty)"),
    ("rlvr/Fractions-v0", "fractions", "fraction arithmetic in lowest terms (ops, difficulty 1-10)"),
    ("rlvr/Countdown-v0", "countdown", "reach a target with given numbers; safe expression check (difficulty 1-5)"),
    ("rlvr/CodeGen-v0", "codegen", "templated Python function tasks with generated unit tests (difficulty 1-3)"),
    ("rlvr/GSM8K-v0", "gsm8k", "GSM8K grade-school word problems (split train/test, path)"),
    ("rlvr/MATH500-v0", "math500", "MATH-500 competition problems (difficulty = level 1-5, subject, path)"),
    ("rlvr/HumanEval-v0", "humaneval", "HumanEval function completion, scored in the sandbox (path)"),
    ("rlvr/MBPP-v0", "mbpp", "MBPP Python problems, scored in the sandbox (split test/train/validation/prompt/full)"),
    ("rlvr/StdioCode-v0", "stdio_code", "packaged stdin/stdout programming problems, scored in the sandbox (difficulty 1-3)"),
    ("rlvr/CodeMix-v0", "code_mix", "a weighted mixture of code sources, one reward (parts={mbpp: {split: train}, codegen: {difficulty: 1, weight: 2}})"),
    ("rlvr/CodeFeedback-v0", "code_feedback", "multi-turn code: failing tests come back (tasks mbpp/humaneval/codegen/stdio, max_turns)"),
    ("rlvr/MathSelfCheck-v0", "math_self_check", "math with an optional self-check turn (tasks arithmetic/gsm8k/math500/...)"),
    ("rlvr/InstructionFollowing-v0", "instruction_following", "writing requests with 1-3 IFEval-style instructions (difficulty, mode strict/loose, partial)"),
    ("rlvr/MATH-v0", "math_full", "MATH competition problems: 7,500 train / 5,000 test (split, difficulty = level 1-5, subject)"),
    ("rlvr/DeepScaleR-v0", "deepscaler", "DeepScaleR's ~40k-problem RL set (AIME, AMC, Omni-MATH, STILL), boxed answers"),
    ("rlvr/AIME2024-v0", "aime2024", "AIME 2024 I and II, 30 problems: evaluation (integer answers)"),
    ("rlvr/AIME2025-v0", "aime2025", "AIME 2025 I and II, 30 problems: evaluation (integer answers)"),
    ("rlvr/CodeContests-v0", "code_contests", "CodeContests stdin/stdout problems, sandbox-scored (split, difficulty 1-5, language)"),
    ("rlvr/TACO-v0", "taco", "TACO stdin/stdout problems, sandbox-scored (split, difficulty 1-5, language)"),
    ("rlvr/APPS-v0", "apps", "APPS stdin/stdout problems, sandbox-scored (split, difficulty 1-3, language)"),
]
# `rlvr list --family`: what kind of task each built-in id is (an id missing here is "other").
FAMILIES = {
    "rlvr/Arithmetic-v0": "arithmetic", "rlvr/Fractions-v0": "arithmetic", "rlvr/LinearEquation-v0": "algebra",
    "rlvr/LinearSystem-v0": "algebra", "rlvr/Countdown-v0": "games", "rlvr/GSM8K-v0": "math",
    "rlvr/MATH500-v0": "math", "rlvr/MATH-v0": "math", "rlvr/DeepScaleR-v0": "math", "rlvr/AIME2024-v0": "math",
    "rlvr/AIME2025-v0": "math", "rlvr/MathSelfCheck-v0": "math", "rlvr/ToolMath-v0": "math",
    "rlvr/CodeGen-v0": "code", "rlvr/HumanEval-v0": "code", "rlvr/MBPP-v0": "code", "rlvr/StdioCode-v0": "code",
    "rlvr/CodeFeedback-v0": "code", "rlvr/CodeMix-v0": "code", "rlvr/CodeContests-v0": "code", "rlvr/TACO-v0": "code", "rlvr/APPS-v0": "code",
    "rlvr/InstructionFollowing-v0": "instructions",
}

register_verifier("countdown", "rlvr.envs.tasks_countdown:CountdownVerifier",
                  "countdown: the boxed expression reaches the target with the given numbers (safe ast check)")
register_verifier("reasoning_gym", "rlvr.envs.tasks_reasoning_gym:ReasoningGymVerifier",
                  "reasoning-gym's own score_answer on the final \\boxed{} answer (hedges score 0)")
for _env_id, _attr, _description in BUILTINS:
    register_env(_env_id, entry_point=f"rlvr.envs.catalog:{_attr}", description=_description, replace=True,
                 family=FAMILIES.get(_env_id, "other"))
tasks_reasoning_gym.register_all(register_env)
register_env("rlvr/ToolMath-v0", entry_point="rlvr.envs.tool_math:math_tools", replace=True, family="math",
             description="math with a sandboxed python tool, multi-turn (tasks arithmetic/gsm8k/math500/...)")
register_env("rlvr/RepoFix-v0", entry_point="rlvr.envs.repo_env:repo_fix", replace=True, family="code",
             description="fix a bug in a real package with bash/view/edit/test tools in a container, graded apart "
                         "(tasks catalogue/path/SWE-bench records, packages, mode all/fraction, hide_tests)")
register_env("rlvr/OpenEnv-v0", entry_point="rlvr.integrations.openenv_client:OpenEnvClientEnv", replace=True,
             family="remote", description="any OpenEnv server as an env (url=, action_field=, prompt_fields=)")
register_env("rlvr/Verifiers-v0", entry_point="rlvr.integrations.verifiers_gym:make_env", replace=True,
             family="interop", kwargs={"taskset": "rlvr-env", "limit": 100},
             description="a verifiers (0.4) taskset as an env, scored by its own rewards (taskset=, limit=, options=)")
