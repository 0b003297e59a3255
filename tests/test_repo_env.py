"""rlvr/RepoFix-v0 and its workspace, on real task images of the packaged catalogue and a real Docker engine.

The workspace: the agent's commands run unprivileged, with no network, killed at their time limit with
everything they started, their output capped; edits that miss come back as messages; the diff is what
`git apply` takes; neither the pristine code nor hidden tests are anywhere the agent can read. The env:
the gold patch written through the tools scores 1, an empty submission 0, a budget ends the episode
graded, and the container is gone when the episode ends.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import threading
import time

import gymnasium as gym
import needs
import pytest

import rlvr.envs  # noqa: F401  (registers rlvr/RepoFix-v0)
from rlvr.envs.repo_env import RepoFixEnv, RepoTasks, task_image
from rlvr.envs.repo_task import load_catalogue
from rlvr.envs.tool_calls import HermesParser

pytestmark = pytest.mark.docker
PACKAGE = "inflection"  # quick tests, plain layout


def _docker():
    try:
        import docker

        client = docker.from_env()
        client.ping()
        return client
    except Exception as exc:  # noqa: BLE001
        needs.skip(f"no Docker engine: {exc}")


@pytest.fixture(scope="module")
def tasks():
    _docker()
    found = [t for t in load_catalogue([PACKAGE]) if t.hidden_tests and t.mutation is not None]
    if not found:
        pytest.fail(f"the catalogue has no {PACKAGE} tasks")
    task_image(found[0])  # built on first use
    return found


@pytest.fixture()
def workspace(tasks):
    from rlvr.sandbox.repo_workspace import get_workspace_pool

    task = tasks[0]
    ws = get_workspace_pool(task_image(task), task.repo_dir, size=1).acquire()
    ws.start(task.setup_patch, task.hidden_tests)
    yield ws
    ws.close()


def call(name, **arguments):
    return HermesParser.format_call(name, arguments)


def test_commands_run_unprivileged_offline_and_limited(workspace):
    out = workspace.bash("id -u; pwd")
    assert out["output"].split() == [str(workspace.agent_uid), "/repo"] and out["exit"] == 0
    out = workspace.bash("python3 -c 'import socket; socket.create_connection((\"1.1.1.1\", 80), timeout=2)'")
    assert out["exit"] != 0 and "Network is unreachable" in out["output"]
    out = workspace.bash("sleep 30", timeout=1)
    assert out["timed_out"] and out["seconds"] < 10
    # What a command leaves running is killed when it returns.
    out = workspace.bash("(sleep 300 &) ; echo started")
    assert out["output"].strip() == "started" and out["seconds"] < 10
    assert "sleep" not in workspace.bash("cat /proc/[0-9]*/comm")["output"]
    out = workspace.bash("yes | head -c 100000")
    assert out["truncated"] and len(out["output"]) <= workspace.limits.output_limit
    # Fork bombs, one in a session of its own: killed, and the server still answers. Killing pid by pid
    # let a bomb refill the freed slots and silenced the server half the time: three rounds catch that.
    for _ in range(3):
        for bomb in (":(){ :|:& };:", "setsid bash -c ':(){ :|:& };:' & sleep 2"):
            workspace.bash(bomb, timeout=3)
            assert workspace.bash("echo alive")["output"] == "alive\n"
    assert workspace.bash("touch /usr/lib/x 2>&1; echo $?")["output"].strip().endswith("1")  # not root


def test_a_fork_bomb_in_one_workspace_leaves_another_free_to_fork(tasks):
    """The process cap is counted per uid across the host: each container's agent has a uid of its own."""
    from rlvr.sandbox.repo_workspace import get_workspace_pool

    pool = get_workspace_pool(task_image(tasks[0]), tasks[0].repo_dir, size=2)
    with pool.acquire() as bombed, pool.acquire() as other:
        assert bombed.agent_uid != other.agent_uid
        bomb = "python3 -c 'import os,time\nwhile True:\n  try: os.fork()\n  except OSError: time.sleep(0.01)'"
        thread = threading.Thread(target=bombed.bash, args=(bomb, 6))
        thread.start()
        time.sleep(3)  # the bomb holds every process it may have
        out = other.bash("for i in 1 2 3 4 5; do /bin/true || echo failed; done; echo done")
        thread.join()
    assert out["output"] == "done\n" and out["exit"] == 0


def test_view_and_edit_answer_with_messages_never_exceptions(workspace, tasks):
    path = tasks[0].mutation.file
    view = workspace.view(path, 1, 3)
    assert view.splitlines()[0].lstrip().startswith("1  ") and len(view.splitlines()) == 3
    assert workspace.view("no/such.py").startswith("Error: no such file")
    assert workspace.view("../etc/passwd").startswith("Error: ../etc/passwd is outside the repository")
    assert workspace.view(path, 10**6).startswith("Error:")
    before = workspace.request("read", path=path)["content"]
    missing = workspace.edit(path, "this text is not in the file", "x")
    assert missing.startswith("Error: the text to replace was not found") and "nothing changed" in missing
    assert workspace.edit(path, "\n", "x").startswith("Error: the text to replace occurs")
    assert workspace.edit(path, "", "x").startswith("Error: `old` is empty")
    assert workspace.request("read", path=path)["content"] == before
    line = next(x for x in before.splitlines() if x.strip() and before.count(x) == 1)
    assert workspace.edit(path, line, line + "  # edited").startswith(f"Edited {path}")
    assert workspace.request("read", path=path)["content"] == before.replace(line, line + "  # edited")


def test_the_diff_is_against_the_buggy_start_and_applies_with_git(workspace, tasks):
    from rlvr.sandbox.repo_workspace import get_workspace_pool

    task = tasks[0]
    assert workspace.diff() == ""
    workspace.bash(f"echo '# note' >> {task.mutation.file}; echo 'x = 1' > new_module.py; rm setup.py")
    diff = workspace.diff()
    assert f"+++ b/{task.mutation.file}\n" in diff and "+# note\n" in diff
    assert "--- /dev/null\n+++ b/new_module.py\n" in diff and "+++ /dev/null" in diff
    # A second workspace with the same start takes the diff with git and ends in the same files.
    other = get_workspace_pool(task_image(task), task.repo_dir, size=1).acquire()
    with other:
        other.start(task.setup_patch, task.hidden_tests)
        workspace_files = workspace.bash(f"sha256sum {task.mutation.file} new_module.py")["output"]
        other.request("write", path="agent.diff", content=diff)
        out = other.bash("git apply agent.diff && rm agent.diff && git --version >/dev/null; "
                         f"sha256sum {task.mutation.file} new_module.py; ls setup.py")
        assert out["output"].startswith(workspace_files) and "No such file" in out["output"]


def test_neither_the_pristine_code_nor_hidden_tests_are_in_the_workspace(workspace, tasks, tmp_path):
    """Every file the agent can read is hashed: none is the pristine (gold) source file or a hidden test."""
    from rlvr.sandbox.repo_workspace import get_workspace_pool

    task = tasks[0]
    clean = get_workspace_pool(task_image(task), task.repo_dir, size=1).acquire()
    with clean:  # the image's files, without the bug: what must not leak
        secrets = {p: clean.request("read", path=p)["content"] for p in (task.mutation.file, *task.hidden_tests)}
    digests = {hashlib.sha256(text.encode()).hexdigest(): p for p, text in secrets.items()}
    assert workspace.bash(f"ls {' '.join(task.hidden_tests)} 2>&1")["exit"] != 0
    finder = ("import hashlib, json, os, sys\nwanted = set(json.loads(sys.argv[1]))\nhits = []\n"
              "for root, dirs, files in os.walk('/'):\n"
              "    dirs[:] = [d for d in dirs if os.path.join(root, d) not in ('/proc', '/sys', '/dev')]\n"
              "    for f in files:\n        p = os.path.join(root, f)\n        try:\n"
              "            if os.path.isfile(p) and hashlib.sha256(open(p, 'rb').read()).hexdigest() in wanted:\n"
              "                hits.append(p)\n        except OSError:\n            pass\nprint(json.dumps(hits))\n")
    workspace.request("write", path=".finder.py", content=finder)
    out = workspace.bash(f"python3 .finder.py '{json.dumps(sorted(digests))}'", timeout=120)
    assert out["exit"] == 0, out
    assert json.loads(out["output"]) == []
    # The finder finds what is there: the buggy file itself.
    buggy = hashlib.sha256(workspace.request("read", path=task.mutation.file)["content"].encode()).hexdigest()
    out = workspace.bash(f"python3 .finder.py '{json.dumps([buggy])}'", timeout=120)
    assert json.loads(out["output"]) == [f"{task.repo_dir}/{task.mutation.file}"]


def test_the_graders_bytecode_cache_is_covered_in_the_workspace(workspace):
    """The image compiles the released modules and tests for the grader (the fix and the hidden tests, as
    bytecode); a workspace mounts an empty folder over them."""
    from rlvr.sandbox.repo_image import PYCACHE

    attrs = _docker().containers.get(workspace.ident).attrs
    assert PYCACHE in attrs["HostConfig"]["Tmpfs"], attrs["HostConfig"]["Tmpfs"]
    out = workspace.bash(f"ls -R {PYCACHE} 2>&1; ls -ld {PYCACHE}")
    assert ".pyc" not in out["output"] and "root root" in out["output"], out


def test_a_pool_hands_out_fresh_containers_and_removes_them(tasks):
    import docker

    from rlvr.sandbox.repo_workspace import WorkspaceError, WorkspacePool

    task = tasks[0]
    pool = WorkspacePool(task_image(task), task.repo_dir, size=2)
    try:
        a, b = pool.acquire(), pool.acquire()
        assert a.ident != b.ident
        a.start()
        a.bash("echo dirty > dirty.txt")
        a.close()
        client = docker.from_env()
        with pytest.raises(docker.errors.NotFound):
            client.containers.get(a.ident).reload()
        c = pool.acquire()
        c.start()
        assert c.bash("ls dirty.txt 2>&1")["exit"] != 0  # never a used container
        b.close(), c.close()
    finally:
        pool.close()
    with pytest.raises(WorkspaceError, match="missing"):
        WorkspacePool("rlvr-repo-no-such-image:0", size=1)


# --- the env ---------------------------------------------------------------------------------------


def _env(tasks, **kwargs):
    return RepoFixEnv(RepoTasks(tasks[:2], mode=kwargs.pop("mode", "all")), **kwargs)


def _gold_through_tools(env):
    """A scripted agent that writes the gold patch with bash (git apply), then submits."""
    task = env.unwrapped.repo_task
    patch = task.gold_patch.replace("'", "'\"'\"'")
    return [call("bash", command=f"printf '%s' '{patch}' > /tmp/fix.diff && git apply /tmp/fix.diff && echo ok"),
            call("submit")]


def test_the_gold_patch_scores_one_and_an_empty_submission_zero(tasks):
    import docker

    env = _env(tasks)
    obs, info = env.reset(options={"index": 0})
    assert [t["function"]["name"] for t in info["tools"]] == ["bash", "view_file", "edit_file", "run_tests",
                                                                 "submit"]
    assert tasks[0].problem_statement.strip()[:40] in obs[-1]["content"]
    first, submit = _gold_through_tools(env)
    obs, reward, terminated, truncated, info = env.step(first)
    assert obs[-1]["content"].startswith("ok") and not (terminated or truncated)
    ident = env.repo_tools.workspace.ident
    obs, reward, terminated, truncated, info = env.step(submit)
    assert (reward, terminated, info["ended_by"], info["correct"]) == (1.0, True, "answer", True), info
    assert set(info["score"]["info"]["correct"]["tests"].values()) == {"passed"}
    with pytest.raises(docker.errors.NotFound):  # the workspace is gone with the episode
        docker.from_env().containers.get(ident).reload()
    env.reset(options={"index": 1})
    obs, reward, terminated, truncated, info = env.step("I cannot find the bug.")  # no tool call: submits
    assert (reward, terminated, info["ended_by"], info["correct"]) == (0.0, True, "answer", False), info
    assert info["score"]["reason"] == "tests_failed"
    env.close()


def test_budgets_end_the_episode_graded_and_hidden_tests_stay_hidden(tasks):
    env = _env(tasks, max_turns=2, hide_tests=True)
    env.reset(options={"index": 0})
    hidden = tasks[0].hidden_tests[0]
    obs, *_ = env.step(call("bash", command=f"ls {hidden}"))
    assert "No such file" in obs[-1]["content"]
    first, _ = _gold_through_tools(env)
    obs, reward, terminated, truncated, info = env.step(first)  # the second turn: max_turns
    assert (terminated, truncated, info["ended_by"], reward) == (False, True, "max_turns", 1.0), info
    env = _env(tasks, max_tool_seconds=0.5)
    env.reset(options={"index": 0})
    obs, reward, terminated, truncated, info = env.step(call("bash", command="sleep 1"))
    assert (truncated, info["ended_by"], reward) == (True, "max_tool_time", 0.0)
    env.close()


def test_a_missing_image_is_an_error_episode_not_a_zero(tasks):
    broken = [dataclasses.replace(tasks[0], image="rlvr-repo-no-such-image:0")]
    env = RepoFixEnv(RepoTasks(broken))
    env.reset(options={"index": 0})
    obs, reward, terminated, truncated, info = env.step(call("bash", command="ls"))
    assert info["ended_by"] == "error" and info["score"]["reason"] == "error" and reward == 0.0


def test_gym_make_and_bad_options():
    with pytest.raises(TypeError, match="unexpected keyword"):
        gym.make("rlvr/RepoFix-v0", bogus=1)
    with pytest.raises(ValueError, match="mode"):
        gym.make("rlvr/RepoFix-v0", mode="most")
