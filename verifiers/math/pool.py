"""Worker processes that run symbolic checks under a hard wall-clock limit.

sympy can hang on adversarial input, and SIGALRM only works in the main thread with
whole seconds. Here each check runs in a worker process; the caller waits on the pipe
with a deadline, and a worker that overruns is killed and replaced. This works from any
thread (threads share the pool through a queue of idle workers) and with any limit.
Workers are forks of a warm "zygote" process, so a replacement is ready in milliseconds;
time limits start when a task is sent, never during start-up. A known-correct canary runs when a pool starts:
a broken installation raises at once instead of silently zeroing every reward.

Pools live at module level, keyed by size, so the verifier object
holds only its settings and stays picklable. Workers are killed at interpreter exit,
and exit by themselves when the caller's pipe closes.
"""

from __future__ import annotations

import atexit
import os
import queue
import signal
import socket
import subprocess
import sys
import threading
import time
from collections import deque
from multiprocessing.connection import Connection, wait

WORKER_MODULE = "rlvr.verifiers.math.worker"
STARTUP_TIMEOUT = 120.0  # importing sympy on a loaded machine

# Pairs the worker must judge as stated, straight through latex2sympy and sympy (no fast
# path), covering parsing, simplification and exactness.
CANARY = (
    ("\\frac{1}{2}", "0.5", True),
    ("2\\sqrt{2}", "\\sqrt{8}", True),
    ("\\log_2 8", "3", True),
    ("\\sin^2 x + \\cos^2 x", "1", True),
    ("(x+1)^2", "x^2+2x+1", True),
    ("\\frac{1}{2^{99}}", "\\frac{1}{2^{98}}", False),
)


class CanaryError(RuntimeError):
    """The worker pool graded a known pair wrongly: the installation is broken."""


class _Zygote:
    """A `python -m rlvr.verifiers.math.worker --zygote` process that forks ready workers.

    It imports sympy and latex2sympy and warms them up once; each worker is then a fork of
    it, ready in milliseconds, so a worker killed on timeout is replaced at once. A plain
    subprocess rather than `multiprocessing`: spawn and forkserver re-import the caller's
    main script in the child (breaking scripts without an `if __name__ == "__main__"`
    guard), and forking the caller itself is unsafe once it has threads.
    """

    def __init__(self):
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
        try:
            self.process = subprocess.Popen(
                [sys.executable, "-m", WORKER_MODULE, "--zygote", str(theirs.fileno())],
                pass_fds=(theirs.fileno(),), stdin=subprocess.DEVNULL, env=env, close_fds=True,
            )
        finally:
            theirs.close()
        self.sock = ours
        self.lock = threading.Lock()
        self.sock.settimeout(STARTUP_TIMEOUT)
        try:
            ready = self.sock.recv(1)
        except OSError as exc:
            self.close()
            raise RuntimeError(f"math worker zygote did not start: {exc}") from exc
        if ready != b"R":
            self.close()
            raise RuntimeError("math worker zygote exited during start-up (is sympy installed?)")
        self.sock.settimeout(30.0)

    def fork(self) -> tuple[int, Connection, Connection]:
        """A new worker: (pid, connection for tasks, connection for results)."""
        task_r, task_w = os.pipe()
        result_r, result_w = os.pipe()
        try:
            with self.lock:
                socket.send_fds(self.sock, [b"F"], [task_r, result_w])
                reply = b""
                while len(reply) < 8:
                    chunk = self.sock.recv(8 - len(reply))
                    if not chunk:
                        raise OSError("math worker zygote closed its socket")
                    reply += chunk
        except BaseException:
            for fd in (task_w, result_r):
                os.close(fd)
            raise
        finally:
            os.close(task_r)
            os.close(result_w)
        return int.from_bytes(reply, "little"), Connection(task_w, readable=False), Connection(result_r, writable=False)

    def alive(self) -> bool:
        return self.process.poll() is None

    def close(self) -> None:
        try:
            self.sock.close()
            self.process.kill()
            self.process.wait(timeout=5)
        except (OSError, subprocess.TimeoutExpired):
            pass


class _Worker:
    """One forked worker process and the pipes to it."""

    def __init__(self, zygote: _Zygote):
        self.pid, self.conn_out, self.conn = zygote.fork()
        self.ready = False

    def wait_ready(self, timeout: float = STARTUP_TIMEOUT) -> None:
        """Block until the worker has said it is ready (immediate for a fork of a warm zygote)."""
        if self.ready:
            return
        if not self.conn.poll(timeout):
            raise RuntimeError(f"math worker did not start within {timeout:.0f} s")
        message = self.conn.recv()
        if message != "ready":
            raise RuntimeError(f"math worker sent {message!r} instead of 'ready'")
        self.ready = True

    def send(self, task) -> None:
        self.conn_out.send(task)

    def kill(self) -> None:
        try:
            os.kill(self.pid, signal.SIGKILL)  # the zygote reaps it (SIGCHLD ignored there)
        except (ProcessLookupError, PermissionError):
            pass
        for conn in (self.conn, self.conn_out):
            try:
                conn.close()
            except OSError:
                pass


class WorkerPool:
    """`size` worker processes; `run(tasks, timeout)` returns one outcome per task, in order.

    An outcome is `(status, value, cpu_seconds)`: status "ok" (value is the worker's
    result), "timeout" (the worker was killed after `timeout` seconds) or "error" (the
    worker died; value says how).
    """

    def __init__(self, size: int):
        if size < 1:
            raise ValueError(f"a worker pool needs at least one worker, got {size}")
        self.size = size
        self.cpu_seconds = 0.0  # worker CPU time spent on tasks, a timed-out one at its limit (for benchmarks)
        self._idle: queue.Queue[_Worker] = queue.Queue()
        self._all: set[_Worker] = set()
        self._lock = threading.Lock()
        self._started = False
        self._zygote: _Zygote | None = None
        self.replaced = 0  # workers killed on timeout or found dead

    def start(self) -> None:
        """Start the zygote and the workers and check the canary (idempotent)."""
        self._ensure_started()

    def _ensure_started(self) -> None:
        with self._lock:
            if self._started:
                return
            self._zygote = _Zygote()
            for _ in range(self.size):
                self._add_worker()
            self._started = True
        self._check_canary()

    def _add_worker(self) -> _Worker:
        worker = _Worker(self._zygote)
        self._all.add(worker)
        self._idle.put(worker)
        return worker

    def _replace(self, worker: _Worker) -> _Worker:
        worker.kill()
        with self._lock:
            self._all.discard(worker)
            self.replaced += 1
            if not self._zygote.alive():
                self._zygote.close()
                self._zygote = _Zygote()
            fresh = _Worker(self._zygote)
            self._all.add(fresh)
        return fresh

    def _check_canary(self) -> None:
        tasks = [("sympy", a, r) for a, r, _ in CANARY]
        outcomes = self.run(tasks, timeout=30.0)
        for (a, r, expected), (status, value, _) in zip(CANARY, outcomes):
            if status != "ok" or value != ("ok", expected):
                self.close()
                raise CanaryError(
                    f"math verifier canary failed: {a!r} vs {r!r} gave {status} {value!r}, expected {expected}; "
                    "check the sympy / latex2sympy2_extended installation"
                )

    def run(self, tasks: list, timeout: float) -> list[tuple[str, object, float]]:
        self._ensure_started()
        results: list = [None] * len(tasks)
        pending = deque(range(len(tasks)))
        mine: list[_Worker] = [self._idle.get()]  # wait for one worker, then take what is free
        while len(mine) < min(len(tasks), self.size):
            try:
                mine.append(self._idle.get_nowait())
            except queue.Empty:
                break
        free = list(mine)
        busy: dict = {}  # conn -> (worker, task index, deadline)
        resent: set[int] = set()  # tasks sent again after their first worker was found dead
        try:
            while pending or busy:
                while pending and free:
                    worker = free.pop()
                    index = pending.popleft()
                    try:
                        worker.wait_ready()
                        worker.send(tasks[index])
                    except (OSError, ValueError, EOFError, RuntimeError) as exc:
                        worker = self._swap(mine, worker)
                        free.append(worker)
                        if index not in resent:  # it died while idle (killed, out of memory): the task never
                            resent.add(index)  # started, so it goes to the fresh worker instead of failing
                            pending.appendleft(index)
                        else:
                            results[index] = ("error", f"worker pipe broken ({type(exc).__name__}: {exc})", 0.0)
                        continue
                    busy[worker.conn] = (worker, index, time.monotonic() + timeout)
                if not busy:
                    continue
                now = time.monotonic()
                soonest = min(deadline for _, _, deadline in busy.values())
                for conn in wait(list(busy), timeout=max(0.0, soonest - now)):
                    worker, index, _ = busy.pop(conn)
                    try:
                        value, cpu = conn.recv()
                        results[index] = ("ok", value, cpu)
                        self.cpu_seconds += cpu
                    except (EOFError, OSError):
                        results[index] = ("error", "worker process died", 0.0)
                        worker = self._swap(mine, worker)
                    free.append(worker)
                now = time.monotonic()
                for conn, (worker, index, deadline) in list(busy.items()):
                    if now >= deadline:
                        busy.pop(conn)
                        results[index] = ("timeout", None, timeout)
                        self.cpu_seconds += timeout  # its own count dies with it: charge the whole limit
                        free.append(self._swap(mine, worker))
        finally:
            for worker, _, _ in busy.values():  # interrupted mid-run: these are in an unknown state
                self._swap(mine, worker)
            for worker in mine:
                self._idle.put(worker)
        return results

    def _swap(self, mine: list[_Worker], worker: _Worker) -> _Worker:
        fresh = self._replace(worker)
        mine[mine.index(worker)] = fresh
        return fresh

    def close(self) -> None:
        with self._lock:
            for worker in list(self._all):
                worker.kill()
            self._all.clear()
            if self._zygote is not None:
                self._zygote.close()
                self._zygote = None
            self._idle = queue.Queue()
            self._started = False


_POOLS: dict[tuple[int, int], WorkerPool] = {}
_POOLS_LOCK = threading.Lock()


def get_pool(size: int | None = None) -> WorkerPool:
    """The shared pool of this size (created on first use, in any process)."""
    size = size or default_size()
    key = (size, os.getpid())  # a forked child must not share its parent's workers
    with _POOLS_LOCK:
        pool = _POOLS.get(key)
        if pool is None:
            pool = _POOLS[key] = WorkerPool(size)
        return pool


def default_size() -> int:
    return max(1, min(8, (os.cpu_count() or 1)))


@atexit.register
def shutdown() -> None:
    """Kill every worker of this process's pools (also called at interpreter exit). A forked
    child sees its parent's pools too, and must leave them alone."""
    with _POOLS_LOCK:
        for (_, pid), pool in list(_POOLS.items()):
            if pid == os.getpid():
                pool.close()
        _POOLS.clear()
