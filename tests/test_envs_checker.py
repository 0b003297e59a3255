"""gymnasium's env checker passes for every registered env id: the built-ins and the whole
reasoning-gym catalogue, with default arguments (datasets without a local copy read a
small fixture in their format, as the hub is out of reach here)."""

from __future__ import annotations

from pathlib import Path

import gymnasium as gym
import needs
import pytest
from gymnasium.utils.env_checker import check_env
from test_envs_loaders import APPS, CONTESTS, MATH_RECORDS, write_jsonl, write_parquet

from rlvr.envs import BUILTINS
from rlvr.registry import list_envs

DATA = Path(__file__).resolve().parents[1].parent / "shared" / "datasets"
DATASET_ENVS = {"rlvr/GSM8K-v0", "rlvr/MATH500-v0", "rlvr/HumanEval-v0", "rlvr/MBPP-v0", "rlvr/CodeFeedback-v0",
                "rlvr/CodeMix-v0"}
FIXTURES = {  # env id -> (records, writer) for the sets that are read from the hub
    "rlvr/MATH-v0": (MATH_RECORDS, write_parquet),
    "rlvr/DeepScaleR-v0": ([{"problem": "What is 6 * 7?", "answer": "42", "solution": ""}], write_jsonl),
    "rlvr/AIME2024-v0": ([{"id": 1, "problem": "What is 6 * 7?", "answer": 42}], write_jsonl),
    "rlvr/AIME2025-v0": ([{"id": 1, "problem": "What is 6 * 7?", "answer": "42"}], write_jsonl),
    "rlvr/CodeContests-v0": (CONTESTS, write_parquet),
    "rlvr/TACO-v0": (APPS[:2], write_parquet),
    "rlvr/APPS-v0": (APPS, write_jsonl),
}


def test_every_builtin_is_listed():
    listed = list_envs()
    assert {env_id for env_id, _, _ in BUILTINS} <= set(listed)
    assert all(listed[env_id] for env_id, _, _ in BUILTINS)


@pytest.mark.docker
@pytest.mark.parametrize("env_id", sorted(list_envs()))
def test_check_env(env_id, tmp_path):
    if env_id == "rlvr/OpenEnv-v0":
        pytest.skip("needs an OpenEnv server: tests/test_integrations_openenv.py checks it against rlvr serve-env")
    if env_id in DATASET_ENVS and not DATA.is_dir():
        needs.skip("shared datasets not present")
    # RepoFix over one package's tasks: the image the repo tests build anyway, whatever the catalogue grows to
    # (`rlvr repo check` runs check_env over every package's tasks)
    kwargs = {"packages": ["inflection"]} if env_id == "rlvr/RepoFix-v0" else {}
    if env_id in FIXTURES:
        records, writer = FIXTURES[env_id]
        kwargs["path"] = writer(tmp_path / ("data.parquet" if writer is write_parquet else "data.jsonl"), records)
    env = gym.make(env_id, **kwargs)
    check_env(env.unwrapped)
    env.close()
