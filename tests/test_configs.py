"""Every shipped run config loads, and each stage of its curriculum and its evaluation make a working env."""

from pathlib import Path

import pytest

from rlvr.trainer.config import load_config
from rlvr.trainer.rollout.envs import make_envs

CONFIGS = sorted((Path(__file__).resolve().parents[1] / "configs").glob("*.yaml"))


@pytest.mark.parametrize("path", CONFIGS, ids=lambda p: p.name)
def test_config_stages_make_envs_that_reset(path):
    config = load_config(path)
    stages = {0, *(stage["until_step"] for stage in config.curriculum if "until_step" in stage)}
    kwargs = [config.env_kwargs_at(step) for step in sorted(stages)]
    kwargs.append({**config.env_kwargs_at(10**9), **config.eval_env_kwargs})
    for kw in kwargs:
        (env,) = make_envs(config.env, kw, 1)
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
