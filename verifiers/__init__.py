"""Reward functions that any RL stack can reuse.

Importing this package never imports torch. `MathVerifier`, `CodeVerifier`,
`InstructionVerifier` and `JudgeVerifier` load on first use (the code verifier needs the
Docker SDK, the judge an OpenAI-compatible server).
"""

from rlvr.verifiers.core import (
    BAD_REFERENCE,
    ERROR,
    FORMAT,
    HEDGE,
    NO_ANSWER,
    OVERLONG,
    PARSE_ERROR,
    REASONS,
    REPETITION,
    TESTS_FAILED,
    TIMEOUT,
    WRONG,
    Composite,
    Score,
    Verifier,
    completion_text,
)
from rlvr.verifiers.format import (
    FinalBoxed,
    OverlongPenalty,
    RepetitionPenalty,
    SoftThinkFormat,
    TagCount,
    ThinkFormat,
)

__all__ = [
    "BAD_REFERENCE", "ERROR", "FORMAT", "HEDGE", "NO_ANSWER", "OVERLONG", "PARSE_ERROR", "REASONS",
    "REPETITION", "TESTS_FAILED", "TIMEOUT", "WRONG",
    "CodeVerifier", "Composite", "FinalBoxed", "InstructionVerifier", "JudgeVerifier", "MathVerifier", "OverlongPenalty", "RepetitionPenalty",
    "Score", "SoftThinkFormat", "TagCount", "ThinkFormat", "Verifier", "completion_text",
]

_LAZY = {"MathVerifier": "rlvr.verifiers.math", "CodeVerifier": "rlvr.verifiers.code",
         "InstructionVerifier": "rlvr.verifiers.instructions", "JudgeVerifier": "rlvr.verifiers.judge"}


def __getattr__(name):
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'rlvr.verifiers' has no attribute {name!r}")
