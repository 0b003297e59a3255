"""The grader's pytest plugin: per-test verdicts on a private channel (runs inside task containers).

`repo_worker.py` imports this module before the repository is copied, then forks the test
process, calls `arm()` and runs pytest with `-p repo_plugin`, so the plugin is registered before
any conftest or test module, and hence before any package code, is imported. The verdict of a
test is decided here from pytest's own CallInfo of its setup, call and teardown phases (not from
its report, the exit status or anything printed): it passes only when all three ran and none
raised (a skip is a failure). Each verdict goes to a pipe that only the worker reads, as one
JSON line carrying a random token the worker chose for this run; the worker drops lines without it.

Tamper checks, before every verdict and at the end: the pytest, pluggy and unittest functions
that run a test and turn its outcome into a result (see `_guarded`) and the builtins must be
the objects they were when the plugin armed, and every registered pytest plugin must be pytest's
own, this one, or a conftest.py inside the repository (conftests are never taken from an agent's
diff). On any difference the plugin reports `tamper` and the worker fails every test.
What it cannot do: package code runs in this process and can, with intent, find the token and
the pipe (they are in this process's memory) or rewrite this plugin's own functions.
"""

from __future__ import annotations

import builtins
import json
import os
import re
import sys
import types

import pytest

_state: dict = {}


def _guarded() -> dict[str, object]:
    import unittest.case

    import _pytest.outcomes
    import _pytest.python
    import _pytest.reports
    import _pytest.runner
    import _pytest.unittest
    import pluggy._callers
    import pluggy._hooks
    import pluggy._manager

    names = {
        _pytest.runner: ("runtestprotocol", "call_and_report", "call_runtest_hook", "CallInfo",
                         "pytest_runtest_call", "pytest_runtest_setup", "pytest_runtest_teardown"),
        _pytest.runner.CallInfo: ("from_call",),
        _pytest.reports: ("TestReport",),
        _pytest.python.Function: ("runtest", "setup"),
        _pytest.python: ("pytest_pyfunc_call",),
        _pytest.unittest.TestCaseFunction: ("runtest",),
        _pytest.outcomes: ("Skipped", "Failed", "Exit", "OutcomeException"),
        pluggy._callers: ("_multicall",),
        pluggy._hooks.HookCaller: ("__call__",),
        pluggy._manager.PluginManager: ("_hookexec",),
        unittest.case.TestCase: ("run",),
    }
    pairs: dict[str, object] = {}
    for owner, attrs in names.items():
        for attr in attrs:
            space = vars(owner)
            pairs[f"{getattr(owner, '__name__', owner)}.{attr}"] = space.get(attr)
    for name, value in vars(unittest.case.TestCase).items():
        if name.startswith(("assert", "fail", "_base", "_get")):
            pairs[f"unittest.TestCase.{name}"] = value
    for name, value in vars(builtins).items():
        if not name.startswith("__"):
            pairs[f"builtins.{name}"] = value
    pairs["reports.TestReport.from_item_and_call"] = vars(_pytest.reports.TestReport).get("from_item_and_call")
    return pairs


def arm(fd: int, token: str, root: str, wanted: list[str] | None) -> None:
    """Called in the test process before pytest starts: where to report, and what to run."""
    _state.update(fd=fd, token=token, root=os.path.realpath(root), wanted=None if wanted is None else set(wanted),
                  snapshot=_guarded(), phases={}, tampered=None, pytest_dir=os.path.dirname(_pytest_dir()))


def _emit(kind: str, nodeid: str = "", verdict: str = "", detail: object = None) -> None:
    line = json.dumps([_state["token"], kind, nodeid, verdict, detail]) + "\n"
    data = line.encode()
    while data:
        data = data[os.write(_state["fd"], data):]


def _check(config) -> str | None:
    if _state.get("tampered"):
        return _state["tampered"]
    now = _guarded()
    for name, value in _state["snapshot"].items():
        if now.get(name, value) is not value:
            return f"{name} was replaced"
    own = sys.modules.get(__name__)
    vetted = _state.setdefault("vetted", {})
    for plugin in config.pluginmanager.get_plugins():
        if plugin is own or plugin is None or vetted.get(id(plugin)) is plugin:
            continue
        vetted[id(plugin)] = plugin
        if isinstance(plugin, types.ModuleType):
            module, path = plugin.__name__, getattr(plugin, "__file__", None) or ""
            if module.startswith(("_pytest.", "pytest")) and path.startswith(_state["pytest_dir"]):
                continue
            real = os.path.realpath(path)
            if os.path.basename(real) == "conftest.py" and real.startswith(_state["root"] + os.sep):
                continue
            return f"unexpected pytest plugin module {module}"
        kind = plugin if isinstance(plugin, type) else type(plugin)
        if not kind.__module__.startswith("_pytest."):
            return f"unexpected pytest plugin {kind.__module__}.{kind.__qualname__}"
    return None


def _pytest_dir() -> str:
    import _pytest

    return os.path.dirname(os.path.realpath(_pytest.__file__))


def pytest_collection_modifyitems(session, config, items):
    wanted = _state.get("wanted")
    if wanted is None:
        return
    items[:] = [item for item in items if item.nodeid in wanted]


ADDRESS = re.compile(r"\b0x[0-9a-fA-F]{6,}\b")


def _describe(call, root: str) -> dict:
    """What failed, for problem statements: exception, message, and the test-side frames."""
    excinfo = call.excinfo
    frames = []
    for entry in excinfo.traceback:
        path = os.path.realpath(str(entry.path))
        inside = path.startswith(root + os.sep)
        rel = os.path.relpath(path, root) if inside else os.path.basename(path)
        frame = {"file": rel, "line": entry.lineno + 1, "function": entry.name, "repo": inside}
        try:
            frame["source"] = str(entry.statement).strip()[:300]
        except Exception:  # noqa: BLE001 - source may be unavailable
            frame["source"] = ""
        frames.append(frame)
    try:
        message = str(excinfo.value)
    except Exception:  # noqa: BLE001 - a broken __str__ is the package's business
        message = ""
    message = ADDRESS.sub("0x...", message)  # "<function f at 0x7f..>": the same failure reads the same each run
    return {"when": call.when, "type": excinfo.typename, "message": message[:2000], "frames": frames[-12:]}


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_makereport(item, call):
    """Record each phase's outcome from pytest's CallInfo (no report is trusted)."""
    phases = _state["phases"].setdefault(item.nodeid, {})
    phases[call.when] = None if call.excinfo is None else _describe(call, _state["root"])
    if call.when != "teardown":
        return None
    tampered = _check(item.config)
    if tampered:
        _state["tampered"] = tampered
        _emit("tamper", item.nodeid, "", tampered)
        return None
    ok = all(k in phases for k in ("setup", "call", "teardown")) and not any(phases.values())
    failure = next((v for v in phases.values() if v), None)
    _emit("test", item.nodeid, "passed" if ok else "failed", failure)
    return None



def pytest_sessionfinish(session, exitstatus):
    tampered = _check(session.config)
    if tampered:
        _emit("tamper", "", "", tampered)
    _emit("end")
