"""`rlvr/Verifiers-v0` runs the parts of a verifiers rollout beyond the model's turns, or refuses the taskset:
task `setup`/`finalize` hooks, rewards that need the runtime, shared toolsets, a tool that hangs.

The taskset is tests/vf_hooks: full marks (0.25 `prepared` + 0.75 `answered`) only when setup, finalize and
the runtime reward all ran, so a part skipped shows in the score.
"""

import json
import os
import time
from pathlib import Path

import gymnasium
import needs
import pytest

import rlvr.envs  # noqa: F401  (registers rlvr/Verifiers-v0)
from rlvr.verifiers.core import ERROR

vf = needs.module("verifiers.v1")

FULL = {"answered": 1.0, "prepared": 1.0}
WRONG = {"answered": 0.0, "prepared": 1.0}  # setup ran; the reply finalize left in the runtime lacks the word


@pytest.fixture
def make(monkeypatch, runtimes):
    """`gym.make` of vf_hooks, importable by the tool servers (they inherit the environment); after the test
    the envs are closed and nothing may be left behind."""
    tests = str(Path(__file__).parent)
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [tests, os.environ.get("PYTHONPATH")])))
    envs = []

    def make(limit, **kwargs):
        envs.append(gymnasium.make("rlvr/Verifiers-v0", taskset="vf_hooks", limit=limit, **kwargs))
        return envs[-1]

    yield make
    for env in envs:
        env.close()
    assert _servers() == [] and runtimes() == set()  # no server running, every runtime torn down
    assert runtimes.folder.exists()  # the envs made their runtimes there (else the check above saw nothing)


def _servers(module="vf_hooks."):
    import psutil

    def cmdline(process):
        try:
            return " ".join(process.cmdline())
        except psutil.Error:  # it ended meanwhile
            return ""

    return [p for p in psutil.Process().children(recursive=True) if module in cmdline(p)]


def _call(name, **arguments):
    return f'<tool_call>{json.dumps({"name": name, "arguments": arguments})}</tool_call>'


def _rewards(info):
    return info["score"]["info"]["correct"]["rewards"]


def test_a_single_turn_task_runs_its_setup_finalize_and_runtime_rewards(make):
    env = make(2)
    for index, task in enumerate(env.unwrapped.source.tasks):
        word = task.data.word
        env.reset(options={"index": index})
        _, reward, done, _, info = env.step(f"The word is {word}.")
        assert done and reward == 1.0 and _rewards(info) == FULL
        env.reset(options={"index": index})
        _, reward, _, _, info = env.step("I could not read it.")
        assert reward == 0.25 and _rewards(info) == WRONG and info["score"]["reason"] == "wrong"
    # The trainer's path: a group scored in one batch, each completion a rollout with a runtime of its own.
    scored = env.unwrapped.score_group([word, "no", f"{word}!"])
    assert [reward for reward, _ in scored] == [1.0, 0.25, 1.0]


def test_a_hook_that_raises_makes_an_error_episode_never_a_zero(make):
    for hook in ("setup", "finalize"):
        env = make(1, options={"task": {"fail": hook}})
        env.reset(options={"index": 0})
        _, reward, done, _, info = env.step(env.unwrapped.source.tasks[0].data.word)
        assert done and reward == 0.0 and info["score"]["reason"] == ERROR  # the trainer leaves it out
        assert info["score"]["info"]["correct"]["error"] == f"TaskError: task {hook}: RuntimeError: {hook} failed on purpose"
    env = make(1, options={"task": {"fail": "setup", "notes": True}})  # a tool episode: before its servers
    env.reset(options={"index": 0})
    _, reward, _, truncated, info = env.step(_call("notes_read"))
    assert (reward, truncated, info["ended_by"], info["score"]["reason"]) == (0.0, True, "error", ERROR)
    assert "TaskError: task setup: RuntimeError: setup failed on purpose" in info["score"]["info"]["toolset"]

def test_tasks_rlvr_cannot_run_as_verifiers_would_are_refused_by_name():
    with pytest.raises(ValueError, match=r"task HooksTask needs a container \(NEEDS_CONTAINER or an image\)"):
        gymnasium.make("rlvr/Verifiers-v0", taskset="vf_hooks", limit=1, options={"refuse": "container"})
    with pytest.raises(ValueError, match=r"task StoppingTask has @vf.stop hook enough: .* would never run"):
        gymnasium.make("rlvr/Verifiers-v0", taskset="vf_hooks", limit=1, options={"refuse": "stop"})


def test_a_tool_episode_runs_setup_before_its_servers_and_finalize_and_rewards_on_its_runtime(make):
    env = make(1, options={"task": {"notes": True}})
    word = env.unwrapped.source.tasks[0].data.word
    for answer, total, rewards in ((f"It says {word}.", 1.0, FULL), ("It says nothing.", 0.25, WRONG)):
        _, info = env.reset(options={"index": 0})
        assert [s["function"]["name"] for s in info["tools"]] == ["notes_read"]
        messages, _, done, _, _ = env.step(_call("notes_read"))
        assert not done and messages[-1] == {"role": "tool", "content": word}  # the note setup wrote in the runtime
        _, reward, done, _, info = env.step(answer)
        assert done and reward == total and _rewards(info) == rewards
        assert _servers() == []


def test_shared_toolsets_start_once_per_env_serve_every_episode_and_stop_at_close(make):
    env = make(2, options={"shared": True})
    replies = []
    for index in (0, 1):
        _, info = env.reset(options={"index": index})
        assert [s["function"]["name"] for s in info["tools"]] == ["shared_count"]
        messages, _, _, _, _ = env.step(_call("shared_count"))
        replies.append(messages[-1]["content"])
        _, reward, done, _, info = env.step(env.unwrapped.source.tasks[index].data.word)
        assert done and reward == 1.0 and _rewards(info) == FULL
        (server,) = _servers("vf_hooks.counter")  # still up between episodes
    assert replies == [f"call 1 on server {server.pid}", f"call 2 on server {server.pid}"]  # one server, both
    env.close()
    assert _servers() == []


def test_a_tool_call_that_hangs_past_tool_timeout_is_an_error_episode(make, runtimes):
    env = make(1, tool_timeout=3, options={"task": {"nap": True}})
    before = runtimes()
    env.reset(options={"index": 0})
    assert len(_servers("vf_hooks.nap")) == 1
    start = time.monotonic()
    _, reward, done, truncated, info = env.step(_call("slow_nap", seconds=600))
    elapsed = time.monotonic() - start
    outcome = (reward, done, truncated, info.get("ended_by"), info.get("score", {}).get("reason"))
    assert outcome == (0.0, False, True, "error", ERROR)  # never a 0 the model earned: the trainer leaves it out
    assert "slow_nap failed in its server" in info["score"]["info"]["tool"]
    # the call was cut at tool_timeout=3, not at the default 60 s nor at once (8 s here beside a CI run:
    # the slack is for a loaded machine, not a speed test)
    assert 3 <= elapsed < 3 + 20
    assert _servers() == [] and runtimes() == before
