"""The trusted job server and judge: the only code whose word decides a verdict.

Runs inside every sandbox container as root with just CAP_SETUID, CAP_SETGID and CAP_KILL
(`python3 -I -B harness.py serve`), or as a plain local subprocess (`serve --local`, weaker
isolation). It reads one JSON job per line on stdin and writes one JSON result per line on
stdout. Standard library only; it is copied into the image next to `runner.py`.

Why it cannot be faked
----------------------
The program under test runs in a separate process (`runner.py`) as the job user (uid
10001), which differs from the server's. That process is forked from a *zygote*: a process
the server forks at start-up, before it reads any job, and which never receives one.
Everything that decides the verdict stays on this side:

* **Tests never cross over.** The test code (HumanEval's `check`, MBPP's asserts) runs
  here, in a judge process forked per job. The solution's functions appear in it as
  proxies: a call sends the *arguments* to the runner and gets back the *return value*.
  Expected values, test sources and comparisons never reach the untrusted process: not in
  argv (`/proc/<pid>/cmdline` is the server's fixed command line), not in its environment
  (a fixed clean one), not in a file (the job arrives on the server's stdin, whose
  `/proc/<pid>/fd` is root's), not in its memory or stack (the zygote it is forked from
  never held a job; the judge, which does, is another process). Stdin/stdout tests send
  the input only; the output is compared here.
* **Only plain data comes back.** A return value is decoded here from a tagged JSON form
  into values of exact builtin types (int, float, str, bool, None, list, tuple, dict, set,
  frozenset, bytes, complex). Any other object (one with an always-true `__eq__`, an
  `int`/`str` subclass) stays in the runner; the judge gets an `Opaque` handle that equals
  nothing but itself and refuses `bool()`, usable only as an argument to the solution.
  Whatever bytes a patched encoder sends are still just a value that the trusted
  comparison must accept. Each assert runs here, so patched builtins, `assert` rewriting,
  `atexit`, `sys.excepthook` or a replaced `AssertionError` in the runner change nothing.
* **Exit status and printed text are ignored.** `sys.exit(0)`, `os._exit(0)` or
  `SystemExit` in a test only end the runner early: every test it did not answer fails.
  "PASSED" lines on stdout or fd 1 are just captured output.
* **The judge cannot be touched.** The job user holds no capabilities, so it can neither
  signal nor ptrace the judge or the server (other uid), and `no-new-privileges` plus a
  read-only root leave no way up. Killing its own parent fails with EPERM.
* **Nothing outlives a job.** After each job the server SIGKILLs every process of the job
  user (sweeping /proc with CAP_KILL until none is left, so threads, daemons, stopped
  processes and fork bombs all go, without needing a fork itself); if the job left anything
  in `/tmp`, `/dev/shm`, `/dev/mqueue` or SysV IPC, a cleaner that becomes the job user
  wipes it. If a process survives, scratch stays dirty, or the job timed out, ran out of
  memory, flooded its output, died by a signal or left a daemon behind, the result says
  `tainted` and the host replaces the container. Runners never import from scratch: the
  server runs with `-I` (no user site, no `PYTHON*` variables, no script directory on the
  path) and the zygote has loaded everything a runner needs, so a planted `sitecustomize`
  or `.pth` file has nothing to hook into.

Statuses: `passed` (every test passed), `failed`, `timeout` (wall clock, enforced here with
SIGKILL), `memory`, `crash` (the program died or broke the protocol), `error` (this side
failed: an infrastructure error, never the model's fault).
"""

from __future__ import annotations

import ast
import builtins
import contextlib
import fcntl
import gc
import importlib
import json
import marshal
import math
import os
import pwd
import resource
import select
import shutil
import signal
import socket
import stat
import subprocess
import sys
import tempfile
import time
import traceback

RUNNER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "runner.py")
JOB_USER = "sandbox"
JOB_UID_DEFAULT = 10001
SCRATCH_DIRS = ("/tmp", "/dev/shm", "/dev/mqueue")
CAPTURE_BYTES = 64 * 1024  # stdout/stderr kept in the result
TRUNCATED = "\n[... output truncated by rlvr sandbox ...]\n"
MAX_MESSAGE = 16 * 1024 * 1024  # one runner reply
# Standard modules a test may use without importing them (MBPP tests lean on the solution's imports).
SAFE_MODULES = frozenset({
    "math", "cmath", "re", "collections", "itertools", "functools", "heapq", "bisect", "operator",
    "string", "statistics", "fractions", "decimal", "random", "copy", "datetime", "sys", "array",
})

# Parsing a decimal int is quadratic: a returned 10-million-digit number must not stall the judge.
if hasattr(sys, "set_int_max_str_digits"):
    sys.set_int_max_str_digits(100_000)


class JobTimeout(BaseException):
    """The job's wall clock ran out (a BaseException so test code cannot swallow it)."""


class RemoteError(Exception):
    """A call into the program failed: it raised, returned something unencodable, or died."""


# --- values ------------------------------------------------------------------------------


def encode(value, depth=0):
    """Arguments for the runner; a `Remote` stands for a value that lives there."""
    if depth > 200:
        raise ValueError("argument nested too deeply")
    kind = type(value)
    if isinstance(value, Remote):
        return {"~": "ref", "v": value.name}
    if kind is Opaque:
        return {"~": "handle", "v": value.index}
    if kind is type and getattr(builtins, getattr(value, "__name__", ""), None) is value:
        return {"~": "type", "v": value.__name__}
    if value is None or kind in (bool, int, float, str):
        return value
    if kind is list:
        return [encode(v, depth + 1) for v in value]
    if kind is tuple:
        return {"~": "tuple", "v": [encode(v, depth + 1) for v in value]}
    if kind is dict:
        return {"~": "dict", "v": [[encode(k, depth + 1), encode(v, depth + 1)] for k, v in value.items()]}
    if kind in (set, frozenset):
        return {"~": kind.__name__, "v": [encode(v, depth + 1) for v in value]}
    if kind is bytes:
        return {"~": "bytes", "v": value.hex()}
    if kind is complex:
        return {"~": "complex", "v": [value.real, value.imag]}
    raise TypeError(f"cannot pass a value of type {kind.__name__} to the solution")


def decode(data):
    """Strictly rebuild a returned value from plain JSON; anything unexpected raises."""
    kind = type(data)
    if data is None or kind in (bool, int, float, str):
        return data
    if kind is list:
        return [decode(v) for v in data]
    if kind is not dict or set(data) != {"~", "v"}:
        raise ValueError("malformed value")
    tag, body = data["~"], data["v"]
    if tag == "handle" and type(body) is int:
        return Opaque(body)
    if tag == "bytes" and type(body) is str:
        return bytes.fromhex(body)
    if tag == "complex" and type(body) is list and len(body) == 2:
        re_, im = (float(x) if type(x) in (int, float) else _bad() for x in body)
        return complex(re_, im)
    if type(body) is not list:
        raise ValueError("malformed value")
    if tag == "dict":
        pairs = [decode(p) for p in body]
        if any(type(p) is not list or len(p) != 2 for p in pairs):
            raise ValueError("malformed dict")
        return {k: v for k, v in pairs}
    builder = {"tuple": tuple, "set": set, "frozenset": frozenset}.get(tag)
    if builder is None:
        raise ValueError(f"unknown value tag {tag!r}")
    return builder(decode(v) for v in body)


class Opaque:
    """An object the solution returned that is not plain data: it stays in the runner.

    It can be passed back to the solution, but it equals nothing but itself and has no
    truth value, so no assert can pass on it.
    """

    __slots__ = ("index",)

    def __init__(self, index):
        self.index = index

    def __eq__(self, other):
        return self is other

    def __hash__(self):
        return id(self)

    def __bool__(self):
        raise TypeError("an opaque object returned by the solution has no truth value")

    def __repr__(self):
        return f"<solution object #{self.index}>"


def _bad():
    raise ValueError("malformed complex")


def frame(message):
    """A length-prefixed marshal frame for the runner (judge to runner only: trusted data)."""
    body = marshal.dumps(message)
    return len(body).to_bytes(4, "big") + body


def describe(exc):
    return f"{type(exc).__name__}: {exc}"[:500]


# --- the untrusted process, seen from the judge --------------------------------------------


class Config:
    """Limits of one job, from the job itself and the server's mode."""

    def __init__(self, job, isolated):
        self.isolated = isolated
        self.timeout = float(job.get("timeout", 5.0))
        self.memory_mb = int(job.get("memory_mb", 512))
        self.output_limit = int(job.get("output_limit", 4 * 1024 * 1024))
        self.file_mb = int(job.get("file_mb", 16))
        self.nproc = int(job.get("nproc", 64))
        self.scratch = job.get("_scratch") or "/tmp/w"
        self.zygote = job.get("_zygote")
        self.server_pid = job.get("_server_pid")
        self.uid = _job_uid() if isolated else None


def _job_uid():
    try:
        return pwd.getpwnam(JOB_USER).pw_uid
    except KeyError:
        return JOB_UID_DEFAULT


class Runner:
    """One run of `runner.py`: pipes, limits, output capture and a hard kill.

    All waiting is one `select` loop over the reply pipe, stdout, stderr and a pidfd, so a
    grandchild holding a pipe open can never block the judge: the loop ends when the runner
    itself exits or the deadline passes, never on EOF.
    """

    def __init__(self, cfg, mode, program, stdin_data=b""):
        self.cfg = cfg
        self.killed_by_us = False
        self.output_exceeded = False
        self.exit_status = None
        self.call_id = 0
        self._resp = bytearray()
        self._streams = {}
        req_r, req_w = os.pipe()
        resp_r, resp_w = os.pipe()
        out_r, out_w = os.pipe()
        err_r, err_w = os.pipe()
        in_r, in_w = os.pipe()
        try:
            self.proc = cfg.zygote.spawn([in_r, out_w, err_w, req_r, resp_w], {
                "mode": mode, "uid": cfg.uid, "cwd": cfg.scratch, "limits": self._limits(),
                "env": {"PATH": "/usr/local/bin:/usr/bin:/bin", "LANG": "C.UTF-8", "HOME": cfg.scratch},
            })
        finally:
            for fd in (req_r, resp_w, out_w, err_w, in_r):
                os.close(fd)
        self._pidfd = os.pidfd_open(self.proc.pid) if hasattr(os, "pidfd_open") else None
        self._read_fds = {resp_r: "resp", out_r: "stdout", err_r: "stderr"}
        for fd, name in self._read_fds.items():
            os.set_blocking(fd, False)
            if name != "resp":
                self._streams[name] = [bytearray(), 0]  # kept bytes, total bytes seen
        self._pending = {req_w: bytearray(frame(program))}
        if stdin_data:
            self._pending[in_w] = bytearray(stdin_data)
        else:
            os.close(in_w)
        self._stdin_w = in_w if stdin_data else None
        self._req_w = req_w
        for fd in self._pending:
            os.set_blocking(fd, False)

    def _limits(self):
        mb = 1024 * 1024
        limits = [
            (resource.RLIMIT_AS, self.cfg.memory_mb * mb),
            (resource.RLIMIT_CPU, int(self.cfg.timeout) + 2),
            (resource.RLIMIT_FSIZE, self.cfg.file_mb * mb),
            (resource.RLIMIT_CORE, 0),
        ]
        if self.cfg.uid is None and os.geteuid() != 0:
            # Local: RLIMIT_NPROC counts every process of the user, so allow what exists already.
            # Isolated jobs rely on the container's pids limit instead: the job uid is shared by
            # all containers, and a per-user count would let one job starve the others.
            limits.append((resource.RLIMIT_NPROC, _local_process_count() + self.cfg.nproc))
        return limits

    # -- the event loop --

    def send(self, message):
        self._pending.setdefault(self._req_w, bytearray()).extend(frame(message))

    def read_message(self, deadline):
        """The next JSON line from the reply pipe; RemoteError if the runner is gone."""
        while True:
            newline = self._resp.find(b"\n")
            if newline >= 0:
                line = bytes(self._resp[:newline])
                del self._resp[:newline + 1]
                try:
                    return json.loads(line)
                except (ValueError, RecursionError, MemoryError):
                    raise RemoteError("the program broke the reply protocol") from None
            if len(self._resp) > MAX_MESSAGE:
                self.kill()
                raise RemoteError("a reply exceeded the size limit")
            if self.exit_status is not None:
                raise RemoteError(f"the program ended ({self.describe_exit()})")
            self._step(deadline)

    def wait_exit(self, deadline):
        while self.exit_status is None:
            self._step(deadline)

    def _step(self, deadline):
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            self.kill()
            raise JobTimeout()
        writers = [fd for fd, buf in self._pending.items() if buf]
        readers = list(self._read_fds)
        if self._pidfd is not None:
            readers.append(self._pidfd)
        wait = remaining if self._pidfd is not None else min(remaining, 0.005)
        try:
            readable, writable, _ = select.select(readers, writers, [], wait)
        except InterruptedError:
            return
        for fd in writable:
            self._write(fd)
        for fd in readable:
            if fd in self._read_fds:
                self._read(fd)
        if self._pidfd is None or self._pidfd in readable:
            self._poll_exit()

    def _write(self, fd):
        buf = self._pending[fd]
        try:
            written = os.write(fd, buf[:65536])
        except (BrokenPipeError, BlockingIOError):
            if fd != self._req_w or self.exit_status is not None:
                buf.clear()
            return
        del buf[:written]
        if not buf and fd == self._stdin_w:
            os.close(fd)
            del self._pending[fd]
            self._stdin_w = None

    def _read(self, fd):
        try:
            chunk = os.read(fd, 1 << 20)
        except BlockingIOError:
            return
        if not chunk:
            os.close(fd)
            del self._read_fds[fd]
            return
        name = self._read_fds[fd]
        if name == "resp":
            self._resp.extend(chunk)
            return
        kept, seen = self._streams[name]
        if seen < self.keep_limit(name):
            kept.extend(chunk[: self.keep_limit(name) - seen])
        self._streams[name][1] = seen + len(chunk)
        if seen + len(chunk) > self.cfg.output_limit:
            self.output_exceeded = True
            self.kill()

    def keep_limit(self, name):
        return self.cfg.output_limit if (name == "stdout" and self.keep_all_stdout) else CAPTURE_BYTES

    keep_all_stdout = False

    def _poll_exit(self):
        if self.proc.poll() is not None:
            self.exit_status = self.proc.returncode
            self._drain()

    def _drain(self):
        """Take what the runner wrote before it ended; never wait for grandchildren."""
        for fd in list(self._read_fds):
            for _ in range(64):
                if fd not in self._read_fds:
                    break
                try:
                    readable, _, _ = select.select([fd], [], [], 0)
                except (ValueError, OSError):
                    break
                if not readable:
                    break
                self._read(fd)

    def kill(self):
        if self.exit_status is not None:
            return
        self.killed_by_us = True
        kill_job_processes(self.cfg, self.proc.pid)
        self.proc.wait()
        self.exit_status = self.proc.returncode
        self._drain()

    def close(self):
        if self.exit_status is None:
            self.kill()
        for fd in list(self._read_fds) + list(self._pending):
            with contextlib.suppress(OSError):
                os.close(fd)
        self._read_fds.clear()
        self._pending.clear()
        if self._pidfd is not None:
            os.close(self._pidfd)
            self._pidfd = None

    # -- what happened --

    def output(self, name):
        kept, seen = self._streams[name]
        text = bytes(kept[:CAPTURE_BYTES]).decode("utf-8", "replace")
        return text + TRUNCATED if seen > CAPTURE_BYTES else text

    def raw_stdout(self):
        kept, seen = self._streams["stdout"]
        return bytes(kept), seen > len(kept)

    def truncated(self):
        return any(seen > CAPTURE_BYTES for _, seen in self._streams.values())

    def signal(self):
        return -self.exit_status if self.exit_status is not None and self.exit_status < 0 else None

    def describe_exit(self):
        sig = self.signal()
        if sig is not None:
            return f"killed by {signal.Signals(sig).name}" if sig in signal.Signals._value2member_map_ else f"signal {sig}"
        return f"exit status {self.exit_status}"

    def out_of_memory(self):
        """Killed by the kernel's OOM killer (a SIGKILL we did not send)."""
        return self.signal() == signal.SIGKILL and not self.killed_by_us


class Remote:
    """A name in the solution's namespace, seen from the judge: calling it is a round trip."""

    def __init__(self, runner, name, deadline, errors):
        self.name = name
        self._runner = runner
        self._deadline = deadline
        self._errors = errors

    def __call__(self, *args, **kwargs):
        runner = self._runner
        if runner.exit_status is not None:
            raise RemoteError(f"the program ended ({runner.describe_exit()})")
        runner.call_id += 1
        call_id = runner.call_id
        runner.send({"id": call_id, "fn": self.name, "args": encode(list(args)),
                     "kwargs": encode(dict(kwargs))})
        while True:
            reply = runner.read_message(self._deadline)
            if type(reply) is dict and reply.get("id") == call_id:
                break
        if reply.get("ok") is True:
            try:
                return decode(reply.get("value"))
            except (ValueError, TypeError, RecursionError, MemoryError) as exc:
                raise RemoteError(f"unusable return value: {exc}") from None
        error = str(reply.get("error"))[:500]
        self._errors.append(error)
        if error.startswith("MemoryError"):  # out of memory: stop here, as a judge stops on MLE
            runner.kill()
        raise RemoteError(error)

    def __repr__(self):
        return f"<solution function {self.name}>"


# --- the zygote: clean runner processes in a millisecond ---------------------------------------


class Zygote:
    """A process forked from the server before it reads any job; it forks every runner.

    Forking it costs about a millisecond where a fresh interpreter costs ten. Its memory
    never holds a job (it only ever receives the runner's mode, limits and pipe ends), so a
    runner forked from it is as clean as an exec'd one: no test, expected value or earlier
    job is anywhere in it. The runner drops to the job user, rlimits and a new session
    before the program arrives on its request pipe.
    """

    def __init__(self):
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        pid = os.fork()
        if pid == 0:
            ours.close()
            null = os.open(os.devnull, os.O_RDWR)
            for fd in (0, 1):  # never touch the server's protocol streams
                os.dup2(null, fd)
            try:
                _zygote_loop(theirs)
            finally:
                os._exit(0)
        theirs.close()
        self.pid = pid
        self._sock = ours

    def _ask(self, request, fds=()):
        data = json.dumps(request).encode()
        if fds:
            socket.send_fds(self._sock, [data], list(fds))
        else:
            self._sock.send(data)
        reply = self._sock.recv(65536)
        if not reply:
            raise RuntimeError("the zygote is gone")
        reply = json.loads(reply)
        if "error" in reply:
            raise RuntimeError(f"zygote: {reply['error']}")
        return reply

    def spawn(self, fds, spec):
        """Fork a runner with `fds` as its 0, 1, 2, 3, 4; returns a handle to wait on it."""
        return Child(self, self._ask(dict(spec, op="spawn"), fds)["pid"])

    def wait(self, pid, block):
        return self._ask({"op": "wait", "pid": pid, "block": block})["status"]


class Child:
    """A runner forked by the zygote: like `Popen`'s pid/poll/wait/returncode."""

    def __init__(self, zygote, pid):
        self.zygote = zygote
        self.pid = pid
        self.returncode = None

    def poll(self):
        if self.returncode is None:
            self.returncode = self.zygote.wait(self.pid, block=False)
        return self.returncode

    def wait(self):
        if self.returncode is None:
            self.returncode = self.zygote.wait(self.pid, block=True)
        return self.returncode


def _zygote_loop(sock):
    sys.path.insert(0, os.path.dirname(RUNNER))
    import runner  # loaded once here; every fork starts with it

    _prctl(4, 1)  # loads libc now, so that runners do not import ctypes each time
    gc.freeze()

    while True:
        try:
            data, fds, _, _ = socket.recv_fds(sock, 65536, 8)
        except OSError:
            return
        if not data:
            return
        request = json.loads(data)
        try:
            if request["op"] == "spawn":
                pid = os.fork()
                if pid == 0:
                    sock.close()
                    _become_runner(runner, request, fds)
                reply = {"pid": pid}
            else:
                flags = 0 if request["block"] else os.WNOHANG
                done, status = os.waitpid(request["pid"], flags)
                reply = {"status": os.waitstatus_to_exitcode(status) if done else None}
        except OSError as exc:
            reply = {"error": describe(exc)}
        finally:
            for fd in fds:
                os.close(fd)
        sock.send(json.dumps(reply).encode())


def _become_runner(runner, spec, fds):
    """In the forked child: take the pipes, the limits and the job user, then run the program."""
    code = 1
    try:
        os.setsid()
        high = [fcntl.fcntl(fd, fcntl.F_DUPFD, 64) for fd in fds]
        for target, fd in enumerate(high):
            os.dup2(fd, target)
        os.closerange(len(high), os.sysconf("SC_OPEN_MAX"))
        os.chdir(spec["cwd"])
        with contextlib.suppress(OSError), open("/proc/self/oom_score_adj", "w") as f:
            f.write("1000")  # the first to go when memory runs out
        for which, value in spec["limits"]:
            resource.setrlimit(which, (value, value))
        uid = spec["uid"]
        if uid is not None:
            os.setgroups([])
            os.setgid(uid)
            os.setuid(uid)
            _prctl(4, 1)  # PR_SET_DUMPABLE, as after an exec: the job may inspect its own /proc
        os.environ.clear()
        os.environ.update(spec["env"])
        sys.argv = ["runner"]
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        code = _run_program(runner, spec["mode"])
    finally:
        os._exit(code)


def _run_program(runner, mode):
    """`python prog.py` semantics for exit codes and uncaught exceptions."""
    try:
        runner.run(mode)
        code = 0
    except SystemExit as exc:
        if exc.code is None or isinstance(exc.code, int):
            code = exc.code or 0
        else:
            print(exc.code, file=sys.stderr)
            code = 1
    except BaseException:
        traceback.print_exc()
        code = 1
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    return code


def _prctl(option, value, _libc=[]):  # noqa: B006 - libc loaded once (in the zygote, before any fork)
    with contextlib.suppress(Exception):
        if not _libc:
            import ctypes

            _libc.append(ctypes.CDLL(None, use_errno=True))
        _libc[0].prctl(option, value, 0, 0, 0)


# --- the judge -----------------------------------------------------------------------------


class _AssertRewriter(ast.NodeTransformer):
    """Turns each `assert` into `__rlvr_assert__(i, lambda: test)` so every assert counts alone."""

    def __init__(self):
        self.sources = []

    def visit_Assert(self, node):
        if isinstance(node.test, ast.Constant):  # `assert True, "debug hint"` tests nothing
            return ast.copy_location(ast.Pass(), node)
        index = len(self.sources)
        self.sources.append(ast.unparse(node.test)[:300])
        thunk = ast.Lambda(
            args=ast.arguments(posonlyargs=[], args=[], vararg=None, kwonlyargs=[], kw_defaults=[],
                               kwarg=None, defaults=[]),
            body=node.test,
        )
        call = ast.Call(func=ast.Name("__rlvr_assert__", ast.Load()), args=[ast.Constant(index), thunk],
                        keywords=[])
        return ast.copy_location(ast.Expr(call), node)


class _Verdicts:
    def __init__(self, names):
        self.names = list(names)
        self.executed = set()
        self.failed = {}

    def check(self, index, thunk):
        try:
            ok = bool(thunk())
            error = None if ok else "assertion failed"
        except RemoteError as exc:
            ok, error = False, str(exc)
        except Exception as exc:
            ok, error = False, describe(exc)
        except BaseException:  # the deadline struck mid-assert: it did not pass
            self.failed.setdefault(index, "timeout")
            raise
        self.executed.add(index)
        if not ok:
            self.failed.setdefault(index, error)

    def tests(self, completed):
        out = []
        for i, name in enumerate(self.names):
            passed = i not in self.failed and (i in self.executed or completed)
            error = self.failed.get(i) or (None if passed else "not reached")
            out.append({"name": name, "passed": passed, "error": error})
        return out


def _trusted_namespace(prefix):
    namespace = {"__builtins__": builtins, "__name__": "__rlvr_tests__"}
    if prefix:
        try:  # the prompt's helpers (HumanEval's `poly`, `encode_cyclic`) are trusted code
            exec(compile(prefix, "<prefix>", "exec"), namespace)
        except Exception:
            pass  # a prefix that only makes sense joined to the completion
    return namespace


def _bind_names(namespace, trees, remote_names, make_remote, entry_point=None):
    """Give every free name of the tests a meaning: trusted first, then the solution's.

    A solution cannot shadow a builtin the tests use (a `set` that returns 0 for everything
    would make `set(f(x)) == set(y)` pass), except the function under test when the task
    names it (`entry_point`, e.g. an MBPP function called `sum`).
    """
    for tree in trees:
        for node in ast.walk(tree):
            if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load):
                name = node.id
                if name == entry_point and name in remote_names and name not in namespace:
                    namespace[name] = make_remote(name)
                if name in namespace or hasattr(builtins, name):
                    continue
                if name in SAFE_MODULES:
                    namespace[name] = importlib.import_module(name)
                elif name in remote_names:
                    namespace[name] = make_remote(name)


def judge_asserts(job, cfg):
    deadline = time.monotonic() + cfg.timeout
    code = (job.get("prefix") or "") + (job.get("code") or "")
    runner = Runner(cfg, "call", {"code": code, "setup": job.get("test_setup_code") or ""})
    errors = []
    namespace = _trusted_namespace(job.get("prefix") or "")
    if job.get("tests") is not None:
        rewriter = _AssertRewriter()
        tree = rewriter.visit(ast.parse(job["tests"]))
        ast.fix_missing_locations(tree)
        verdicts = _Verdicts(rewriter.sources or ["check(candidate)"])
        trees, statements = [tree], None
    else:
        statements = [str(s) for s in job.get("test_list") or []]
        trees = [ast.parse(s) for s in statements]
        verdicts = _Verdicts(s[:300] for s in statements)
    result = {"tests": None}
    timed_out = False
    try:
        hello = runner.read_message(deadline)
        if not (type(hello) is dict and hello.get("loaded") is True):
            error = str(hello.get("error") if type(hello) is dict else "bad hello")[:500]
            errors.append(error)
            raise RemoteError(f"the program did not load: {error}")
        remote_names = {n for n in hello.get("names") or [] if type(n) is str}

        def make_remote(name):
            return Remote(runner, name, deadline, errors)

        _bind_names(namespace, trees, remote_names, make_remote,
                    job.get("entry_point") if statements is not None else None)
        if statements is None:
            namespace["__rlvr_assert__"] = verdicts.check
            exec(compile(trees[0], "<tests>", "exec"), namespace)
            entry = job.get("entry_point") or "solution"
            if entry in remote_names:  # tests may call the function by name (HumanEval/33), as originally
                namespace[entry] = make_remote(entry)
            completed = True
            try:
                namespace["check"](make_remote(entry))
            except JobTimeout:
                raise
            except Exception as exc:
                completed = False
                if not rewriter.sources:
                    verdicts.failed[0] = describe(exc)
            result["tests"] = verdicts.tests(completed)
        else:
            for i, tree in enumerate(trees):
                verdicts.check(i, lambda t=tree: _run_statement(t, namespace))
            result["tests"] = verdicts.tests(True)
    except JobTimeout:
        timed_out = True
    except RemoteError as exc:
        errors.append(str(exc))
    finally:
        ended_early = runner.exit_status is not None and not runner.killed_by_us
        leftovers = stray_processes(cfg, runner)
        runner.close()
    if result["tests"] is None:
        result["tests"] = verdicts.tests(False)
        if errors:
            for t in result["tests"]:
                if t["error"] == "not reached":
                    t["error"] = errors[-1]
    result["leftover_processes"] = leftovers
    return _finish(result, runner, timed_out, errors, ended_early)


def _run_statement(tree, namespace):
    exec(compile(tree, "<test>", "exec"), namespace)
    return True


def judge_io(job, cfg):
    cases = job.get("io_tests") or []
    compare = job.get("compare", "exact")
    tolerance = float(job.get("float_tolerance", 1e-6))
    code = (job.get("prefix") or "") + (job.get("code") or "")
    tests, errors, timed_out, last, leftovers = [], [], False, None, 0
    for i, case in enumerate(cases):
        name = f"case {i}"
        if timed_out:
            tests.append({"name": name, "passed": False, "error": "not run after a timeout"})
            continue
        stdin = str(case.get("input", "")).encode("utf-8")
        runner = Runner(cfg, "script", {"code": code}, stdin_data=stdin)
        runner.keep_all_stdout = True
        last = runner
        try:
            runner.wait_exit(time.monotonic() + cfg.timeout)
        except JobTimeout:
            timed_out = True
        finally:
            leftovers += stray_processes(cfg, runner)
            runner.close()
            kill_job_processes(cfg, None)
        with contextlib.suppress(ValueError, RemoteError):
            while runner._resp:
                message = runner.read_message(time.monotonic())
                if type(message) is dict and message.get("error"):
                    errors.append(str(message["error"])[:500])
        got, clipped = runner.raw_stdout()
        if timed_out:
            verdict = "timeout"
        elif runner.output_exceeded or clipped:
            verdict = "output limit exceeded"
        else:
            verdict = compare_output(got, str(case.get("output", "")), compare, tolerance)
        tests.append({"name": name, "passed": verdict is None, "error": verdict,
                      "got": got[:200].decode("utf-8", "replace")})
        if runner.out_of_memory() or runner.output_exceeded:
            break
    for j in range(len(tests), len(cases)):
        tests.append({"name": f"case {j}", "passed": False, "error": "not run"})
    crashed = last is not None and last.signal() is not None and not last.killed_by_us
    return _finish({"tests": tests, "leftover_processes": leftovers}, last, timed_out, errors, crashed)


def normalise(text):
    lines = text.replace("\r\n", "\n").replace("\r", "\n").split("\n")
    lines = [line.rstrip() for line in lines]
    while lines and not lines[-1]:
        lines.pop()
    return lines


def compare_output(got, expected, mode="exact", tolerance=1e-6):
    """None when `got` (raw bytes) matches `expected`, else why not. Runs only in trusted code."""
    try:
        text = got.decode("utf-8")
    except UnicodeDecodeError:
        return "output is not valid UTF-8"
    got_lines, want_lines = normalise(text), normalise(expected)
    if mode != "float":
        return None if got_lines == want_lines else "wrong output"
    got_tokens = " ".join(got_lines).split()
    want_tokens = " ".join(want_lines).split()
    if len(got_tokens) != len(want_tokens):
        return "wrong output"
    for a, b in zip(got_tokens, want_tokens):
        if a == b:
            continue
        try:
            x, y = float(a), float(b)
        except ValueError:
            return "wrong output"
        if not (math.isfinite(x) and math.isfinite(y)) or abs(x - y) > tolerance * max(1.0, abs(y)):
            return "wrong output"
    return None


def _finish(result, runner, timed_out, errors, crashed):
    tests = result["tests"]
    passed = sum(1 for t in tests if t["passed"])
    memory = any(e.startswith("MemoryError") for e in errors) or (runner is not None and runner.out_of_memory())
    if timed_out:
        status = "timeout"
    elif memory:
        status = "memory"
    elif tests and passed == len(tests):
        status = "passed"
    elif crashed:
        status = "crash"
    else:
        status = "failed"
    result.update({
        "status": status,
        "passed": passed,
        "total": len(tests),
        "stdout": runner.output("stdout") if runner else "",
        "stderr": runner.output("stderr") if runner else "",
        "truncated": bool(runner and runner.truncated()),
        "output_exceeded": bool(runner and runner.output_exceeded),
        "signal": runner.signal() if runner else None,
        "errors": errors[:5],
    })
    return result


def judge(job, cfg):
    if job.get("io_tests") is not None:
        return judge_io(job, cfg)
    if job.get("tests") is None and job.get("test_list") is None:
        raise ValueError("a job needs tests (with entry_point), test_list or io_tests")
    return judge_asserts(job, cfg)


# --- cleaning up after a job -----------------------------------------------------------------


def kill_job_processes(cfg, pid):
    """SIGKILL everything the job started.

    Isolated, this needs no fork (a fork bomb may have used up the pids limit): with
    CAP_KILL we kill every process of the job user, again and again until none is left,
    so children forked during a sweep die in the next one.
    """
    if cfg.uid is None:
        _kill_local_tree(pid, cfg.server_pid, {cfg.zygote.pid})
        return
    for _ in range(500):
        victims = _user_processes(cfg.uid)
        if not victims:
            return
        for victim in victims:
            with contextlib.suppress(OSError):
                os.kill(victim, signal.SIGKILL)


def stray_processes(cfg, runner):
    """Processes the job left running besides the runner itself (daemons, orphans)."""
    if cfg.uid is None:
        return 0
    return len([p for p in _user_processes(cfg.uid) if p != runner.proc.pid])


def _as_job_user(uid, wipe):
    """Fork a cleaner that becomes the job user: `kill(-1)` reaches exactly that user's
    processes, and it may delete whatever that user created in scratch."""
    child = os.fork()
    if child == 0:
        code = 1
        try:
            os.setgroups([])
            os.setgid(uid)
            os.setuid(uid)
            for _ in range(1000):
                try:
                    os.kill(-1, signal.SIGKILL)
                except ProcessLookupError:
                    break
            if wipe:
                _wipe_scratch()
            code = 0
        finally:
            os._exit(code)
    os.waitpid(child, 0)


def _scratch_dirty(uid):
    """Whether the job left anything in scratch, or tampered with its work directory."""
    try:
        work = os.lstat("/tmp/w")
        if (not stat.S_ISDIR(work.st_mode) or work.st_uid != uid or stat.S_IMODE(work.st_mode) != 0o755
                or os.listdir("/tmp/w") or os.listdir("/tmp") != ["w"]):
            return True
        return any(os.listdir(d) for d in SCRATCH_DIRS[1:] if os.path.isdir(d))
    except OSError:
        return True


def _wipe_scratch():
    for top in SCRATCH_DIRS:
        try:
            entries = os.listdir(top)
        except OSError:
            continue
        for entry in entries:
            path = os.path.join(top, entry)
            with contextlib.suppress(OSError):
                if os.path.isdir(path) and not os.path.islink(path):
                    _make_writable(path)
                    shutil.rmtree(path, ignore_errors=True)
                else:
                    os.unlink(path)
    os.makedirs("/tmp/w", exist_ok=True)
    os.chmod("/tmp/w", 0o755)  # the server (root without CAP_DAC_OVERRIDE) must enter it to start a job
    if _sysv_ipc_objects():
        subprocess.run(["ipcrm", "--all"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                       check=False)


def _make_writable(top):
    for root, dirs, _ in os.walk(top):
        for d in dirs:
            with contextlib.suppress(OSError):
                os.chmod(os.path.join(root, d), 0o700)
    with contextlib.suppress(OSError):
        os.chmod(top, 0o700)


def _sysv_ipc_objects():
    count = 0
    for kind in ("shm", "sem", "msg"):
        with contextlib.suppress(OSError), open(f"/proc/sysvipc/{kind}") as f:
            count += max(0, len(f.read().splitlines()) - 1)
    return count


def _local_process_count(cache=[]):  # noqa: B006 - counted once per server: a full /proc scan
    if not cache:
        cache.append(len(_user_processes(os.getuid())))
    return cache[0]


def _user_processes(uid):
    """Live (non-zombie) processes whose real uid is the job user's."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/status") as f:
                status = f.read()
        except OSError:
            continue
        fields = dict(line.split(":", 1) for line in status.splitlines() if ":" in line)
        if fields.get("State", "").strip().startswith("Z"):
            continue
        if int(fields.get("Uid", "-1").split()[0]) == uid:
            found.append(int(entry))
    return found


def _kill_local_tree(pid, server_pid, spare):
    """Local mode: the runner's process group and every descendant of the server (a subreaper)
    except the judge and the zygote."""
    if pid is not None:
        with contextlib.suppress(OSError):
            os.killpg(pid, signal.SIGKILL)
    for _ in range(20):
        victims = [v for v in _descendants(server_pid) if v not in spare]
        if not victims:
            return
        for victim in victims:
            with contextlib.suppress(OSError):
                os.kill(victim, signal.SIGKILL)
        _reap()


def _descendants(root):
    out, stack = [], [root]
    while stack:
        pid = stack.pop()
        try:
            tids = os.listdir(f"/proc/{pid}/task")
        except OSError:
            continue
        for tid in tids:
            try:
                with open(f"/proc/{pid}/task/{tid}/children") as f:
                    kids = [int(x) for x in f.read().split()]
            except OSError:
                continue
            for kid in kids:
                if kid != os.getpid():
                    out.append(kid)
                    stack.append(kid)
    return out


def _reap():
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


# --- the server --------------------------------------------------------------------------------


def run_job(job, isolated):
    """Judge one job in a forked judge process, then clean up and say whether we are tainted."""
    started = time.monotonic()
    cfg = Config(job, isolated)
    local_scratch = None
    if not isolated:
        local_scratch = tempfile.mkdtemp(prefix="rlvr-job-")
        job = dict(job, _scratch=local_scratch)
        cfg.scratch = local_scratch
    read_fd, write_fd = os.pipe()
    judge_pid = os.fork()
    if judge_pid == 0:
        os.close(read_fd)
        null = os.open(os.devnull, os.O_RDWR)
        for fd in (0, 1):  # the server's stdin/stdout carry the protocol: test code must not touch them
            os.dup2(null, fd)
        try:
            result = judge(job, cfg)
        except BaseException as exc:
            result = {"status": "error", "error": describe(exc), "detail": traceback.format_exc()[-2000:]}
        try:
            data = json.dumps(result).encode()
            with os.fdopen(write_fd, "wb") as out:
                out.write(data)
        finally:
            os._exit(0)
    os.close(write_fd)
    budget = cfg.timeout * max(1, len(job.get("io_tests") or [])) + 5.0
    result = _collect(read_fd, judge_pid, cfg, started + budget)
    tainted = (result.get("status") in ("timeout", "memory", "crash", "error")
               or result.get("output_exceeded") or result.get("leftover_processes"))
    if isolated:
        kill_job_processes(cfg, None)
        leftovers = []
        if _scratch_dirty(cfg.uid) or _sysv_ipc_objects():  # most jobs write nothing: no fork then
            _as_job_user(cfg.uid, wipe=True)
            leftovers = _user_processes(cfg.uid)
        if leftovers:
            result["leftover_processes"] = len(leftovers)
        tainted = tainted or bool(leftovers) or _sysv_ipc_objects() > 0 or _scratch_dirty(cfg.uid)
    else:
        _kill_local_tree(None, os.getpid(), {cfg.zygote.pid})
        shutil.rmtree(local_scratch, ignore_errors=True)
    result["tainted"] = bool(tainted)
    result["duration"] = round(time.monotonic() - started, 4)
    return result


def _collect(read_fd, judge_pid, cfg, limit):
    """The judge's result, or a timeout if even the judge overran (backstop: SIGKILL)."""
    chunks = []
    with os.fdopen(read_fd, "rb") as pipe:
        while True:
            remaining = limit - time.monotonic()
            if remaining <= 0 or not select.select([pipe], [], [], remaining)[0]:
                kill_job_processes(cfg, None)
                with contextlib.suppress(OSError):
                    os.kill(judge_pid, signal.SIGKILL)
                os.waitpid(judge_pid, 0)
                return {"status": "timeout", "passed": 0, "total": 0, "tests": [], "error": "judge overran"}
            chunk = pipe.read1(1 << 20)
            if not chunk:
                break
            chunks.append(chunk)
    _, wait_status = os.waitpid(judge_pid, 0)
    try:
        return json.loads(b"".join(chunks))
    except ValueError:
        return {"status": "error", "passed": 0, "total": 0, "tests": [],
                "error": f"the judge died (wait status {wait_status})"}


def serve(isolated):
    """Answer jobs from stdin until EOF (the host closing the attach stream ends the container)."""
    stdin, stdout = sys.stdin.buffer, sys.stdout.buffer
    # Every job forks this process: frozen objects are never scanned by the collector, so
    # forked children do not copy pages just to update their GC headers.
    gc.freeze()
    zygote = Zygote()  # before the first job is read: its memory must never hold one
    if isolated:
        _as_job_user(_job_uid(), wipe=True)
    else:
        _become_subreaper()
    stdout.write(json.dumps({"ready": True, "pid": os.getpid(), "isolated": isolated}).encode() + b"\n")
    stdout.flush()
    for line in stdin:
        if not line.strip():
            continue
        job = None
        try:
            job = json.loads(line)
            result = run_job(dict(job, _zygote=zygote, _server_pid=os.getpid()), isolated)
        except Exception as exc:
            result = {"status": "error", "error": describe(exc), "tainted": True}
        if isinstance(job, dict) and "id" in job:
            result["id"] = job["id"]
        stdout.write(json.dumps(result).encode() + b"\n")
        stdout.flush()


def _become_subreaper():
    _prctl(36, 1)  # PR_SET_CHILD_SUBREAPER


def main(argv):
    if len(argv) < 1 or argv[0] != "serve":
        print("usage: harness.py serve [--local]", file=sys.stderr)
        return 2
    serve(isolated="--local" not in argv)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
