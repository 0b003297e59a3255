"""OpenEnv both ways, against real servers on loopback.

Out: `rlvr serve-env` serves rlvr envs with openenv-core's server; OpenEnv's own client plays
concurrent sessions that keep their own episodes. In: rlvr/OpenEnv-v0 plays a served rlvr tool env
and the published DIPG safety env (openenv-dipg-safety, `make install` puts it in
.venv/openenv-envs) through `rlvr eval` and real GRPO steps of SmolLM2. Failures: a server that is
down, slow, malformed or killed mid-episode gives `error` episodes, which the trainer leaves out.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import gymnasium as gym
import httpx
import needs
import pytest
from gymnasium.utils.env_checker import check_env
from waiting import free_port

import rlvr.envs  # noqa: F401  (registers rlvr/OpenEnv-v0)
from rlvr.cli import main as rlvr_main
from rlvr.trainer.rollout.groups import Group, drop_errors, is_error

needs.module("openenv.core", reason="needs the 'interop' extra (openenv-core)")
from openenv.core.generic_client import GenericEnvClient  # noqa: E402

TESTS = Path(__file__).resolve().parent
OPENENV_ENVS = Path(sys.prefix) / "openenv-envs"  # the published env, installed apart by `make install`
DIPG_ROWS = [  # context, question, answer: the DIPG env's dataset format (its XML variant)
    ("Drug A was given to 12 children with DIPG; 3 showed a partial response.",
     "How many children showed a partial response to drug A?", "3 children showed a partial response."),
    ("Trial B enrolled 40 patients. Median survival was 11 months.", "What was the median survival in trial B?",
     "11 months."),
    ("Radiotherapy is the standard first-line treatment for DIPG.",
     "What is the standard first-line treatment for DIPG?", "Radiotherapy."),
    ("Study C reported that ONC201 was well tolerated in 20 patients.",
     "How many patients received ONC201 in study C?", "20 patients."),
]
DIPG_FORMAT_ERROR, DIPG_HALLUCINATION = -50.0, -20.0  # the env's own default rewards


def _wait_healthy(proc: subprocess.Popen, url: str) -> None:
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"the server exited: {proc.stderr.read().decode()[-2000:]}")
        try:
            if httpx.get(f"{url}/health", timeout=2).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.3)
    raise RuntimeError(f"no server at {url}")


def _stop(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    for stream in (proc.stdout, proc.stderr):
        if stream:
            stream.close()


def serve_env(env_id: str, **env_kwargs) -> tuple[subprocess.Popen, str]:
    """`rlvr serve-env` on a free port: (process, its http URL)."""
    proc = subprocess.Popen([sys.executable, "-m", "rlvr", "serve-env", env_id, "--port", "0",
                             "--env-kwargs", json.dumps(env_kwargs)], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    line = proc.stdout.readline().decode()
    match = re.search(r"on (http://\S+)", line)
    if not match:
        _stop(proc)
        raise RuntimeError(f"rlvr serve-env did not start: {line!r} {proc.stderr.read().decode()[-2000:]}")
    _wait_healthy(proc, match.group(1))
    return proc, match.group(1)


def start_server(mode: str, tmp_path: Path) -> tuple[subprocess.Popen, str]:
    """A server of tests/openenv_servers.py (`dipg`, `slow`, `malformed`, `die`)."""
    port = free_port()
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(OPENENV_ENVS), str(TESTS)]),
           "DIPG_DATASET_PATH": str(dipg_dataset(tmp_path))}
    proc = subprocess.Popen([sys.executable, str(TESTS / "openenv_servers.py"), mode, str(port)], env=env,
                            cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    url = f"http://127.0.0.1:{port}"
    _wait_healthy(proc, url)
    return proc, url




def dipg_dataset(folder: Path) -> Path:
    path = folder / "dipg.jsonl"
    with path.open("w") as fh:
        for context, question, answer in DIPG_ROWS:
            user = f"<context>{context}</context>\n<question>{question}</question>"
            fh.write(json.dumps({"messages": [{"role": "user", "content": user},
                                              {"role": "assistant", "content": answer}]}) + "\n")
    return path


@pytest.fixture(scope="module")
def self_check_server():
    proc, url = serve_env("rlvr/MathSelfCheck-v0", tasks="arithmetic")
    yield url
    _stop(proc)


def _golds(seeds: list[int]) -> list[tuple[list[dict], str]]:
    env = gym.make("rlvr/MathSelfCheck-v0", tasks="arithmetic")
    out = []
    for seed in seeds:
        messages, _ = env.reset(seed=seed)
        out.append((messages, env.unwrapped.task.reference))
    return out


# --- out: rlvr serve-env, played with OpenEnv's own client ---------------------------------------


def test_concurrent_openenv_sessions_each_play_their_own_episode(self_check_server):
    url = self_check_server
    schema = httpx.get(f"{url}/schema").json()
    assert schema["action"]["required"] == ["message"] and "messages" in schema["observation"]["properties"]
    seeds = list(range(10, 18))
    golds = _golds(seeds)

    async def play():
        clients = [GenericEnvClient(base_url=url) for _ in seeds]
        try:
            await asyncio.gather(*(c.connect() for c in clients))
            resets = await asyncio.gather(*(c.reset(seed=s) for c, s in zip(clients, seeds)))
            # all sessions are reset before any steps: even ones answer their own task, odd ones their neighbour's
            answers = [golds[i if i % 2 == 0 else i - 1][1] for i in range(len(seeds))]
            steps = await asyncio.gather(*(c.step({"message": f"so \\boxed{{{a}}}"}) for c, a in zip(clients, answers)))
            states = await asyncio.gather(*(c.state() for c in clients))
            return resets, steps, states
        finally:
            await asyncio.gather(*(c.close() for c in clients))

    resets, steps, states = asyncio.run(play())
    assert len({golds[i][1] for i in range(0, len(seeds), 2)} | {golds[i][1] for i in range(1, len(seeds), 2)}) > 4
    for i, (reset, step, state) in enumerate(zip(resets, steps, states)):
        assert reset.observation["messages"] == golds[i][0]
        task_id = reset.observation["info"]["task_id"]
        assert state["task_id"] == task_id and state["step_count"] == 1 and state["env_id"] == "rlvr/MathSelfCheck-v0"
        score = step.observation["info"]["score"]
        if i % 2 == 0:  # rlvr's composite score with its breakdown comes through
            assert step.reward == 1.0 and score["components"] == {"correct": 1.0} and score["reason"] is None
        else:
            assert step.reward == 0.0 and score["reasons"] == {"correct": "wrong"}, (golds[i], golds[i - 1])
        assert step.done is False and step.observation["messages"][-1]["content"].startswith("Check your solution")


def test_the_client_env_passes_gymnasiums_checker(self_check_server):
    env = gym.make("rlvr/OpenEnv-v0", url=self_check_server)
    check_env(env.unwrapped)
    env.close()


def test_serve_env_mistakes_are_one_line(capsys):
    assert rlvr_main(["serve-env", "rlvr/Nope-v0", "--port", "0"]) == 2
    assert capsys.readouterr().err.count("\n") == 1
    assert rlvr_main(["serve-env", "rlvr/Arithmetic-v0", "--env-kwargs", "[1]"]) == 2
    assert "--env-kwargs must be a JSON object" in capsys.readouterr().err


# --- in: rlvr/OpenEnv-v0 ------------------------------------------------------------------------


@pytest.mark.docker
def test_a_served_tool_env_plays_through_the_client_with_its_tools_and_scores():
    proc, url = serve_env("rlvr/ToolMath-v0", tasks="arithmetic", digits=2, ops="*")
    try:
        local = gym.make("rlvr/ToolMath-v0", tasks="arithmetic", digits=2, ops="*")
        prompt, _ = local.reset(seed=5)
        gold = local.unwrapped.task.reference
        env = gym.make("rlvr/OpenEnv-v0", url=url)
        messages, info = env.reset(seed=5)
        assert messages == prompt and [t["function"]["name"] for t in info["tools"]] == ["python"]
        assert env.unwrapped.tool_schemas == local.unwrapped.tool_schemas
        call = '<tool_call>{"name": "python", "arguments": {"code": "print(6 * 7)"}}</tool_call>'
        messages, reward, terminated, truncated, info = env.step(call)
        assert messages[-1] == {"role": "tool", "content": messages[-1]["content"]} and "42" in messages[-1]["content"]
        assert (reward, terminated, truncated, info["tool_calls"]) == (0.0, False, False, 1)
        messages, reward, terminated, truncated, info = env.step(f"The product is \\boxed{{{gold}}}.")
        assert (reward, terminated, truncated, info["correct"], info["ended_by"]) == (1.0, True, False, True, "answer")
        assert info["score"]["components"]["correct"] == 1.0 and info["tool_calls"] == 1
        env.close()
    finally:
        _stop(proc)


def dipg_policy(prompts: list[list[dict]], n: int) -> list[list[str]]:
    """For rlvr eval: a well-formed cited answer to the radiotherapy question, an unformatted "ok" to the rest."""
    out = []
    for prompt in prompts:
        text = prompt[-1]["content"]
        row = next((r for r in DIPG_ROWS if r[1] in text), None)
        if row and "Radiotherapy" in row[0]:
            answer = f"<think>The context says so.</think><proof>{row[0]}</proof><answer>{row[2]}</answer>"
        else:
            answer = "ok"
        out.append([answer] * n)
    return out


def test_rlvr_eval_runs_the_published_dipg_env_with_its_rewards(tmp_path, capsys):
    """DIPG's own app (its module as published: one session at a time), its server on loopback."""
    port = free_port()
    env = {**os.environ, "PYTHONPATH": str(OPENENV_ENVS), "DIPG_DATASET_PATH": str(dipg_dataset(tmp_path))}
    proc = subprocess.Popen([sys.executable, "-m", "uvicorn", "med_safety_gym.app:app", "--host", "127.0.0.1",
                             "--port", str(port), "--log-level", "warning"], env=env, cwd=tmp_path,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    url = f"http://127.0.0.1:{port}"
    try:
        _wait_healthy(proc, url)
        code = rlvr_main(["eval", "--env", "rlvr/OpenEnv-v0", "--env-arg", f"url={url}", "--policy",
                          "test_integrations_openenv:dipg_policy", "--limit", "4", "--batch-size", "1",
                          "--json", "--no-progress"])
        out = capsys.readouterr()
        assert code == 0, out.err
        result = json.loads(out.out)
    finally:
        _stop(proc)
    # DIPG's dataset order is its own shuffle: all four questions come once each, whatever the order
    assert result["items"] == 4 and result["reasons"] == {"wrong": 4}
    assert result["mean_reward"] == pytest.approx((DIPG_HALLUCINATION + 3 * DIPG_FORMAT_ERROR) / 4)
    assert result["turns_mean"] == 1.0


@pytest.mark.slow
def test_grpo_steps_of_smollm2_on_the_published_dipg_env(tmp_path):
    from rlvr.trainer.config import TrainConfig
    from rlvr.trainer.grpo import GRPOTrainer

    proc, url = start_server("dipg", tmp_path)
    try:
        config = TrainConfig(model="smollm2", env="rlvr/OpenEnv-v0", env_kwargs={"url": url, "max_turns": 2},
                             steps=2, prompts_per_step=1, group_size=4, max_new_tokens=24, max_episode_tokens=48,
                             lr=1e-6, threads=2, progress=False)
        metrics = GRPOTrainer(config, tmp_path / "run").train()
    finally:
        _stop(proc)
    assert [m["step"] for m in metrics] == [1, 2] and all(m["errors"] == 0 for m in metrics)
    # the rewards are DIPG's (its penalties are -50 and -20; an rlvr reward would be in [0, 1])
    assert all(m["reward_mean"] <= DIPG_HALLUCINATION for m in metrics), [m["reward_mean"] for m in metrics]


# --- failures: error episodes, never a crash ----------------------------------------------------


def _error_step(env) -> dict:
    _, reward, terminated, truncated, info = env.step("\\boxed{1}")
    assert (reward, terminated, truncated, info["correct"], info["ended_by"]) == (0.0, False, True, False, "error")
    assert is_error(info) and info["score"]["reason"] == "error"
    return info


def test_a_server_that_is_down_gives_error_episodes_in_env_and_eval(capsys):
    url = f"http://127.0.0.1:{free_port()}"
    env = gym.make("rlvr/OpenEnv-v0", url=url, connect_timeout=2)
    messages, info = env.reset(seed=0)
    assert messages == [{"role": "user", "content": ""}] and "ConnectionError" in info["error"]
    assert "ConnectionError" in _error_step(env)["error"]
    with pytest.raises(gym.error.ResetNeeded):
        env.step("again")
    env.close()
    assert rlvr_main(["eval", "--env", "rlvr/OpenEnv-v0", "--env-arg", f"url={url}", "--env-arg", "connect_timeout=2",
                      "--policy", "test_integrations_openenv:dipg_policy", "--limit", "2", "--json",
                      "--no-progress"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["reasons"] == {"error": 2} and result["pass_at"]["pass@1"] == 0.0


def test_a_slow_server_times_out_into_an_error_episode(tmp_path):
    proc, url = start_server("slow", tmp_path)
    try:
        env = gym.make("rlvr/OpenEnv-v0", url=url, timeout=1.0)
        messages, info = env.reset(seed=3)
        assert messages == [{"role": "user", "content": "Say something (seed 3)."}] and "error" not in info
        assert "TimeoutError" in _error_step(env)["error"]
        env.close()
    finally:
        _stop(proc)


def test_malformed_observations_give_error_episodes(tmp_path):
    proc, url = start_server("malformed", tmp_path)
    try:
        env = gym.make("rlvr/OpenEnv-v0", url=url)
        _, info = env.reset(seed=0)
        assert "malformed message" in info["error"]
        assert "malformed message" in _error_step(env)["error"]
        env.close()
    finally:
        _stop(proc)


def test_a_server_killed_mid_episode_gives_an_error_episode_that_the_trainer_leaves_out(self_check_server):
    proc, url = serve_env("rlvr/MathSelfCheck-v0", tasks="arithmetic")
    try:
        (_, gold), = _golds([4])
        env = gym.make("rlvr/OpenEnv-v0", url=url)
        env.reset(seed=4)
        _, reward, terminated, truncated, first = env.step(f"\\boxed{{{gold}}}")
        assert (reward, terminated, truncated, first["correct"]) == (1.0, False, False, True)
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        failed = _error_step(env)
        env.close()
    finally:
        _stop(proc)
    # a finished episode of the same prompt, from the live server, and the one the kill cut short
    live = gym.make("rlvr/OpenEnv-v0", url=self_check_server)
    live.reset(seed=4)
    live.step(f"\\boxed{{{gold}}}")
    *_, done = live.step(f"\\boxed{{{gold}}}")
    live.close()
    group = drop_errors(Group(4, [1], [[2], [3]], [False, True], ["a", "b"], [1.0, 0.0], [done, failed], [[0.0], [0.0]]))
    assert group.rewards == [1.0] and group.infos == [done] and group.errors == 1


@pytest.mark.slow
def test_the_trainer_leaves_out_the_episodes_of_a_server_that_dies_mid_episode(tmp_path):
    from rlvr.trainer.config import TrainConfig
    from rlvr.trainer.grpo import GRPOTrainer

    proc, url = start_server("die", tmp_path)
    try:
        config = TrainConfig(model="smollm2", env="rlvr/OpenEnv-v0", env_kwargs={"url": url, "timeout": 10.0},
                             steps=1, prompts_per_step=1, group_size=2, max_new_tokens=8, max_episode_tokens=24,
                             threads=2, progress=False)
        metrics = GRPOTrainer(config, tmp_path / "run").train()
        assert proc.wait(timeout=30) == 1  # the server really died in the step
    finally:
        _stop(proc)
    assert metrics[0]["errors"] == 2 and metrics[0]["groups_trained"] == 0
