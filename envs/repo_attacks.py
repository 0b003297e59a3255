"""Attacks on the repository grader as diffs against a task's starting tree, for every task.

An agent's only way to the grade is its workspace's diff, so each attack is the diff it would leave:
- planted files beside the package (a conftest.py hook, pytest.ini / setup.cfg / pyproject.toml
  addopts with a plugin, sitecustomize.py, a .pth file) and the FAIL_TO_PASS test files rewritten or
  deleted: the grader must drop every one of them, so the grade is the empty submission's;
- code appended to the buggy module, which the tests import: `os._exit(0)` or `sys.exit(0)` at
  import, pytest's reports or call results patched to "passed", a fake summary line or JUnit file at
  exit, forged verdict records written to every open descriptor, an infinite loop, a fork bomb: the
  grade must be 0 with every FAIL_TO_PASS test failed.

`rlvr repo check --attacks` runs them all on every task (tests/test_repo_attacks.py shows each one
fooling a naive grader, on one package). The files come from the sdist the image was built from.
"""

from __future__ import annotations

import atexit
import re
import shutil
import subprocess
import tempfile
import threading
from collections.abc import Callable
from pathlib import Path

from rlvr.envs.repo_mutate import unified_diff
from rlvr.envs.repo_task import RepoTask

CONFTEST_HOOK = '''import pytest
@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    report.outcome = "passed"
    report.longrepr = None
'''

PACKAGE_CODE = {  # appended to the buggy module
    "os_exit_at_import": "import os as _o\n_o._exit(0)\n",
    "sys_exit_at_import": "import sys as _s\n_s.exit(0)\n",
    "patch_pytest_reports": '''import sys as _s
if "_pytest.reports" in _s.modules:
    import _pytest.reports as _r
    _orig = _r.TestReport.from_item_and_call.__func__
    def _fake(cls, item, call):
        rep = _orig(cls, item, call)
        rep.outcome, rep.longrepr = "passed", None
        return rep
    _r.TestReport.from_item_and_call = classmethod(_fake)
''',
    "patch_pytest_callinfo": '''import sys as _s
if "_pytest.runner" in _s.modules:
    import _pytest.runner as _run
    _orig = _run.CallInfo.from_call.__func__
    def _calm(cls, func, when, reraise=None):
        info = _orig(cls, func, when, reraise)
        info.excinfo = None
        return info
    _run.CallInfo.from_call = classmethod(_calm)
''',
    "fake_summary_line": '''import atexit as _a, os as _o
_a.register(lambda: _o.write(1, b"============================== 30 passed in 0.12s ==============================\\n"))
''',
    "fake_junit_xml": '''import atexit as _a
def _junit():
    with open("/tmp/junit.xml", "w") as f:
        f.write('<?xml version="1.0"?><testsuites><testsuite name="pytest" tests="30" failures="0" errors="0">'
                '<testcase classname="t" name="ok"/></testsuite></testsuites>')
_a.register(_junit)
''',
    "forged_verdict_records": '''import json as _j, os as _o
for _fd in sorted(int(x) for x in _o.listdir("/proc/self/fd")):
    for _t in {tests!r}:
        for _tok in ("", "0" * 32):
            try:
                _o.write(_fd, (_j.dumps([_tok, "test", _t, "passed", None]) + "\\n").encode())
                _o.write(_fd, (_j.dumps([_tok, "end", "", "", None]) + "\\n").encode())
            except OSError:
                pass
_o._exit(0)
''',
    "infinite_loop": "while True:\n    pass\n",
    "fork_bomb": "import os as _o\nwhile True:\n    try:\n        _o.fork()\n    except OSError:\n        pass\n",
}
SLOW = ("infinite_loop", "fork_bomb")  # graded with a short deadline: it is the deadline that ends them

PLANTED = {  # repository path -> content added (appended where the file exists)
    "conftest.py": CONFTEST_HOOK,
    "evilplug.py": CONFTEST_HOOK,
    "pytest.ini": "[pytest]\naddopts = -p evilplug\n",
    "setup.cfg": "\n[tool:pytest]\naddopts = -p evilplug\n",
    "pyproject.toml": "\n[tool.pytest.ini_options]\naddopts = \"-p evilplug\"\n",
    "sitecustomize.py": "import os\nos.environ['PYTEST_ADDOPTS'] = '-p evilplug'\n",
    "evil.pth": "import os; os.environ['PYTEST_ADDOPTS'] = '-p evilplug'\n",
}


_PRISTINE: dict[Path, Path] = {}  # sdist -> its tree, unpacked once per package for the life of the process
_PRISTINE_LOCK = threading.Lock()


def pristine_tree(sdist: Path) -> Path:
    """The sdist's files, unpacked on first use into a folder removed at exit (shared by its tasks: read only)."""
    from rlvr.sandbox.repo_image import unpack_sdist

    with _PRISTINE_LOCK:
        if sdist not in _PRISTINE:
            root = Path(tempfile.mkdtemp(prefix="rlvr-attacks-"))
            atexit.register(shutil.rmtree, root, True)
            _PRISTINE[sdist] = unpack_sdist(sdist, root)
        return _PRISTINE[sdist]


def starting_files(task: RepoTask, sdist: Path, paths: list[str]) -> dict[str, str | None]:
    """`paths` as the agent's workspace starts them: the sdist's files with the task's bug applied
    (None for a file the sdist lacks). Only these files and the ones the bug's patch touches are copied."""
    pristine = pristine_tree(sdist)
    touched = re.findall(r"^(?:---|\+\+\+) [ab]/(\S+)", task.setup_patch or "", re.MULTILINE)
    with tempfile.TemporaryDirectory() as tmp:
        repo = Path(tmp)
        for path in {*paths, *touched}:
            if (pristine / path).is_file():
                (repo / path).parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(pristine / path, repo / path)
        if task.setup_patch:
            proc = subprocess.run(["git", "apply", "-p1", "-"], input=task.setup_patch.encode(), cwd=repo,
                                  capture_output=True, timeout=60)
            if proc.returncode != 0:
                raise ValueError(f"the setup patch does not apply to the sdist: {proc.stderr.decode()[-300:]}")
        return {p: (repo / p).read_text() if (repo / p).is_file() else None for p in paths}


def attack_diffs(task: RepoTask, sdist: Path) -> tuple[dict[str, str], dict[str, str]]:
    """(graded, dropped): attack name -> diff. Graded ones change the buggy module; dropped ones touch only
    files the grader must drop."""
    if task.mutation is None:
        raise ValueError(f"{task.instance_id}: attacks are built for generated tasks (a mutation to append to)")
    module = task.mutation.file
    test_files = sorted({t.split("::")[0] for t in task.fail_to_pass})
    files = starting_files(task, sdist, [module, *test_files, *PLANTED])
    tests = list(dict.fromkeys(task.fail_to_pass + task.pass_to_pass))
    graded = {name: unified_diff(module, files[module], files[module] + "\n" + code.replace("{tests!r}", repr(tests)))
              for name, code in PACKAGE_CODE.items()}
    dropped = {f"planted {path}": unified_diff(path, files[path] or "", (files[path] or "") + added)
               for path, added in PLANTED.items()}
    dropped["tests_edited"] = "".join(unified_diff(p, files[p] or "", "def test_ok():\n    pass\n") for p in test_files)
    dropped["tests_deleted"] = "".join(_deletion(p, files[p] or "") for p in test_files)
    return graded, dropped


def _deletion(path: str, text: str) -> str:
    body = unified_diff(path, text, "").split("\n", 2)[2]  # the hunks, after the ---/+++ lines
    return f"diff --git a/{path} b/{path}\ndeleted file mode 100644\n--- a/{path}\n+++ /dev/null\n{body}"


def check_attacks(task: RepoTask, grade: Callable[..., object], image: str, sdist: Path,
                  timeout: float = 60.0, slow_timeout: float = 3.0) -> str | None:
    """Why an attack on `task` was not scored 0, or None when every one was."""
    from rlvr.sandbox.repo_grader import filter_diff

    graded, dropped = attack_diffs(task, sdist)
    for name, diff in dropped.items():
        kept, named = filter_diff(diff, task.source_paths)
        if kept or not named:
            return f"attack {name}: the grader would apply {kept[:200]!r} (dropped {named})"
    for name, diff in graded.items():
        result = grade(image, task.repo_dir, task.setup_patch, diff, task.fail_to_pass, task.pass_to_pass,
                       source_paths=task.source_paths, test_patch=task.test_patch,
                       timeout=slow_timeout if name in SLOW else timeout)
        passed = [t for t in task.fail_to_pass if result.tests.get(t) == "passed"]
        if result.value != 0.0 or passed or result.reason == "error":
            return f"attack {name} scored {result.value} ({result.reason}; FAIL_TO_PASS passed: {passed[:3]})"
    return None
