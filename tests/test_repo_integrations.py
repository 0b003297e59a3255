"""rlvr/RepoFix-v0 through the public ways in: `rlvr train`, `rlvr eval --endpoint` (SmolLM2 behind the real
llama.cpp server, whole episodes, none an `error`), TRL's `environment_factory` (a real GRPOTrainer step) and
OpenEnv (`rlvr serve-env` played by rlvr/OpenEnv-v0). Real task images, a real Docker engine, real models."""

from __future__ import annotations

import asyncio
import json
import math
import subprocess
import sys

import gymnasium as gym
import needs
import pytest
from llama_server import Relay
from test_repo_env import PACKAGE, tasks  # noqa: F401  (the module fixture: catalogue tasks, images built)

import rlvr.envs  # noqa: F401
from rlvr.cli import main as rlvr_main
from rlvr.envs.tool_calls import HermesParser
from rlvr.trainer.metrics import read_jsonl

pytestmark = pytest.mark.docker
OPTIONS = {"max_turns": 3, "output_limit": 1500}


@pytest.fixture(scope="module")
def small(tasks, tmp_path_factory):  # noqa: F811
    """Env options with two catalogue tasks in a JSONL file (read the same way by subprocesses and servers)."""
    from rlvr.envs.repo_task import save_tasks

    path = tmp_path_factory.mktemp("repo") / f"{PACKAGE}.jsonl"
    save_tasks(tasks[:2], path)
    return {"tasks": str(path), **OPTIONS}


def gold_command(task) -> str:
    patch = task.gold_patch.replace("'", "'\"'\"'")
    return f"printf '%s' '{patch}' > /tmp/fix.diff && git apply /tmp/fix.diff && echo ok"


def test_rlvr_eval_endpoint_smollm2_plays_whole_episodes_without_error(small, llama_server, tmp_path, capsys):
    """The tools go to the server as OpenAI tools; every episode ends (answer or a budget), none in `error`."""
    samples = tmp_path / "samples.jsonl"
    relay = Relay(llama_server.port)
    try:
        code = rlvr_main(["eval", "--env", "rlvr/RepoFix-v0", "--endpoint", relay.url, "--model", llama_server.model,
                          "--limit", "2", "--max-new-tokens", "48", "--concurrency", "1", "--output", str(samples),
                          "--json", "--no-progress", *[f"--env-arg={k}={json.dumps(v)}" for k, v in small.items()]])
    finally:
        relay.close()
    assert code == 0, capsys.readouterr().err
    rows = [json.loads(line) for line in samples.read_text().splitlines()]
    assert len(rows) == 2 and all(row["reason"] != "error" for row in rows), rows
    schemas = gym.make("rlvr/RepoFix-v0", **small).unwrapped.tool_schemas
    episodes = [r for r in relay.requests if r.get("messages") and len(r["messages"]) > 1]
    assert episodes and all(r["tools"] == schemas for r in episodes)
    print("SmolLM2 RepoFix episodes:", [(r["reward"], r.get("ended_by"), r.get("tool_calls")) for r in rows])


def test_rlvr_train_runs_repofix_episodes(small, tmp_path):
    """`rlvr train` with a tiny config: multi-turn RepoFix episodes of SmolLM2, one GRPO step."""
    config = tmp_path / "repofix.yaml"
    config.write_text(json.dumps({
        "model": "smollm2", "env": "rlvr/RepoFix-v0", "env_kwargs": small, "steps": 1, "prompts_per_step": 1,
        "group_size": 2, "max_new_tokens": 24, "max_episode_tokens": 96, "skip_zero_variance": False,
        "eval_prompts": 0, "threads": 1, "lr": 1e-6, "progress": False}))
    run = subprocess.run([sys.executable, "-m", "rlvr", "train", "--config", str(config), "--run-dir",
                          str(tmp_path / "run")], capture_output=True, text=True, timeout=1500)
    assert run.returncode == 0, run.stderr[-3000:]
    (row,) = read_jsonl(tmp_path / "run" / "metrics.jsonl")
    assert row["step"] == 1 and math.isfinite(row["reward_mean"]), row
    assert row["errors"] == 0, row


def test_trl_environment_factory_plays_and_scores_a_repofix_episode(small):
    from transformers.utils import get_json_schema

    from rlvr.integrations.trl_environment import environment_dataset, environment_factory

    factory = environment_factory("rlvr/RepoFix-v0", **small)
    data = environment_dataset("rlvr/RepoFix-v0", 2, seed=0, **small)
    envs = [factory(), factory()]
    for env in envs:
        assert {"bash", "view_file", "edit_file", "run_tests", "submit"} <= set(dir(env))
        assert get_json_schema(env.edit_file)["function"]["parameters"]["required"] == ["path", "old", "new"]
    texts = [env.reset(**{k: data[k][i] for k in data.column_names}) for i, env in enumerate(envs)]
    assert all(text.startswith("Repository: ") for text in texts)
    task = envs[0].env.unwrapped.repo_task
    assert envs[0].bash(command=gold_command(task)).startswith("ok")
    assert envs[0].view_file(path=task.mutation.file, start=1, end=2).lstrip().startswith("1")
    assert envs[0].submit() == "Submitted."
    assert envs[0].bash(command="ls").startswith("Error: no more tool calls, the episode has ended (answer)")
    envs[1].edit_file(path="nope.py", old="a", new="b")
    out = factory.answers(completions=[[{"role": "assistant", "content": "done"}]] * 2, environments=envs)
    assert out == [0.0, 0.0]
    assert [env.get_reward() for env in envs] == [1.0, 0.0]


def test_a_real_trl_grpo_step_on_repofix(small, tmp_path, monkeypatch):
    trl = needs.module("trl")
    import torch
    from test_integrations_trl_environment import _smollm2_with_tool_template

    from rlvr.integrations.trl_environment import environment_dataset, environment_factory

    monkeypatch.setenv("TRL_EXPERIMENTAL_SILENCE", "1")
    torch.manual_seed(0)
    model, tokenizer = _smollm2_with_tool_template()
    factory = environment_factory("rlvr/RepoFix-v0", **small)
    data = environment_dataset("rlvr/RepoFix-v0", 2, seed=0, **small)
    config = trl.GRPOConfig(
        output_dir=str(tmp_path), use_cpu=True, bf16=False, fp16=False, report_to="none", save_strategy="no",
        logging_steps=1, disable_tqdm=True, dataloader_num_workers=0, max_steps=1, per_device_train_batch_size=2,
        num_generations=2, max_completion_length=16, learning_rate=1e-6, beta=0.0, seed=0, shuffle_dataset=False)
    trainer = trl.GRPOTrainer(model=model, processing_class=tokenizer, args=config, train_dataset=data,
                              environment_factory=factory, reward_funcs=[factory.answers])
    assert sorted(t.__name__ for t in trainer.tools) == ["bash", "edit_file", "run_tests", "submit", "view_file"]
    trainer.train()
    log = next(h for h in trainer.state.log_history if "reward" in h)
    assert math.isfinite(log["loss"]) and trainer.state.global_step == 1
    assert len(trainer._logs["rewards"]["RepoFix-v0"]) == 2
    assert all(r is not None and r == r for r in trainer._logs["rewards"]["RepoFix-v0"])  # graded, no error


def test_openenv_serve_env_plays_the_gold_patch_through_rlvr_openenv_client(small):
    needs.module("openenv.core", reason="needs the 'interop' extra (openenv-core)")
    from test_integrations_openenv import _stop, serve_env

    proc, url = serve_env("rlvr/RepoFix-v0", **small)
    try:
        local = gym.make("rlvr/RepoFix-v0", **small)
        prompt, _ = local.reset(seed=3)
        task = local.unwrapped.repo_task
        env = gym.make("rlvr/OpenEnv-v0", url=url)
        messages, info = env.reset(seed=3)
        assert messages == prompt and env.unwrapped.tool_schemas == local.unwrapped.tool_schemas
        messages, reward, terminated, truncated, info = env.step(HermesParser.format_call(
            "bash", {"command": gold_command(task)}))
        assert messages[-1]["role"] == "tool" and messages[-1]["content"].startswith("ok")
        messages, reward, terminated, truncated, info = env.step(HermesParser.format_call("submit", {}))
        assert (reward, terminated, info["correct"], info["ended_by"]) == (1.0, True, True, "answer"), info
        env.close()
        local.close()
    finally:
        _stop(proc)


def test_verifiers_toolset_plays_repofix_and_its_submit_score_is_the_reward(small):
    """The verifiers export: the tools over the MCP toolset (its own env and workspace, in verifiers' tool
    server process); `submit` puts the env's score in the rollout state, which the task's reward reads."""
    vf = needs.module("verifiers.v1")
    from mcp.server.mcpserver import MCPServer
    from test_integrations_verifiers import _taskset
    from verifiers.v1.mcp.server import _call_state

    from rlvr.integrations.verifiers_env import RlvrState

    vf_tasks = _taskset("rlvr/RepoFix-v0", small, 2)
    toolsets = [type(task).toolsets(task.config)[0] for task in vf_tasks]
    mcp = MCPServer("rlvr")
    toolsets[0].register(mcp)
    states = [RlvrState(), RlvrState()]

    async def play(toolset, task, state, calls):
        await toolset.setup_task(task.data)
        token = _call_state.set(state)  # the state verifiers' channel hands each call of this rollout
        try:
            return [await asyncio.to_thread(toolset.call, name, arguments) for name, arguments in calls]
        finally:
            _call_state.reset(token)

    assert sorted(t.name for t in asyncio.run(mcp.list_tools())) == ["bash", "edit_file", "run_tests", "submit",
                                                                    "view_file"]
    local = gym.make("rlvr/RepoFix-v0", **small)
    local.reset(seed=vf_tasks[0].data.seed)
    gold = gold_command(local.unwrapped.repo_task)
    replies = asyncio.run(play(toolsets[0], vf_tasks[0], states[0], [("bash", {"command": gold}), ("submit", {})]))
    assert replies[0].startswith("ok") and replies[1] == "Submitted."
    assert states[0].rlvr_score["score"] == 1.0
    asyncio.run(play(toolsets[1], vf_tasks[1], states[1], [("view_file", {"path": "setup.py", "end": 3})]))
    assert states[1].rlvr_score is None  # the episode goes on: no score yet
    traces = [vf.Trace(task=vf.TraceTask(type="RlvrTask", data=t.data), agent=vf.AgentInfo(config=vf.AgentConfig()),
                       root_reply="done", state=s) for t, s in zip(vf_tasks, states)]
    for task, trace in zip(vf_tasks, traces):
        asyncio.run(task.score(trace))
    assert [t.rewards["rlvr"].score for t in traces] == [1.0, 0.0]
    assert traces[1].metrics.get("reason/tests_failed") == 1.0  # no submit: the last reply, which is no fix
