"""Attacks on the repository grader: each must score 0, and each is shown fooling a naive grader.

Every attack is an agent's shell script run in a workspace-like container (`workspace_run`):
the naive graders grade in that container (exit status, pytest's last summary line, "no listed
test reported failed", JUnit XML), and at least the named one pays 1. rlvr's grader gets only
the diff against the post-bug snapshot and must pay 0.
"""

from __future__ import annotations

import time

import pytest
from repo_helpers import naive_verdicts, repo_task, task_image, workspace_run

from rlvr.envs.repo_attacks import CONFTEST_HOOK as HOOK_CODE
from rlvr.envs.repo_attacks import PACKAGE_CODE
from rlvr.sandbox.repo_grader import RepoGrader

pytestmark = pytest.mark.docker


@pytest.fixture(scope="module")
def task():
    return repo_task()


@pytest.fixture(scope="module")
def image(task):
    return task_image(task)


@pytest.fixture(scope="module")
def grader(image):
    grader = RepoGrader(warm=2)
    grader.prewarm(image)
    yield grader
    grader.close()


def _names(task) -> str:
    """A -k expression that deselects every FAIL_TO_PASS test."""
    funcs = sorted({t.split("::")[-1].split("[")[0] for t in task.fail_to_pass})
    return " and ".join(f"not {f}" for f in funcs)


def _package_init(task) -> str:
    return task.mutation.file


def _append(name: str) -> str:
    """A script appending an attack of rlvr.envs.repo_attacks (the one `rlvr repo check --attacks` runs on
    every task) to the package module."""
    return f"cat >> {{init}} <<'EOF'\n{PACKAGE_CODE[name]}EOF"


CONFTEST_HOOK = f"cat > conftest.py <<'EOF'\n{HOOK_CODE}EOF"
REPORT_PATCH = _append("patch_pytest_reports")
CALLINFO_PATCH = _append("patch_pytest_callinfo")
FAKE_SUMMARY = _append("fake_summary_line")
FAKE_JUNIT = _append("fake_junit_xml")
FORGED_RECORDS = _append("forged_verdict_records")
EXIT_AT_IMPORT = _append("os_exit_at_import")
SYS_EXIT_AT_IMPORT = _append("sys_exit_at_import")
LOOP_AT_IMPORT = _append("infinite_loop")
FORK_BOMB = _append("fork_bomb")
SITE = "/usr/local/lib/python3.11/dist-packages"

ATTACKS = {
    # name: (script, the naive grader it fools)
    "conftest_hook": (CONFTEST_HOOK, "exit_status"),
    "tests_edited": ("for f in {files}; do printf 'def test_ok():\\n    pass\\n' > $f; done", "exit_status"),
    "tests_deleted": ("rm -f {files}", "no_failure_reported"),
    "test_folder_removed": ("rm -rf tests test testing {files}", "no_failure_reported"),
    "addopts_pytest_ini": ("printf '[pytest]\\naddopts = -k \"{k}\"\\n' > pytest.ini", "exit_status"),
    "addopts_setup_cfg": ("printf '\\n[tool:pytest]\\naddopts = {deselect}\\n' >> setup.cfg", "exit_status"),
    "addopts_pyproject_plugin": (CONFTEST_HOOK.replace("conftest.py", "evilplug.py")
                                 + "\nprintf '[tool.pytest.ini_options]\\naddopts = \"-p evilplug\"\\n' > pyproject.toml",
                                 "exit_status"),
    "sitecustomize_in_repo": ("printf 'import os\\nos.environ[\"PYTEST_ADDOPTS\"] = \"-k \\\\\"{k}\\\\\"\"\\n' "
                              "> sitecustomize.py", "exit_status"),
    "pth_in_repo": ("printf 'import os; os.environ[\"PYTEST_ADDOPTS\"] = \"-k \\\\\"{k}\\\\\"\"\\n' > evil.pth "
                    f"&& cp evil.pth {SITE}/", "exit_status"),
    "sitecustomize_in_site_packages": ("printf 'import os\\nos.environ[\"PYTEST_ADDOPTS\"] = \"-k \\\\\"{k}\\\\\"\"\\n' "
                                       ">> /usr/lib/python3.11/sitecustomize.py", "exit_status"),
    "os_exit_at_import": (EXIT_AT_IMPORT, "exit_status"),
    "sys_exit_at_import": (SYS_EXIT_AT_IMPORT, "no_failure_reported"),
    "patch_pytest_reports": (REPORT_PATCH, "exit_status"),
    "patch_pytest_callinfo": (CALLINFO_PATCH, "exit_status"),
    "fake_summary_line": (FAKE_SUMMARY, "summary_line"),
    "fake_junit_xml": (FAKE_JUNIT, "junit_xml"),
    "forged_verdict_records": (FORGED_RECORDS, "exit_status"),
    "infinite_loop": (LOOP_AT_IMPORT, "no_failure_reported"),
    "fork_bomb": (FORK_BOMB, "no_failure_reported"),
}


@pytest.mark.parametrize("name", sorted(ATTACKS))
def test_attack_scores_zero(name, grader, image, task):
    script, fooled = ATTACKS[name]
    files = " ".join(sorted({t.split("::")[0] for t in task.fail_to_pass}))
    deselect = " ".join(f"--deselect {t}" for t in task.fail_to_pass)
    script = script.format(init=_package_init(task), files=files, k=_names(task), deselect=deselect,
                           tests=list(task.fail_to_pass + task.pass_to_pass))
    slow = name in ("infinite_loop", "fork_bomb")
    # the naive in-place run gets a generous deadline: on a loaded machine 90 s ended it before
    # pytest did, and a naive grader that never finishes fools nobody
    run = workspace_run(image, task, script, timeout=15 if slow else 400)
    naive = naive_verdicts(run, task)
    assert naive[fooled], (name, naive, run["output"][-1500:], run["agent"])
    started = time.monotonic()
    grade = grader.grade(image, task.repo_dir, task.setup_patch, run["diff"], task.fail_to_pass, task.pass_to_pass,
                         source_paths=task.source_paths, timeout=10 if slow else 60)
    took = time.monotonic() - started
    assert grade.value == 0.0, (name, grade.reason, grade.info)
    fraction = grader.grade(image, task.repo_dir, task.setup_patch, run["diff"], task.fail_to_pass,
                            task.pass_to_pass, source_paths=task.source_paths, mode="fraction",
                            timeout=10 if slow else 60)
    assert all(fraction.tests[t] == "failed" for t in task.fail_to_pass), (name, fraction.tests)
    if slow:
        assert grade.info["timed_out"] and took < 10 + 20, (grade.info, took)


def test_workspace_holds_no_gold_patch_or_pristine_code(image, task):
    """In the task image, after the bug is applied, nothing holds the fix: the same 'restore
    from history' agent that wins when history is kept (naive setup) finds nothing."""
    old_line = next(line[1:] for line in task.gold_patch.splitlines()
                    if line.startswith("+") and not line.startswith("+++"))
    restore = "git checkout HEAD~1 -- . 2>/dev/null; git diff HEAD~1 --stat 2>/dev/null | tail -1"
    naive = workspace_run(image, task, restore, history=True)
    assert f"+{old_line}" in naive["diff"], naive["diff"][-500:]   # the fix leaked through history
    run = workspace_run(image, task, restore, history=False)
    assert run["diff"] == ""
    import subprocess
    import tarfile

    from rlvr.sandbox.repo_image import fetch_sdist

    with tarfile.open(fetch_sdist(task.package, task.version)) as archive:
        member = next(m for m in archive.getmembers() if m.name.split("/", 1)[-1] == task.mutation.file)
        pristine = archive.extractfile(member).read().decode()
    probe = """
import json, os, subprocess, sys
req = json.load(sys.stdin)
open("/tmp/s.diff", "w").write(req["setup"])
assert subprocess.run(["git", "apply", "/tmp/s.diff"], cwd="/repo").returncode == 0
needles = [req["gold"].encode(), req["pristine"].encode()]
hits = []
for root, dirs, files in os.walk("/"):
    dirs[:] = [d for d in dirs if os.path.join(root, d) not in ("/proc", "/sys", "/dev")]
    for name in files:
        path = os.path.join(root, name)
        try:
            data = open(path, "rb").read(8 << 20)
        except OSError:
            continue
        if any(n in data for n in needles) or path.endswith(".jsonl") and b"fail_to_pass" in data:
            hits.append(path)
print(json.dumps(hits))
"""
    request = {"setup": task.setup_patch, "gold": task.gold_patch, "pristine": pristine}
    out = subprocess.run(["docker", "run", "-i", "--rm", "--network", "none", image, "python3", "-c", probe],
                         input=__import__("json").dumps(request), capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]", out.stdout
