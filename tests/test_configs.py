"""Every shipped run config loads, and each stage of its curriculum and its evaluation make a working env."""

from pathlib import Path

import pytest

from rlvr.trainer.config import TrainConfig, load_config
from rlvr.trainer.rollout.envs import make_envs

CONFIGS = sorted((Path(__file__).resolve().parents[1] / "configs").glob("*.yaml"))


@pytest.mark.parametrize("path", CONFIGS, ids=lambda p: p.name)
def test_config_stages_make_envs_that_reset(path):
    config = load_config(path)
    stages = {0, *(stage["until_step"] for stage in config.curriculum if "until_step" in stage)}
    targets = [(config.env, config.env_kwargs_at(step)) for step in sorted(stages)]
    targets.append(config.eval_target(10**9))
    for env_id, kw in targets:
        (env,) = make_envs(env_id, kw, 1)
        for index in range(2):  # a mixed scaffold (ToolMath `demos: [1, 0]`) differs by task index
            observation, _ = env.reset(options={"index": index})
            assert observation, (path.name, kw)
        env.close()


def test_tools_config_calls_with_python_blocks():
    from rlvr.envs.tool_calls import CodeBlockParser

    config = load_config(Path(__file__).resolve().parents[1] / "configs" / "tools-smollm2.yaml")
    (env,) = make_envs(config.env, config.env_kwargs_at(0), 1)
    assert isinstance(env.unwrapped.parser, CodeBlockParser) and "```python" in env.unwrapped.tool_prompt
    env.close()


def test_eval_env_replaces_the_training_env_and_its_kwargs_for_held_out_evaluation():
    mixed = TrainConfig(env="rlvr/CodeMix-v0", env_kwargs={"parts": {"codegen": {"difficulty": 2}}},
                        eval_env="rlvr/CodeGen-v0", eval_env_kwargs={"difficulty": 1})
    assert mixed.eval_target(0) == ("rlvr/CodeGen-v0", {"difficulty": 1})  # nothing of env_kwargs leaks in
    staged = TrainConfig(env="rlvr/Arithmetic-v0", env_kwargs={"digits": 2, "ops": "+"},
                         curriculum=[{"until_step": 5, "env_kwargs": {"digits": 1}}], eval_env_kwargs={"ops": "-"})
    assert staged.eval_target(0) == ("rlvr/Arithmetic-v0", {"digits": 1, "ops": "-"})
    assert staged.eval_target(5) == ("rlvr/Arithmetic-v0", {"digits": 2, "ops": "-"})
