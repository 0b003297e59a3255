"""rlvr: reinforcement learning with verifiable rewards.

Subpackages: `rlvr.verifiers` (reward functions), `rlvr.sandbox` (untrusted code in Docker),
`rlvr.envs` (Gymnasium tasks) and `rlvr.trainer` (GRPO). This top level holds only what spans
them: the registry, the CLI and shared types. Importing it stays cheap (no torch).
"""

from rlvr.registry import list_envs, list_verifiers, make_verifier, register_verifier

__version__ = "0.1.0"

__all__ = ["list_envs", "list_verifiers", "make_verifier", "register_env", "register_verifier"]


def __getattr__(name):
    if name == "register_env":  # needs gymnasium, so imported on first use
        from rlvr.envs.registration import register_env

        return register_env
    raise AttributeError(f"module 'rlvr' has no attribute {name!r}")
