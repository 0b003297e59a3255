"""Grading a repository fix where the agent cannot reach it.

`grade()` takes plain values (the sandbox knows nothing of envs/): the task image, the setup
patch that puts the bug in, the agent's diff against the workspace's pristine snapshot, the
FAIL_TO_PASS and PASS_TO_PASS node ids and, for SWE-bench-style records, the hidden test patch.

1. The diff is filtered (`filter_diff`): only `.py` files under the task's `source_paths` may
   change. Test files, conftest.py, setup.py, pytest/tox/setup configuration, sitecustomize,
   usercustomize, .pth files and anything else are dropped and listed in `RepoGrade.dropped`.
2. A warm, never-used container of the task image (`--network none`, no capabilities beyond
   setuid/setgid/kill, read-only root, a pids limit) gets one request: its worker
   (`repo_worker.py`) copies the pristine repository, applies setup patch, kept diff and test
   patch, and runs exactly the listed tests as an unprivileged user with the grader's own
   pytest ini and plugin (`repo_plugin.py`), which reports each test's verdict with a random
   token on a private pipe. Exit status and printed text are never read as verdicts.
3. A test with no verdict (missing, crashed run, deadline) has failed. A tamper report fails all.
4. Before replying, the worker kills every process of the test user, removes the copy and the
   scratch, and looks for anything the test user left (a process, a file of its own in /tmp or
   /dev/shm, a SysV IPC object). A container with nothing left grades again (`reuse`, the default):
   what the next grade starts from is then what a fresh container holds, a read-only image and a
   fresh copy of the pristine repository, less the start of a container and an interpreter, which
   on two CPUs cost as much as the grade itself. Any leftover, a host timeout or an error, and the
   container is removed and a fresh one started in the background. `reuse=False` (or
   `RLVR_REPO_REUSE=0`) gives every grade a never-used container.

The deadline is kept twice: by the worker (kills the test user's processes) and here (kills
the container `timeout + 15` s after the request), so a grade always comes back.
"""

from __future__ import annotations

import atexit
import json
import os
import posixpath
import queue
import re
import secrets
import subprocess
import threading
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

WORKER = ["python3", "-I", "-B", "/opt/rlvr-repo/repo_worker.py"]
CONFIG_FILES = {"setup.py", "setup.cfg", "pyproject.toml", "tox.ini", "pytest.ini", ".pytest.ini", "conftest.py",
                "sitecustomize.py", "usercustomize.py", "noxfile.py", "manifest.in"}
TEST_DIRS = {"test", "tests", "testing"}
HOST_MARGIN = 15.0
RUNTIME_INFO = ("seconds", "worker_seconds", "container", "reused")  # in a grade's info, not about the diff


@dataclass
class RepoGrade:
    """`value` in [0, 1]; `reason`: passed | tests_failed | patch_failed | timeout | tampered | error;
    `tests`: node id -> passed | failed (a test without a verdict is failed); `dropped`: diff paths
    not applied, with why."""

    value: float
    reason: str
    tests: dict[str, str] = field(default_factory=dict)
    dropped: list[str] = field(default_factory=list)
    info: dict[str, Any] = field(default_factory=dict)


# --- which changes count ---------------------------------------------------------------


def split_diff(diff: str) -> list[tuple[list[str], str]]:
    """A unified diff as (paths it touches, its text) per file. Hunks are read by their line
    counts, as git reads them, so a removed line "--- x" inside a hunk starts no new file."""
    lines = diff.splitlines(keepends=True)
    pieces: list[list[str]] = []
    old = new = 0
    in_git_header = False
    for line in lines:
        if old > 0 or new > 0:
            pieces[-1].append(line)
            tag = line[:1]
            if tag in (" ", "\n", ""):
                old, new = old - 1, new - 1
            elif tag == "-":
                old -= 1
            elif tag == "+":
                new -= 1
            continue
        hunk = re.match(r"@@ -\d+(?:,(\d+))? \+\d+(?:,(\d+))? @@", line)
        if hunk and pieces:
            old = int(hunk.group(1)) if hunk.group(1) is not None else 1
            new = int(hunk.group(2)) if hunk.group(2) is not None else 1
            pieces[-1].append(line)
            in_git_header = False
            continue
        if line.startswith("diff --git ") or (line.startswith("--- ") and not in_git_header) or not pieces:
            pieces.append([])
            in_git_header = line.startswith("diff --git ")
        pieces[-1].append(line)
    out = []
    for piece in pieces:
        paths = []
        for line in piece:
            if line.startswith("@@"):
                break
            if line.startswith("diff --git "):
                paths += [p for p in line[len("diff --git "):].strip().split(" ") if p]
            elif line.startswith(("--- ", "+++ ")):
                paths.append(line[4:].rstrip("\n").split("\t")[0])
            elif line.startswith(("rename from ", "rename to ", "copy from ", "copy to ")):
                paths.append(line.rstrip("\n").split(" ", 2)[2])
        clean = {p[2:] if p.startswith(("a/", "b/")) else p for p in paths if p != "/dev/null"}
        out.append((sorted(clean), "".join(piece)))
    return out


def why_not_allowed(path: str, source_paths: Sequence[str]) -> str | None:
    """None when an agent may change `path`; else why its change is dropped."""
    norm = posixpath.normpath(path)
    if norm.startswith(("/", "../")) or norm == ".." or "\\" in path or '"' in path:
        return "outside the repository"
    parts = norm.split("/")
    base = parts[-1].lower()
    if base in CONFIG_FILES or base.endswith((".pth", ".ini", ".cfg", ".toml")):
        return "configuration"
    if any(p.lower() in TEST_DIRS for p in parts[:-1]) or base.startswith("test_") or base.endswith("_test.py") \
            or base == "tests.py":
        return "test file"
    if not base.endswith(".py"):
        return "not a Python source file"
    for root in source_paths:
        root = posixpath.normpath(root)
        if norm == root or norm.startswith(root.rstrip("/") + "/"):
            return None
    return "outside the package"


def filter_diff(diff: str, source_paths: Sequence[str]) -> tuple[str, list[str]]:
    """(the part of `diff` that may be applied, 'path (why)' for each dropped file). The worker
    also refuses a kept diff that changes any file it does not name (`diff_paths`)."""
    kept, dropped = [], []
    for paths, text in split_diff(diff):
        text = text if text.endswith("\n") else text + "\n"
        reasons = [(p, why_not_allowed(p, source_paths)) for p in paths] or [("?", "no file name")]
        bad = [f"{p} ({why})" for p, why in reasons if why]
        if bad or "GIT binary patch" in text or "\nBinary files " in text:
            dropped.extend(bad or [f"{paths[0] if paths else '?'} (binary)"])
        else:
            kept.append(text)
    return "".join(kept), dropped


# --- containers ------------------------------------------------------------------------


class WorkerContainer:
    """One task container running repo_worker.py, spoken to over its stdin/stdout."""

    def __init__(self, image: str, memory_mb: int = 2048, pids: int = 512, cpus: float | None = None,
                 repo_dir: str = "/repo"):
        self.image = image
        self.name = f"rlvr-repo-{secrets.token_hex(6)}"
        argv = ["docker", "run", "-i", "--rm", "--name", self.name, "--network", "none", "--init",
                "--cap-drop", "ALL", "--cap-add", "SETUID", "--cap-add", "SETGID", "--cap-add", "KILL",
                "--cap-add", "CHOWN", "--cap-add", "DAC_OVERRIDE", "--cap-add", "FOWNER", "--security-opt", "no-new-privileges", "--read-only",
                "--tmpfs", "/tmp:rw,exec,nosuid,size=1024m,mode=1777", "--pids-limit", str(pids),
                "--memory", f"{memory_mb}m", "--memory-swap", f"{memory_mb}m", "--log-driver", "none",
                "-e", f"RLVR_REPO_DIR={repo_dir}"]
        if cpus:
            argv += ["--cpus", str(cpus)]
        self.proc = subprocess.Popen(argv + [image] + WORKER, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE)
        self.ready = False
        self.grades = 0

    def wait_ready(self, timeout: float = 120.0) -> None:
        line = self._readline(timeout)
        if line.strip() != "READY":
            err = self._stderr_tail()
            self.close()
            raise RuntimeError(f"task container did not start: {line.strip()[:200]} {err}".strip())
        self.ready = True

    def _stderr_tail(self) -> str:
        if self.proc.poll() is None:
            return ""
        try:
            return self.proc.stderr.read().decode(errors="replace").strip()[-300:]
        except (OSError, ValueError):
            return ""

    def _readline(self, timeout: float) -> str:
        box: list[bytes] = []
        reader = threading.Thread(target=lambda: box.append(self.proc.stdout.readline()), daemon=True)
        reader.start()
        reader.join(timeout)
        if reader.is_alive():
            self.kill()
            reader.join(5)
            raise TimeoutError(f"no answer from {self.name} in {timeout:.0f} s")
        return box[0].decode(errors="replace") if box else ""

    def request(self, payload: dict, timeout: float) -> dict:
        if not self.ready:
            self.wait_ready()
        self.grades += 1
        self.proc.stdin.write((json.dumps(payload) + "\n").encode())
        self.proc.stdin.flush()
        line = self._readline(timeout)
        if not line:
            raise RuntimeError(f"task container {self.name} ended without a reply {self._stderr_tail()}")
        return json.loads(line)

    def kill(self) -> None:
        subprocess.run(["docker", "kill", self.name], capture_output=True, timeout=60)
        self.proc.kill()

    def close(self) -> None:
        try:
            if self.proc.poll() is None:
                self.proc.stdin.close()
                try:
                    self.proc.wait(10)
                except subprocess.TimeoutExpired:
                    self.kill()
        except OSError:
            self.kill()


class RepoGrader:
    """Grades in warm containers of each task image: `warm` started ahead; with `reuse`, a container the tests
    left clean grades again (at most `keep` wait idle per image), else each is used once and replaced."""

    def __init__(self, warm: int = 2, memory_mb: int = 2048, pids: int = 512, reuse: bool = True, keep: int = 16):
        self.warm, self.reuse, self.keep = warm, reuse, keep
        self.memory_mb, self.pids = memory_mb, pids
        self._ready: dict[tuple[str, str], queue.Queue] = {}
        self._lock = threading.Lock()
        self._closed = False

    def prewarm(self, image: str, count: int | None = None, repo_dir: str = "/repo") -> None:
        """Start containers of `image` now, so the next grades need not wait for one."""
        for _ in range(self.warm if count is None else count):
            self._spawn(image, repo_dir)

    def _spawn(self, image: str, repo_dir: str = "/repo") -> None:
        if self._closed:
            return
        container = WorkerContainer(image, self.memory_mb, self.pids, repo_dir=repo_dir)

        def ready():
            try:
                container.wait_ready()
            except (RuntimeError, TimeoutError, OSError):
                return
            if self._closed:
                container.close()
                return
            self._queue(image, repo_dir).put(container)

        threading.Thread(target=ready, daemon=True).start()

    def _queue(self, image: str, repo_dir: str) -> queue.Queue:
        with self._lock:
            return self._ready.setdefault((image, repo_dir), queue.Queue())

    def _take(self, image: str, repo_dir: str) -> WorkerContainer:
        ready = self._queue(image, repo_dir)
        try:
            container = ready.get_nowait()
        except queue.Empty:
            container = WorkerContainer(image, self.memory_mb, self.pids, repo_dir=repo_dir)
            container.wait_ready()
        if self.warm and (not self.reuse or ready.qsize() < self.warm):  # reused ones come back
            self._spawn(image, repo_dir)
        return container

    def _give_back(self, container: WorkerContainer, image: str, repo_dir: str, clean: bool) -> None:
        ready = self._queue(image, repo_dir)
        if clean and self.reuse and not self._closed and ready.qsize() < self.keep:
            ready.put(container)
        else:
            threading.Thread(target=container.close, daemon=True).start()

    def grade(self, image: str, repo_dir: str, setup_patch: str, agent_diff: str, fail_to_pass: Iterable[str],
              pass_to_pass: Iterable[str], *, source_paths: Sequence[str] = (), test_patch: str = "",
              mode: str = "all", timeout: float = 120.0) -> RepoGrade:
        if mode not in ("all", "fraction"):
            raise ValueError(f"mode must be 'all' or 'fraction'; got {mode!r}")
        f2p, p2p = list(fail_to_pass), list(pass_to_pass)
        expected = list(dict.fromkeys(f2p + p2p))
        kept, dropped = filter_diff(agent_diff or "", source_paths)
        started = time.monotonic()
        info: dict[str, Any] = {"dropped": dropped, "applied_bytes": len(kept)}
        if not expected:
            return RepoGrade(0.0, "error", {}, dropped, {**info, "error": "the task lists no tests"})
        try:
            container = self._take(image, repo_dir)
        except (RuntimeError, TimeoutError, OSError) as exc:
            return RepoGrade(0.0, "error", {}, dropped, {**info, "error": str(exc)[:500]})
        payload = {"setup_patch": setup_patch, "diff": kept, "test_patch": test_patch, "tests": expected,
                   "timeout": timeout, "diff_paths": sorted({p for paths, _ in split_diff(kept) for p in paths})}
        reply: dict = {}
        try:
            reply = container.request(payload, timeout + HOST_MARGIN)
        except TimeoutError as exc:
            reply = {"tests": {}, "timed_out": True, "host_timeout": str(exc)}
        except (RuntimeError, OSError, ValueError) as exc:
            return RepoGrade(0.0, "error", {}, dropped, {**info, "error": str(exc)[:500]})
        finally:
            clean = reply.get("clean") is True and not reply.get("error")
            self._give_back(container, image, repo_dir, clean)
        info.update(seconds=round(time.monotonic() - started, 3), container=container.name,
                    reused=container.grades > 1, leftovers=reply.get("leftovers") or [])
        return judge(reply, f2p, p2p, dropped, mode, info)

    def close(self) -> None:
        self._closed = True
        with self._lock:
            queues = list(self._ready.values())
        for q in queues:
            while True:
                try:
                    q.get_nowait().close()
                except queue.Empty:
                    break


def judge(reply: dict, f2p: list[str], p2p: list[str], dropped: list[str], mode: str,
          info: dict[str, Any]) -> RepoGrade:
    """Turn the worker's reply into a grade: missing verdicts fail; tampering fails everything."""
    expected = list(dict.fromkeys(f2p + p2p))
    if reply.get("error"):
        return RepoGrade(0.0, "error", {}, dropped, {**info, "error": reply["error"]})
    if reply.get("patch_error"):
        which = reply.get("which")
        reason = "patch_failed" if which == "diff" else "error"
        return RepoGrade(0.0, reason, {t: "failed" for t in expected}, dropped,
                         {**info, "error": reply["patch_error"]})
    got = reply.get("tests") or {}
    tampered = reply.get("tampered")
    verdicts = {t: ("passed" if got.get(t) == "passed" and not tampered else "failed") for t in expected}
    passed = sum(v == "passed" for v in verdicts.values())
    fraction = passed / len(expected)
    value = fraction if mode == "fraction" else float(passed == len(expected))
    if tampered:
        reason = "tampered"
    elif passed == len(expected):
        reason = "passed"
    elif reply.get("timed_out"):
        reason = "timeout"
    else:
        reason = "tests_failed"
    info.update(passed=passed, total=len(expected), fraction=fraction,
                fail_to_pass_passed=sum(verdicts[t] == "passed" for t in f2p),
                missing=[t for t in expected if t not in got], tampered=tampered,
                timed_out=bool(reply.get("timed_out")), ended=bool(reply.get("ended")),
                worker_seconds=reply.get("duration"), output_tail=(reply.get("output_tail") or "")[-2000:],
                failures={t: d for t, d in (reply.get("details") or {}).items() if t in verdicts})
    return RepoGrade(value, reason, verdicts, dropped, info)


_default: RepoGrader | None = None
_default_lock = threading.Lock()


def default_grader() -> RepoGrader:
    """The process-wide grader (warm containers per image), closed at exit."""
    global _default
    with _default_lock:
        if _default is None:
            _default = RepoGrader(warm=int(os.environ.get("RLVR_REPO_WARM", "2")),
                                  reuse=os.environ.get("RLVR_REPO_REUSE", "1") != "0")
            atexit.register(_default.close)
        return _default


def grade(image: str, repo_dir: str, setup_patch: str, agent_diff: str, fail_to_pass: Iterable[str],
          pass_to_pass: Iterable[str], *, source_paths: Sequence[str] = (), test_patch: str = "",
          mode: str = "all", timeout: float = 120.0) -> RepoGrade:
    """Grade `agent_diff` for one task in a container of `image` that no workspace ever was (module docstring)."""
    return default_grader().grade(image, repo_dir, setup_patch, agent_diff, fail_to_pass, pass_to_pass,
                                  source_paths=source_paths, test_patch=test_patch, mode=mode, timeout=timeout)

