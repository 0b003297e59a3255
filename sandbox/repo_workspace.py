"""An agent's workspace: its own container of a repository task image, with tools that answer fast.

Each episode gets a fresh container started from the task's image (out of a warm pool per
image: `WorkspacePool`, `get_workspace_pool`), never one another episode used. Inside runs the
trusted `workspace_server.py` as root; the agent's commands run as an unprivileged uid with no
network, a wall-clock limit, an output cap and process/file-size limits, and everything a command
started is killed when it returns. The host talks to the server over the container's attach
stream (one JSON line each way, as `docker_backend.DockerWorker` does), so a tool call costs a few
milliseconds rather than a `docker exec` (bench/repo_tasks.py measures both).

`Workspace.start(setup_patch, hide)` puts the bug in (the image holds the pristine package),
deletes the hidden test files and remembers the result as the pristine snapshot; `diff()` is the
repository against that snapshot, which the grader applies in a fresh container of its own. The
hidden tests, the gold patch and a SWE-bench `test_patch` are never sent to this container.

Tool operations never raise on the agent's input: a bad path, a missing file or an edit whose
`old` text is not found exactly once come back as a message. `WorkspaceError` means the
container itself failed (an infrastructure error).
"""

from __future__ import annotations

import atexit
import os
import queue
import secrets
import shlex
import socket
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from rlvr.sandbox.docker_backend import DockerWorker, WorkerError, read_reply
from rlvr.sandbox.repo_image import PYCACHE

LABEL = "rlvr.workspace"
# Each container's agent gets a uid of its own: the kernel counts RLIMIT_NPROC per uid across the
# whole host, so with one shared uid a fork bomb in one episode made every other episode's commands fail
# to fork. Far above any host's users (and docker's subuid ranges); two live containers share one
# with odds near k^2 / 2^31 for k containers.
AGENT_UIDS = range(1 << 30, 1 << 31)
SERVER = (Path(__file__).resolve().parent / "workspace_server.py").read_text()


class WorkspaceError(RuntimeError):
    """The workspace container failed or cannot start: an infrastructure error, not the agent's doing."""


@dataclass(frozen=True)
class WorkspaceLimits:
    memory_mb: int = 2048
    pids: int = 256
    cpus: float = 2.0
    tmp_mb: int = 256
    command_timeout: float = 30.0   # seconds per bash command
    test_timeout: float = 120.0     # seconds per run_tests
    output_limit: int = 8000        # characters of command output the agent gets back
    python: str = "python3"         # the image's interpreter, for the server and the tests


def container_options(image: str, repo_dir: str, limits: WorkspaceLimits, agent_uid: int) -> dict:
    """`docker run` settings of a workspace container: no network, memory/pids/cpu limits, few caps."""
    from docker.types import LogConfig

    memory = f"{limits.memory_mb + limits.tmp_mb}m"
    return dict(
        image=image, command=[limits.python, "-I", "-B", "-c", SERVER, repo_dir, str(agent_uid)],
        stdin_open=True, detach=False, tty=False, user="0:0", working_dir="/", environment={},
        network_mode="none", mem_limit=memory, memswap_limit=memory, pids_limit=limits.pids,
        nano_cpus=int(limits.cpus * 1e9),
        # the grader's bytecode cache holds the released code and tests compiled: covered, not merely unreadable
        tmpfs={"/tmp": f"rw,nosuid,nodev,size={limits.tmp_mb}m,mode=1777", PYCACHE: "ro,size=1k,mode=0700"},
        shm_size="16m", ipc_mode="private",
        cap_drop=["ALL"], cap_add=["SETUID", "SETGID", "KILL", "CHOWN", "DAC_OVERRIDE", "FOWNER"],
        security_opt=["no-new-privileges"], init=True, log_config=LogConfig(type="none"), auto_remove=True,
        labels={LABEL: "1", f"{LABEL}.owner": f"{socket.gethostname()}:{os.getpid()}"},
    )


class _Container(DockerWorker):
    """A started workspace container and its attach socket (the sandbox worker's transport)."""

    def __init__(self, client, image: str, repo_dir: str, limits: WorkspaceLimits, start_timeout: float = 60.0):
        self.limits = limits
        self.agent_uid = AGENT_UIDS.start + secrets.randbelow(len(AGENT_UIDS))
        self._client = client
        self._buffer, self._stdout, self._stderr = bytearray(), bytearray(), bytearray()
        self.container = client.containers.create(**container_options(image, repo_dir, limits, self.agent_uid))
        self.ident = self.container.short_id
        try:
            raw = client.api.attach_socket(self.container.id, params={"stdin": 1, "stdout": 1, "stderr": 1,
                                                                      "stream": 1})
            self._sock, self._raw = getattr(raw, "_sock", raw), raw
            self.container.start()
            hello = read_reply(self._stdout, time.monotonic() + start_timeout, self._receive, "the workspace")
            if not hello.get("ready"):
                raise WorkerError(f"the workspace server did not start: {hello}")
        except BaseException:
            self.close()
            raise


class Workspace:
    """One episode's container. Not thread-safe: one call at a time (an episode's tools are sequential)."""

    def __init__(self, container: _Container, repo_dir: str, limits: WorkspaceLimits):
        self._container, self.repo_dir, self.limits = container, repo_dir, limits
        self._lock = threading.Lock()
        self.closed = False

    @property
    def ident(self) -> str:
        return self._container.ident

    @property
    def agent_uid(self) -> int:
        """The unprivileged uid the agent's commands run as (this container's own)."""
        return self._container.agent_uid

    def request(self, op: str, timeout: float = 60.0, **fields) -> dict:
        """One request to the server; WorkspaceError when the container broke or went silent."""
        if self.closed:
            raise WorkspaceError("the workspace is closed")
        with self._lock:
            try:
                reply = self._container.request({"op": op, **fields}, timeout)
            except WorkerError as exc:
                raise WorkspaceError(str(exc)) from None
        if reply.get("server_error"):
            raise WorkspaceError(f"the workspace server failed on {op}: {reply['error']}")
        return reply

    # -- setting up ------------------------------------------------------------------------

    def start(self, setup_patch: str = "", hide: tuple[str, ...] = ()) -> int:
        """Put the task's starting state in place and snapshot it; returns the number of files."""
        if setup_patch:
            reply = self.request("apply", patch=setup_patch)
            if "error" in reply:
                raise WorkspaceError(f"the task's setup patch does not apply: {reply['error']}")
        if hide:
            reply = self.request("remove", paths=list(hide))
            if "error" in reply:
                raise WorkspaceError(f"cannot hide {hide}: {reply['error']}")
        return self.request("setup", timeout=120.0)["files"]

    # -- tools -----------------------------------------------------------------------------

    def bash(self, command: str, timeout: float | None = None) -> dict:
        """Run `command` with bash in the repository as the agent: {output, exit, timed_out, truncated, seconds}."""
        timeout = float(timeout or self.limits.command_timeout)
        return self.request("run", timeout=timeout + 30.0, command=command, limit_s=timeout,
                            limit=self.limits.output_limit)

    def view(self, path: str, start: int = 1, end: int | None = None) -> str:
        """Lines start..end (1-based, inclusive) of a repository file, numbered; or an error message."""
        reply = self.request("read", path=path)
        if "error" in reply:
            return f"Error: {reply['error']}"
        lines = reply["content"].splitlines()
        if not lines:
            return f"({path} is empty)"
        start = max(1, int(start))
        end = len(lines) if end is None or int(end) < 1 else min(int(end), len(lines))
        if start > len(lines):
            return f"Error: {path} has {len(lines)} lines; start {start} is past the end"
        width = len(str(end))
        text = "\n".join(f"{n:>{width}}  {lines[n - 1]}" for n in range(start, end + 1))
        return clip(text, self.limits.output_limit)

    def edit(self, path: str, old: str, new: str) -> str:
        """Replace the one exact occurrence of `old` in a repository file with `new`; a message either way."""
        if not old:
            return "Error: `old` is empty; give the exact text to replace (copy it from view_file)"
        reply = self.request("read", path=path)
        if "error" in reply:
            return f"Error: {reply['error']}"
        text = reply["content"]
        count = text.count(old)
        if count == 0:
            return (f"Error: the text to replace was not found in {path}; nothing changed. It must match "
                    "exactly, whitespace and indentation included (view the lines first).")
        if count > 1:
            return (f"Error: the text to replace occurs {count} times in {path}; nothing changed. Include more "
                    "surrounding lines so that it occurs once.")
        written = self.request("write", path=path, content=text.replace(old, new, 1))
        if "error" in written:
            return f"Error: {written['error']}"
        line = text[: text.index(old)].count("\n") + 1
        return f"Edited {path}: replaced {old.count(chr(10)) + 1} line(s) at line {line} with {new.count(chr(10)) + 1}."

    def run_tests(self, selector: str = "", timeout: float | None = None) -> dict:
        """pytest on `selector` (node ids, paths or `-k` expressions, shell-quoted) or the whole suite."""
        try:
            args = shlex.split(selector or "")
        except ValueError as exc:
            return {"output": f"Error: cannot read the selector: {exc}", "exit": 2, "timed_out": False,
                    "truncated": False, "seconds": 0.0}
        command = " ".join(shlex.quote(a) for a in [self.limits.python, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                                                    "--color=no", *args])
        return self.bash(command, timeout or self.limits.test_timeout)

    def diff(self) -> str:
        """The repository against the pristine snapshot, as a unified diff (paths a/<file>, b/<file>)."""
        return self.request("diff", timeout=120.0)["diff"]

    def close(self) -> None:
        """Remove the container (idempotent, never raises)."""
        if not self.closed:
            self.closed = True
            self._container.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def clip(text: str, limit: int) -> str:
    """`text` cut to `limit` characters (head and tail kept), saying how much was cut."""
    if len(text) <= limit:
        return text
    keep = max(0, limit - 60)
    head, tail = text[: keep * 3 // 4], text[len(text) - keep // 4:]
    return f"{head}\n... [{len(text) - len(head) - len(tail)} characters cut] ...\n{tail}"


class WorkspacePool:
    """`size` started, never-used containers of one image; `acquire()` hands one out and starts its
    replacement in the background, so an episode's start does not wait for `docker run`."""

    def __init__(self, image: str, repo_dir: str = "/repo", size: int = 2, limits: WorkspaceLimits | None = None,
                 client=None):
        from rlvr.sandbox.image import docker_client, image_exists

        self.image, self.repo_dir, self.size = image, repo_dir, max(1, int(size))
        self.limits = limits or WorkspaceLimits()
        try:
            self._client = client or docker_client()
        except Exception as exc:
            raise WorkspaceError(f"no Docker engine answers ({type(exc).__name__}: {str(exc)[:160]})") from None
        if not image_exists(self._client, image):
            raise WorkspaceError(f"the task image {image} is missing (build it with `rlvr repo build`)")
        self._ready: queue.Queue = queue.Queue()
        self._lock = threading.Lock()
        self._closed = False
        self._last_error: str | None = None
        self._owner = os.getpid()
        for _ in range(self.size):
            self._refill()
        atexit.register(self._close_at_exit)

    def _refill(self) -> None:
        threading.Thread(target=self._start_one, daemon=True, name="rlvr-workspace-start").start()

    def _start_one(self) -> None:
        try:
            container = _Container(self._client, self.image, self.repo_dir, self.limits)
        except Exception as exc:
            self._last_error = f"{type(exc).__name__}: {str(exc)[:300]}"
            self._ready.put(None)
            return
        with self._lock:
            if self._closed:
                container.close()
                return
        self._ready.put(container)

    def acquire(self, timeout: float = 120.0) -> Workspace:
        """A fresh workspace; WorkspaceError if none starts in `timeout` seconds."""
        deadline = time.monotonic() + timeout
        failures = 0
        while not self._closed:
            try:
                container = self._ready.get(timeout=max(0.01, deadline - time.monotonic()))
            except queue.Empty:
                break
            self._refill()
            if container is not None:
                return Workspace(container, self.repo_dir, self.limits)
            failures += 1
            if failures >= 3 or time.monotonic() >= deadline:
                break
        raise WorkspaceError(f"no workspace container of {self.image} could start: {self._last_error or 'timed out'}")

    def close(self) -> None:
        """Remove the idle containers (idempotent). Workspaces handed out are their owners' to close."""
        with self._lock:
            self._closed = True
        while True:
            try:
                container = self._ready.get_nowait()
            except queue.Empty:
                return
            if container is not None:
                container.close()

    def _close_at_exit(self) -> None:
        if os.getpid() == self._owner:
            self.close()


_POOLS: dict[tuple, WorkspacePool] = {}
_POOLS_LOCK = threading.Lock()


def get_workspace_pool(image: str, repo_dir: str = "/repo", size: int = 2,
                       limits: WorkspaceLimits | None = None) -> WorkspacePool:
    """The shared pool of this image and configuration in this process (started on first use)."""
    key = (os.getpid(), image, repo_dir, size, limits or WorkspaceLimits())
    with _POOLS_LOCK:
        pool = _POOLS.get(key)
        if pool is None or pool._closed:
            pool = _POOLS[key] = WorkspacePool(image, repo_dir, size, limits)
        return pool


__all__ = ["Workspace", "WorkspaceError", "WorkspaceLimits", "WorkspacePool", "clip", "container_options",
           "get_workspace_pool"]
