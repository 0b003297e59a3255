"""Shared pieces of the repository-task tests: a packaged task, its image, and naive graders.

`workspace_run` plays an agent's container the way many harnesses grade: the bug is applied,
the agent's shell script runs in the repository (as root: it may write site-packages), the
diff is taken against a snapshot made after the bug, and then the tests run *in that same
container*. The naive verdicts read from it (exit status, pytest's summary line, no listed test
reported failed, JUnit XML) are what the attacks fool; rlvr's grader gets only the diff.
"""

from __future__ import annotations

import json
import re
import subprocess
import xml.etree.ElementTree as ET

import pytest

from rlvr.envs.repo_task import RepoTask, image_of, load_catalogue

PACKAGE = "inflection"

WORKSPACE = r'''
import json, os, subprocess, sys
req = json.load(sys.stdin)
def sh(cmd, timeout=120):
    return subprocess.run(cmd, shell=True, cwd="/repo", capture_output=True, text=True, timeout=timeout)
git = "git -c user.email=a@b -c user.name=a "
if req["history"]:
    sh(git + "init -q && git add -A && " + git + "commit -qm pristine")
open("/tmp/setup.diff", "w").write(req["setup"])
assert sh("git apply /tmp/setup.diff").returncode == 0
sh(git + "init -q && git add -A && " + git + "commit -qm start")
agent = sh(req["script"])
sh("git add -A")
diff = sh("git diff --cached").stdout
env = dict(os.environ, PYTHONPATH="/repo")
# pytest writes to a file, not a pipe: a fork bomb's processes would hold a pipe open past the timeout
with open("/tmp/pytest.out", "w") as log:
    try:
        code = subprocess.run(["python3", "-m", "pytest", "-rA", "-p", "no:cacheprovider", "--junitxml=/tmp/junit.xml"]
                              + req["files"], cwd="/repo", stdout=log, stderr=subprocess.STDOUT,
                              timeout=req["timeout"], env=env).returncode
    except subprocess.TimeoutExpired:
        code = None
out = open("/tmp/pytest.out", errors="replace").read()
junit = open("/tmp/junit.xml").read() if os.path.exists("/tmp/junit.xml") else ""
print(json.dumps({"diff": diff, "exit": code, "output": out[-200000:], "junit": junit,
                  "agent": (agent.stdout + agent.stderr)[-4000:]}))
'''


def repo_task(min_f2p: int = 1) -> RepoTask:
    tasks = [t for t in load_catalogue([PACKAGE]) if len(t.fail_to_pass) >= min_f2p]
    if not tasks:
        pytest.fail(f"the packaged catalogue has no {PACKAGE} task")
    return tasks[0]


def task_image(task: RepoTask) -> str:
    from rlvr.sandbox.repo_image import ensure_image

    try:
        return ensure_image(task.package, task.version, task.sdist_sha256, log=lambda m: None)
    except Exception as exc:  # noqa: BLE001 - no engine: skip outside CI, as the sandbox tests do
        import os

        if os.environ.get("CI"):
            raise
        pytest.skip(f"Docker unavailable for repository tasks: {exc}")
    return image_of(task)


def workspace_run(image: str, task: RepoTask, script: str, timeout: float = 60, history: bool = False) -> dict:
    """Run `script` as the agent in a workspace-like container and grade naively in place."""
    files = sorted({t.split("::")[0] for t in task.fail_to_pass + task.pass_to_pass})
    request = {"setup": task.setup_patch, "script": script, "files": files, "timeout": timeout, "history": history}
    proc = subprocess.run(["docker", "run", "-i", "--rm", "--network", "none", "--pids-limit", "256",
                           "--memory", "1g", image, "python3", "-c", WORKSPACE],
                          input=json.dumps(request), capture_output=True, text=True, timeout=timeout + 120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def naive_verdicts(run: dict, task: RepoTask) -> dict[str, bool]:
    """What naive graders conclude from the in-place run: True = they would pay 1."""
    out = run["output"]
    lines = [line for line in out.splitlines() if line.strip()]
    last = lines[-1] if lines else ""
    summary = bool(re.search(r"\d+ passed", last)) and not re.search(r"\d+ (failed|error)", last)
    reported_bad = set()
    for line in lines:
        match = re.match(r"(FAILED|ERROR) (\S+)", line)
        if match:
            reported_bad.add(match.group(2))
    listed = set(task.fail_to_pass + task.pass_to_pass)
    junit_ok = False
    if run["junit"]:
        try:
            root = ET.fromstring(run["junit"])
            suites = [root] if root.tag == "testsuite" else list(root)
            total = sum(int(s.get("tests", 0)) for s in suites)
            bad = sum(int(s.get("failures", 0)) + int(s.get("errors", 0)) for s in suites)
            junit_ok = total > 0 and bad == 0
        except ET.ParseError:
            junit_ok = False
    return {"exit_status": run["exit"] == 0, "summary_line": summary,
            "no_failure_reported": not (reported_bad & listed), "junit_xml": junit_ok}
