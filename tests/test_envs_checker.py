"""gymnasium's env checker passes for every built-in env id, with its default arguments."""

from __future__ import annotations

from pathlib import Path

import gymnasium as gym
import pytest
from gymnasium.utils.env_checker import check_env

from rlvr.envs import BUILTINS
from rlvr.registry import list_envs

DATA = Path(__file__).resolve().parents[1].parent / "shared" / "datasets"
DATASET_ENVS = {"rlvr/GSM8K-v0", "rlvr/MATH500-v0", "rlvr/HumanEval-v0", "rlvr/MBPP-v0", "rlvr/CodeFeedback-v0"}


def test_every_builtin_is_listed():
    listed = list_envs()
    assert {env_id for env_id, _, _ in BUILTINS} <= set(listed)
    assert all(listed[env_id] for env_id, _, _ in BUILTINS)


@pytest.mark.docker
@pytest.mark.parametrize("env_id", [env_id for env_id, _, _ in BUILTINS])
def test_check_env(env_id):
    if env_id in DATASET_ENVS and not DATA.is_dir():
        pytest.skip("shared datasets not present")
    env = gym.make(env_id)
    check_env(env.unwrapped)
    env.close()
