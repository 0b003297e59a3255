"""The `rlvr/Verifiers-v0` entry point: a verifiers taskset as an rlvr env, single-turn
(`verifiers_env.VerifiersTasks` in a `TaskEnv`) or with tools (`verifiers_tools.VerifiersToolEnv`)."""

from __future__ import annotations

from typing import Any

from rlvr.envs.base import TaskEnv
from rlvr.integrations.verifiers_env import VerifiersTasks
from rlvr.integrations.verifiers_tools import VerifiersToolEnv


def make_env(taskset: str, limit: int | None = None, options: dict[str, Any] | None = None,
             best: float = 1.0, **env_options: Any):
    """The `rlvr/Verifiers-v0` entry point: a single-turn rlvr env over a verifiers taskset, or a tool env
    (`rlvr.integrations.verifiers_tools`) when it or its tasks declare toolsets."""
    source = VerifiersTasks(taskset, limit, options, best)
    if source.shared_toolsets or any(type(t).toolsets(t.config) for t in source.tasks):
        return VerifiersToolEnv(source, **env_options)
    return TaskEnv(source, **env_options)
