"""The zygote: clean runner processes in a millisecond.

The server forks it at start-up, before reading any job; it forks every runner. A fork of
it costs about a millisecond where a fresh interpreter costs ten, and because it never holds
a job, a runner forked from it is as clean as an exec'd one.
"""

from __future__ import annotations

import atexit
import contextlib
import fcntl
import gc
import json
import os
import resource
import signal
import socket
import sys
import traceback

RUNNER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "runner.py")


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

    prctl(4, 1)  # loads libc now, so that runners do not import ctypes each time
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
            reply = {"error": f"{type(exc).__name__}: {exc}"}
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
        os.nice(19)  # the lowest: a fork bomb's 128 processes at 19 weigh about twice the tester at 0, at 10 fourteen times
        uid = spec["uid"]
        if uid is not None:
            os.setgroups([])
            os.setgid(uid)
            os.setuid(uid)
            prctl(4, 1)  # PR_SET_DUMPABLE, as after an exec: the job may inspect its own /proc
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
    _interpreter_exit()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    return code


def _interpreter_exit():
    """What `python prog.py` does before it exits: wait for non-daemon threads, then run
    `atexit` handlers. A program whose thread never ends must never end here either."""
    threading = sys.modules.get("threading")
    if threading is not None:
        with contextlib.suppress(BaseException):
            threading._shutdown()
    with contextlib.suppress(BaseException):
        atexit._run_exitfuncs()


def prctl(option, value, _libc=[]):  # noqa: B006 - libc loaded once (in the zygote, before any fork)
    with contextlib.suppress(Exception):
        if not _libc:
            import ctypes

            _libc.append(ctypes.CDLL(None, use_errno=True))
        _libc[0].prctl(option, value, 0, 0, 0)
