"""One warm, locked-down container running the trusted job server.

The host talks to the server over the container's attach stream (stdin in, multiplexed
stdout/stderr out), so a job costs a line each way instead of a `docker exec` or a
container start. The container is created with `stdin_once`: when the host process goes
away, even by SIGKILL, the server sees EOF, exits, and the container removes itself.
"""

from __future__ import annotations

import json
import os
import socket
import struct
import time

from rlvr.sandbox.protocol import Limits

SERVER_COMMAND = ["python3", "-I", "-B", "/opt/rlvr/harness.py", "serve"]
LABEL = "rlvr.sandbox"
# Job processes need no capability; the server needs these three to switch to the job user
# and to kill what that user left behind. Everything else is dropped.
SERVER_CAPS = ["SETUID", "SETGID", "KILL"]
HEADROOM_MB = 192  # server, tester and scratch tmpfs on top of the job's own memory
LANGUAGE_REPOSITORY = "rlvr-sandbox-langs"  # images whose jobs run compiled binaries (image.py)


class WorkerError(RuntimeError):
    """The worker itself failed (engine gone, container died): an infrastructure error."""


class ReplyTimeout(WorkerError):
    """No reply came in time."""


class VerdictOverdue(Exception):
    """The server took the job but gave no verdict by its due time: the job holds the container."""


def await_verdict(read_line, due: float, budget: float) -> dict:
    """The verdict on a job just sent: the server acknowledges it within `budget` seconds (else the server is
    broken: WorkerError), then the verdict must come within `due` seconds of that (else VerdictOverdue).

    The server's own deadline runs inside the container, where a fork bomb can starve it of CPU for
    seconds (the bomb's processes share its cgroup, whose share the scheduler computes from averaged load),
    so the host keeps the outer one.
    """
    accepted = read_line(time.monotonic() + budget)
    if accepted.get("accepted") is not True:
        raise WorkerError(f"the job server did not take the job: {str(accepted)[:200]}")
    try:
        return read_line(time.monotonic() + due)
    except ReplyTimeout:
        raise VerdictOverdue(f"no verdict {due:g} s after the job started") from None


def read_reply(buffer: bytearray, deadline: float, fill, who: str) -> dict:
    """Pop one JSON line from `buffer`, calling `fill(seconds_left)` to read more, until `deadline`.

    Both backends talk to the same job server, one JSON object per line; only how bytes
    arrive differs (a Docker attach socket, a pipe).
    """
    while True:
        newline = buffer.find(b"\n")
        if newline >= 0:
            line = bytes(buffer[:newline])
            del buffer[:newline + 1]
            try:
                return json.loads(line)
            except ValueError:
                raise WorkerError(f"garbled reply from {who}: {line[:200]!r}") from None
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise ReplyTimeout(f"{who} did not answer in time")
        fill(remaining)


def container_options(image: str, limits: Limits) -> dict:
    """`docker run` settings of a sandbox container (kept in one place so tests can read them)."""
    from docker.types import LogConfig

    memory = f"{limits.memory_mb + limits.tmp_mb + HEADROOM_MB}m"
    # Compiled programs run from scratch; Docker mounts tmpfs noexec unless told otherwise, and
    # the Python-only image keeps it that way.
    scratch_exec = ",exec" if image.startswith(LANGUAGE_REPOSITORY + ":") else ""
    return dict(
        image=image,
        command=SERVER_COMMAND,
        stdin_open=True,
        detach=False,  # with stdin_open this sets StdinOnce: stdin closes when the host detaches
        tty=False,
        user="0:0",
        working_dir="/",
        environment={},
        network_mode="none",
        mem_limit=memory,
        memswap_limit=memory,
        pids_limit=limits.pids,
        nano_cpus=int(limits.cpus * 1e9),
        read_only=True,
        tmpfs={"/tmp": f"rw,nosuid,nodev{scratch_exec},size={limits.tmp_mb}m,mode=1777"},
        shm_size="8m",
        ipc_mode="private",
        cap_drop=["ALL"],
        cap_add=SERVER_CAPS,
        security_opt=["no-new-privileges"],
        init=True,
        log_config=LogConfig(type="none"),
        auto_remove=True,
        labels={LABEL: "1", f"{LABEL}.owner": f"{socket.gethostname()}:{os.getpid()}"},
    )


def remove_stale_containers(client) -> int:
    """Remove sandbox containers whose owning process on this host is gone (best effort).

    Started containers clean up after themselves (`StdinOnce`); this catches the ones a
    crash left between create and start. It lists without inspecting each container, since
    other pools' containers come and go meanwhile.
    """
    removed = 0
    here = socket.gethostname()
    for container in client.api.containers(all=True, filters={"label": LABEL}):
        host, _, pid = (container.get("Labels") or {}).get(f"{LABEL}.owner", "").rpartition(":")
        if host != here or not pid.isdigit() or _alive(int(pid)):
            continue
        try:
            client.api.remove_container(container["Id"], force=True)
            removed += 1
        except Exception:
            pass
    return removed


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


class DockerWorker:
    """A started container and its attach socket; `run` is one job, one at a time."""

    backend = "docker"

    def __init__(self, client, image: str, limits: Limits, start_timeout: float = 60.0):
        self.limits = limits
        self._client = client
        self._buffer = bytearray()
        self._stdout = bytearray()
        self._stderr = bytearray()
        self.container = client.containers.create(**container_options(image, limits))
        self.ident = self.container.short_id
        try:
            raw = client.api.attach_socket(
                self.container.id, params={"stdin": 1, "stdout": 1, "stderr": 1, "stream": 1}
            )
            self._sock = getattr(raw, "_sock", raw)
            self._raw = raw
            self.container.start()
            hello = self._read_line(time.monotonic() + start_timeout)
            if not hello.get("ready"):
                raise WorkerError(f"the job server did not start: {hello}")
        except BaseException:
            self.close()
            raise

    def run(self, job: dict, due: float, budget: float) -> dict:
        """Send one job; the verdict (see `await_verdict`), or WorkerError if the container broke."""
        self._send(job)
        return await_verdict(self._read_line, due, budget)

    def request(self, message: dict, budget: float) -> dict:
        """Send one line; the one-line reply within `budget` seconds, or WorkerError."""
        self._send(message)
        return self._read_line(time.monotonic() + budget)

    def _send(self, message: dict) -> None:
        try:
            self._sock.sendall(json.dumps(message).encode() + b"\n")
        except OSError as exc:
            raise WorkerError(f"cannot reach the container: {exc}") from None

    def _read_line(self, deadline: float) -> dict:
        return read_reply(self._stdout, deadline, self._receive, "the job server")

    def _receive(self, timeout: float) -> None:
        self._sock.settimeout(timeout)
        try:
            chunk = self._sock.recv(1 << 20)
        except TimeoutError:
            return
        except OSError as exc:
            raise WorkerError(f"lost the container: {exc}") from None
        if not chunk:
            raise WorkerError(f"the container exited: {bytes(self._stderr[-500:]).decode(errors='replace')}")
        self._buffer.extend(chunk)
        self._demultiplex()

    def _demultiplex(self):
        """Split Docker's 8-byte-header frames into stdout and stderr."""
        while len(self._buffer) >= 8:
            kind, size = self._buffer[0], struct.unpack(">I", self._buffer[4:8])[0]
            if len(self._buffer) < 8 + size:
                return
            payload = self._buffer[8:8 + size]
            del self._buffer[:8 + size]
            if kind == 2:
                self._stderr.extend(payload)
                del self._stderr[:-4096]
            else:
                self._stdout.extend(payload)

    def close(self):
        """Kill and remove the container (idempotent, never raises)."""
        for step in (lambda: self._raw.close(), lambda: self.container.remove(force=True)):
            try:
                step()
            except Exception:
                pass
