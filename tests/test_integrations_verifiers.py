"""verifiers (0.4) and rlvr envs, both ways: rlvr envs in vf-eval, verifiers tasksets in rlvr eval and the trainer."""

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path

import gymnasium
import needs
import pytest
from conftest import require_docker
from gymnasium.utils.env_checker import check_env
from llama_server import Relay

import rlvr.envs  # noqa: F401  (registers rlvr/Verifiers-v0)
from rlvr.envs import register_env
from rlvr.verifiers.core import ERROR, Score, Verifier

vf = needs.module("verifiers.v1")
from rlvr.integrations.verifiers_env import RlvrToolset, RlvrToolsetConfig  # noqa: E402

ARITH = {"digits": 1, "ops": "+", "require_boxed": False}
VF_EVAL = Path(sys.executable).with_name("vf-eval")


class SandboxDown(Verifier):
    """A verifier whose infrastructure is down: every score is `error`, as the code verifier's is without Docker."""

    def score(self, completion, reference=None, **fields):
        return Score(0.0, ERROR, info={"why": "the sandbox is down"})


register_env("rlvr-test/Unscorable-v0", tasks=[{"prompt": "What is 2 + 2?", "answer": "4"}], verifier=SandboxDown(),
             replace=True)


def _taskset(env_id, env_kwargs, num_tasks, seed=0):
    """The rlvr env as verifiers loads it: taskset id `rlvr-env`, found by verifiers' own loader."""
    from verifiers.v1.utils.loaders import taskset_config_type

    config = taskset_config_type("rlvr-env").model_validate(
        {"id": "rlvr-env", "env_id": env_id, "env_kwargs": env_kwargs, "num_tasks": num_tasks, "seed": seed})
    return list(vf.load_taskset(config))


def _scored(task, reply):
    trace = vf.Trace(task=vf.TraceTask(type="RlvrTask", data=task.data), agent=vf.AgentInfo(config=vf.AgentConfig()),
                     root_reply=reply)
    asyncio.run(task.score(trace))
    return trace


def test_rlvr_env_as_a_verifiers_taskset_keeps_prompts_and_rewards():
    tasks = _taskset("rlvr/Arithmetic-v0", ARITH, 3, seed=10)
    env = gymnasium.make("rlvr/Arithmetic-v0", **ARITH)
    for i, task in enumerate(tasks):
        messages, info = env.reset(seed=10 + i)
        assert task.data.system_prompt == messages[0]["content"]
        assert [m.content for m in task.data.prompt] == [messages[-1]["content"]]
        gold = env.unwrapped.task.reference
        for reply in (f"So it is \\boxed{{{gold}}}.", f"\\boxed{{{int(gold) + 1}}}", "no idea"):
            trace = _scored(task, reply)
            _, reward, _, _, step_info = env.step(reply)
            env.reset(seed=10 + i)
            assert trace.rewards["rlvr"].score == reward  # the env's own composite
            expected = dict(step_info["score"]["components"])
            if step_info["score"]["reason"]:
                expected[f"reason/{step_info['score']['reason']}"] = 1.0
            assert trace.metrics == expected
    assert trace.metrics == {"correct": 0.0, "reason/no_answer": 1.0}


def test_an_rlvr_error_is_an_errored_rollout_not_a_zero():
    (task,) = _taskset("rlvr-test/Unscorable-v0", {}, 1)
    with pytest.raises(vf.TaskError, match="infrastructure error"):
        _scored(task, "\\boxed{4}")


def test_tool_env_tools_are_served_over_mcp_through_the_env():
    from mcp.server.mcpserver import MCPServer

    kwargs = {"tasks": "arithmetic", "digits": 1, "max_tool_calls": 2}
    (task,) = _taskset("rlvr/ToolMath-v0", kwargs, 1)
    (toolset,) = type(task).toolsets(task.config)
    assert isinstance(toolset, RlvrToolset) and toolset.config == RlvrToolsetConfig(env_id="rlvr/ToolMath-v0",
                                                                                     env_kwargs=kwargs)
    require_docker(toolset.env.unwrapped.tools["python"][0].pool)
    mcp = MCPServer("rlvr")
    toolset.register(mcp)

    async def play():
        await toolset.setup_task(task.data)
        (tool,) = await mcp.list_tools()
        replies = [await mcp.call_tool("python", {"code": code}) for code in ("x = 6 * 7\nprint(x)", "x + 1", "1")]
        return tool, [r.content[0].text for r in replies]

    tool, replies = asyncio.run(play())
    schema = toolset.env.unwrapped.tool_schemas[0]["function"]
    assert tool.name == "python" and tool.description == schema["description"]
    assert tool.input_schema["required"] == ["code"] and tool.input_schema["properties"]["code"]["type"] == "string"
    assert replies[:2] == ["42", "43"]  # one notebook per rollout, as in rlvr
    assert replies[2] == "Error: no more tool calls, the episode has ended (max_tool_calls)."


def _vf_eval(llama_server, tmp_path, env_id, env_kwargs, num_tasks):
    env = {**os.environ, "OPENAI_API_KEY": "none", "PATH": f"{VF_EVAL.parent}{os.pathsep}{os.environ['PATH']}"}
    command = [str(VF_EVAL), "rlvr-env", "--env.taskset.env-id", env_id, "--env.taskset.env-kwargs",
               json.dumps(env_kwargs), "--env.taskset.num-tasks", str(num_tasks), "--env.agent.harness.id", "null",
               "--env.agent.runtime.type", "subprocess", "--model", llama_server.model, "--client.base-url",
               f"{llama_server.url}/v1", "--client.api-key-var", "OPENAI_API_KEY", "--max-concurrent", "1",
               "--no-rich", "--no-push", "--output-dir", str(tmp_path / "out")]
    run = subprocess.run(command, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=900)
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-2000:]
    (traces,) = (tmp_path / "out").glob("*/traces.jsonl")
    return [trace for line in traces.read_text().splitlines() for trace in json.loads(line)["traces"]]


def test_vf_eval_runs_an_rlvr_env_against_the_llama_server(llama_server, tmp_path):
    traces = _vf_eval(llama_server, tmp_path, "rlvr/Arithmetic-v0", ARITH, 3)
    assert len(traces) == 3
    scored = [t for t in traces if not t["errors"]]
    assert scored, [t["errors"] for t in traces]
    env = gymnasium.make("rlvr/Arithmetic-v0", **ARITH)
    for trace in scored:
        reply = [n["message"] for n in trace["nodes"] if n["message"]["role"] == "assistant"][-1]["content"]
        env.reset(seed=trace["task"]["data"]["seed"])
        _, reward, _, _, info = env.step(reply)
        assert trace["rewards"] == {"rlvr": {"score": reward, "weight": 1.0}}
        assert trace["metrics"]["correct"] == info["score"]["components"]["correct"]
    print("vf-eval rewards:", [t["rewards"] for t in traces])


def test_vf_eval_serves_a_tool_envs_tools(llama_server, tmp_path):
    require_docker(lambda: gymnasium.make("rlvr/ToolMath-v0").unwrapped.tools["python"][0].pool())
    (trace,) = _vf_eval(llama_server, tmp_path, "rlvr/ToolMath-v0", {"tasks": "arithmetic", "digits": 1}, 1)
    assert not trace["errors"], trace["errors"]
    (root,) = [n for n in trace["nodes"] if n.get("tools")]
    assert [t["name"] for t in root["tools"]] == ["python"]  # the model was offered the env's tool
    assert "rlvr" in trace["rewards"]


# --- in: a verifiers taskset as an rlvr env ------------------------------------------------------

def test_a_verifiers_taskset_is_an_rlvr_env_scored_by_its_own_rewards():
    env = gymnasium.make("rlvr/Verifiers-v0", taskset="vf_sums", limit=4)
    check_env(env.unwrapped)
    tasks = env.unwrapped.source.tasks
    for seed in range(4):
        messages, info = env.reset(seed=seed)
        data = tasks[info["index"]].data
        assert messages == [{"role": "user", "content": data.prompt}]
        for reply in (f"It is \\boxed{{{data.answer}}}", f"\\boxed{{{int(data.answer) + 1}}}", "twelve"):
            env.reset(seed=seed)
            _, reward, done, _, info = env.step(reply)
            assert done and reward == vf.verify_boxed_math_answer(reply, data.answer)  # verifiers' own check
            assert info["score"]["info"]["correct"]["metrics"] == {"reply_chars": float(len(reply))}
    assert info["score"]["reason"] == "wrong"
    with pytest.raises(ValueError, match="has no tasks"):
        gymnasium.make("rlvr/Verifiers-v0", taskset="vf_sums", limit=None, options={"num_tasks": 0})


def test_rlvr_eval_runs_a_verifiers_env(llama_server, tmp_path, capsys):
    from rlvr.cli import main

    samples = tmp_path / "samples.jsonl"
    code = main(["eval", "--env", "rlvr/Verifiers-v0", "--env-arg", 'taskset="vf_sums"', "--env-arg", "limit=3",
                 "--endpoint", llama_server.url, "--model", llama_server.model, "--max-new-tokens", "24",
                 "--output", str(samples), "--json", "--no-progress"])
    assert code == 0
    result = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    rows = [json.loads(line) for line in samples.read_text().splitlines()]
    assert len(rows) == 3 and result["items"] == 3
    tasks = gymnasium.make("rlvr/Verifiers-v0", taskset="vf_sums", limit=3).unwrapped.source.tasks
    answers = {f"vf_sums/{t.data.id}": t.data.answer for t in tasks}
    for row in rows:
        assert row["reward"] == vf.verify_boxed_math_answer(row["completion"], answers[row["task_id"]])
        assert row["reason"] != "error"
    # A policy that knows the sums: one right and one wrong completion per task, each scored by its own task.
    code = main(["eval", "--env", "rlvr/Verifiers-v0", "--env-arg", 'taskset="vf_sums"', "--env-arg", "limit=3",
                 "--policy", "vf_sums:adder", "-n", "2", "--output", str(samples), "--json", "--no-progress"])
    assert code == 0
    result = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    rows = [json.loads(line) for line in samples.read_text().splitlines()]
    assert sorted(row["reward"] for row in rows) == [0.0] * 3 + [1.0] * 3
    assert all(row["reward"] == (row["completion"] == f"It is \\boxed{{{answers[row['task_id']]}}}.") for row in rows)
    assert result["pass_at"]["pass@1"] == 0.5


def _train(tmp_path, env_kwargs, steps=2):
    from rlvr.trainer.config import TrainConfig
    from rlvr.trainer.grpo import GRPOTrainer

    config = TrainConfig(model="smollm2", env="rlvr/Verifiers-v0", env_kwargs=env_kwargs, steps=steps,
                         prompts_per_step=2, group_size=2, max_new_tokens=12, threads=1, progress=False)
    return GRPOTrainer(config, tmp_path).train()


def test_trainer_steps_on_a_verifiers_env(tmp_path):
    metrics = _train(tmp_path, {"taskset": "vf_sums", "limit": 8})
    assert [m["step"] for m in metrics] == [1, 2] and all(m["errors"] == 0 for m in metrics)


def test_a_judge_outage_gives_error_episodes_the_trainer_leaves_out(llama_server, tmp_path):
    relay = Relay(llama_server.port)
    env = gymnasium.make("rlvr/Verifiers-v0", taskset="vf_sums", limit=4,
                         options={"task": {"judge_url": relay.url}})
    try:
        env.reset(seed=0)
        _, _, _, _, info = env.step("\\boxed{8}")
        assert info["score"]["reason"] != ERROR and len(relay.requests) == 1  # the judge was asked
    finally:
        relay.close()  # the judge goes down mid-run
    env.reset(seed=0)
    _, reward, done, _, info = env.step("\\boxed{8}")
    assert done and info["score"]["reason"] == ERROR and "ConnectError" in info["score"]["info"]["correct"]["error"]
    metrics = _train(tmp_path, {"taskset": "vf_sums", "limit": 4, "options": {"task": {"judge_url": relay.url}}},
                     steps=1)
    assert metrics[0]["errors"] == 4  # every episode left out, none trained on as a 0


# --- in: a verifiers taskset with tools as an rlvr tool env ---------------------------------------

VAULT_SERVER = "vf_vault.servers.tool"  # the toolset's module: its server runs as `python -m` it


@pytest.fixture
def vault(monkeypatch, runtimes):
    """The vault taskset importable by the tool server processes verifiers starts (they inherit the environment)."""
    tests = str(Path(__file__).parent)
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [tests, os.environ.get("PYTHONPATH")])))
    yield
    assert _vault_servers() == [] and runtimes() == set()  # nothing left running, every runtime torn down
    assert runtimes.folder.exists()  # the envs made their runtimes there (else the check above saw nothing)


def _vault_servers():
    import psutil

    return [p for p in psutil.Process().children(recursive=True) if VAULT_SERVER in " ".join(_cmdline(p))]


def _cmdline(process):
    import psutil

    try:
        return process.cmdline()
    except psutil.Error:  # it ended meanwhile
        return []


def _open_locker(number):
    return f'<tool_call>{json.dumps({"name": "vault_open_locker", "arguments": {"number": number}})}</tool_call>'


def test_a_verifiers_tool_taskset_plays_its_tools_and_is_scored_on_the_whole_trace(vault):
    from vf_vault.servers.tool import VaultToolset

    from rlvr.integrations.verifiers_tools import VerifiersToolEnv

    env = gymnasium.make("rlvr/Verifiers-v0", taskset="vf_vault", limit=2)
    assert isinstance(env.unwrapped, VerifiersToolEnv) and _vault_servers() == []
    data = env.unwrapped.source.tasks[1].data
    wrong = str(int(data.code) + 1)
    cases = [  # the model's turns -> the taskset's own total (0.75 correct + 0.25 looked_up)
        ([_open_locker(data.locker), f"The code is \\boxed{{{data.code}}}."], 1.0, {"correct": 1.0, "looked_up": 1.0}),
        ([_open_locker(data.locker + 1), f"\\boxed{{{wrong}}}"], 0.0, {"correct": 0.0, "looked_up": 0.0}),
        ([f"\\boxed{{{data.code}}}"], 0.75, {"correct": 1.0, "looked_up": 0.0}),  # never saw it: the trace says so
        ([_open_locker(data.locker), f"\\boxed{{{wrong}}}"], 0.25, {"correct": 0.0, "looked_up": 1.0}),
    ]
    for turns, total, rewards in cases:
        messages, info = env.reset(options={"index": 1})
        assert messages == [{"role": "user", "content": data.prompt}]
        (schema,) = info["tools"]  # as verifiers advertises it: prefixed name, docstring, MCP input schema
        assert schema["function"]["name"] == "vault_open_locker"
        assert schema["function"]["description"] == VaultToolset.open_locker.__doc__
        assert schema["function"]["parameters"]["properties"]["number"]["type"] == "integer"
        assert schema["function"]["parameters"]["required"] == ["number"]
        assert len(_vault_servers()) == 1  # this episode's own server
        for turn in turns[:-1]:
            messages, reward, done, truncated, info = env.step(turn)
            assert not done and not truncated and reward == 0.0
            number = json.loads(turn[len("<tool_call>"):-len("</tool_call>")])["arguments"]["number"]
            assert messages[-1] == {"role": "tool", "content": f"Locker {number} holds the code {data.code}."
                                    if number == data.locker else f"Locker {number} is empty."}
        messages, reward, done, truncated, info = env.step(turns[-1])
        assert done and not truncated and reward == total and info["ended_by"] == "answer"
        assert info["score"]["info"]["correct"]["rewards"] == rewards
        assert info["score"]["info"]["correct"]["metrics"] == {"tool_calls": float(len(turns) - 1)}
        assert info["correct"] == (total == 1.0)
        assert _vault_servers() == []  # stopped at the episode's end


def test_rlvr_eval_runs_a_verifiers_tool_env(vault, tmp_path, capsys):
    from rlvr.cli import main

    samples = tmp_path / "samples.jsonl"
    code = main(["eval", "--env", "rlvr/Verifiers-v0", "--env-arg", 'taskset="vf_vault"', "--env-arg", "limit=2",
                 "--policy", "vf_vault.policy:locksmith", "--output", str(samples), "--json", "--no-progress"])
    assert code == 0
    result = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    rows = [json.loads(line) for line in samples.read_text().splitlines()]
    assert result["items"] == 2 and result["pass_at"]["pass@1"] == 1.0
    assert sorted(row["task_id"] for row in rows) == ["vf_vault/vault-0", "vf_vault/vault-1"]
    assert all(row["reward"] == 1.0 and row["reason"] is None for row in rows)  # both of the taskset's rewards


def test_trainer_steps_on_a_verifiers_tool_env(vault, tmp_path, monkeypatch):
    from rlvr.integrations import verifiers_tools

    started = []  # each episode's toolsets, recorded as they come up (they still start for real)

    class Recorded(verifiers_tools.ToolsetEpisode):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            started.append([s["function"]["name"] for s in self.schemas])

    monkeypatch.setattr(verifiers_tools, "ToolsetEpisode", Recorded)
    metrics = _train(tmp_path, {"taskset": "vf_vault", "limit": 4, "max_turns": 2}, steps=1)
    assert [m["step"] for m in metrics] == [1] and metrics[0]["errors"] == 0
    assert started == [["vault_open_locker"]] * 4  # 2 prompts x 2 episodes, each with its own server


def test_a_tool_server_killed_mid_episode_gives_an_error_episode_and_no_process_left(vault, runtimes):
    env = gymnasium.make("rlvr/Verifiers-v0", taskset="vf_vault", limit=1)
    before = runtimes()
    messages, _ = env.reset(seed=0)
    locker = env.unwrapped.source.tasks[0].data.locker
    messages, _, done, _, _ = env.step(_open_locker(locker))
    assert not done and "holds the code" in messages[-1]["content"]
    (server,) = _vault_servers()
    server.kill()
    messages, reward, done, truncated, info = env.step(_open_locker(locker))
    outcome = (reward, done, truncated, info.get("ended_by"), info.get("score", {}).get("reason"))
    assert outcome == (0.0, False, True, "error", ERROR)  # never a 0 the model earned: the trainer leaves it out
    assert "vault_open_locker failed in its server: ConnectError" in info["score"]["info"]["tool"]  # retried, then given up
    assert _vault_servers() == [] and runtimes() == before  # stopped with the episode, not at close
