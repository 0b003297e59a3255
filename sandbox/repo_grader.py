"""Grading a repository fix where the agent cannot reach: skeleton (#51), implemented next."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass
class RepoGrade:
    """`value` in [0, 1]; `reason`: passed | tests_failed | patch_failed | timeout | error;
    `tests`: node id -> passed | failed | missing | timeout; `dropped`: diff paths not applied."""

    value: float
    reason: str
    tests: dict[str, str] = field(default_factory=dict)
    dropped: list[str] = field(default_factory=list)
    info: dict[str, Any] = field(default_factory=dict)


def grade(image: str, repo_dir: str, setup_patch: str, agent_diff: str, fail_to_pass, pass_to_pass, *,
          source_paths=(), test_patch: str = "", mode: str = "all", timeout: float = 120.0) -> RepoGrade:
    """Apply setup_patch then the allowed part of agent_diff in a fresh container of `image`,
    add test_patch, run FAIL_TO_PASS + PASS_TO_PASS with trusted per-test verdicts."""
    raise NotImplementedError
