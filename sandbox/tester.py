"""The tester: runs a job's trusted tests against the program and decides its verdict.

One tester process per job, forked by the job server (`harness.py`). The tests execute
here; the program runs in a runner process (`runner.py`) and its functions appear here as
`Remote` proxies. See `harness.py` for why this cannot be faked.

The program's main process decides when the program has ended: once it exits, any process
it left running (a detached child, a daemon, a grandchild holding stdout) is killed and
counted (`leftover_processes`), and changes nothing else in the verdict. The output pipes
are then drained once, never waited on, so a leftover holding one open cannot stall a job.
"""

from __future__ import annotations

import ast
import builtins
import contextlib
import importlib
import json
import math
import os
import pwd
import resource
import select
import signal
import sys
import time

if __package__:  # imported as part of rlvr.sandbox
    from . import cleanup, languages, values
else:  # run from the image, next to harness.py
    import cleanup
    import languages
    import values

JOB_USER = "sandbox"
JOB_UID_DEFAULT = 10001
CAPTURE_BYTES = 64 * 1024  # stdout/stderr kept in the result
TRUNCATED = "\n[... output truncated by rlvr sandbox ...]\n"
MAX_MESSAGE = 16 * 1024 * 1024  # one runner reply
COMPILE_MESSAGE = 4000  # characters of a compiler's complaint kept in the result
CHECK_RAN = "check(candidate)"  # the test that check() itself ran to its end without raising
# Standard modules a test may use without importing them (MBPP tests lean on the solution's imports).
SAFE_MODULES = frozenset({
    "math", "cmath", "re", "collections", "itertools", "functools", "heapq", "bisect", "operator",
    "string", "statistics", "fractions", "decimal", "random", "copy", "datetime", "sys", "array",
})


class JobTimeout(BaseException):
    """The job's wall clock ran out (a BaseException so test code cannot swallow it)."""


class RemoteError(Exception):
    """A call into the program failed: it raised, returned something unencodable, or died."""


class Config:
    """Limits of one job, from the job itself and the server's mode."""

    def __init__(self, job, isolated):
        self.isolated = isolated
        self.timeout = float(job.get("timeout", 5.0))
        self.memory_mb = int(job.get("memory_mb", 512))
        self.output_limit = int(job.get("output_limit", 4 * 1024 * 1024))
        self.file_mb = int(job.get("file_mb", 16))
        self.nproc = int(job.get("nproc", 64))
        self.language = languages.canonical(job.get("language", "python"))
        if self.language is None:
            raise ValueError(f"unknown language {job.get('language')!r}")
        self.compile_timeout = float(job.get("compile_timeout", 30.0))
        self.scratch = job.get("_scratch") or "/tmp/w"
        self.zygote = job.get("_zygote")
        self.server_pid = job.get("_server_pid")
        self.uid = job_uid() if isolated else None


def job_uid():
    try:
        return pwd.getpwnam(JOB_USER).pw_uid
    except KeyError:
        return JOB_UID_DEFAULT


class Runner:
    """One run of `runner.py`: pipes, limits, output capture and a hard kill.

    All waiting is one `select` loop over the reply pipe, stdout, stderr and a pidfd, so a
    grandchild holding a pipe open can never block the tester: the loop ends when the runner
    itself exits or the deadline passes, never on EOF. When the runner exits on its own, what
    it left running is killed at once and counted in `leftovers`.
    """

    def __init__(self, cfg, mode, program, stdin_data=b"", address_limit=True, cpu_seconds=None):
        self.cfg = cfg
        self.address_limit = address_limit
        self.cpu_seconds = cfg.timeout if cpu_seconds is None else cpu_seconds
        self.oom_before = cleanup.oom_kills() if cfg.uid is not None else None
        self.killed_by_us = False
        self.output_exceeded = None  # the stream that went past the output limit, once one has
        self.exit_status = None
        self.leftovers = 0
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
        self._pending = {req_w: bytearray(values.frame(program))}
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
            (resource.RLIMIT_CPU, int(self.cpu_seconds) + 2),
            (resource.RLIMIT_FSIZE, self.cfg.file_mb * mb),
            (resource.RLIMIT_CORE, 0),
        ]
        if self.address_limit:  # otherwise the container's memory cgroup is the cap (languages.py)
            limits.append((resource.RLIMIT_AS, self.cfg.memory_mb * mb))
        if self.cfg.uid is None and os.geteuid() != 0:
            # Local: RLIMIT_NPROC counts every process of the user, so allow what exists already.
            # Isolated jobs rely on the container's pids limit instead: the job uid is shared by
            # all containers, and a per-user count would let one job starve the others.
            limits.append((resource.RLIMIT_NPROC, cleanup.local_process_count() + self.cfg.nproc))
        return limits

    # -- the event loop --

    def send(self, message):
        self._pending.setdefault(self._req_w, bytearray()).extend(values.frame(message))

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

    def hang_up(self):
        """Close the request pipe: the runner sees end of input and returns, as at a script's end."""
        if self._req_w in self._pending and not self._pending[self._req_w]:
            del self._pending[self._req_w]
            os.close(self._req_w)

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
            self.output_exceeded = name
            self.kill()

    def keep_limit(self, name):
        return self.cfg.output_limit if (name == "stdout" and self.keep_all_stdout) else CAPTURE_BYTES

    keep_all_stdout = False

    def _poll_exit(self):
        if self.proc.poll() is not None:
            self.exit_status = self.proc.returncode
            # Killed before draining: a leftover writes at most a pipe's buffer after the end.
            self.leftovers = cleanup.kill_job_processes(self.cfg, None)
            self._drain()

    def _drain(self):
        """Take what the runner wrote before it ended; never wait for the pipes' other holders."""
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
        cleanup.kill_job_processes(self.cfg, self.proc.pid, wait=False)  # the harness waits for them
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

    def output_cap(self):
        """Which limit killed the program for its output, in words (None if none did)."""
        if not self.output_exceeded:
            return None
        return f"output limit exceeded: more than {_size(self.cfg.output_limit)} on {self.output_exceeded}"

    def describe_exit(self):
        if self.output_exceeded:
            return f"killed by the sandbox, {self.output_cap()}"
        sig = self.signal()
        if sig is not None:
            return f"killed by {signal.Signals(sig).name}" if sig in signal.Signals._value2member_map_ else f"signal {sig}"
        return f"exit status {self.exit_status}"

    def oom_killed(self):
        """Whether the kernel's OOM killer struck in the container while this ran: the memory
        cgroup's counter rose. Unknown (local backend) counts as no."""
        if self.oom_before is None:
            return False
        after = cleanup.oom_kills()
        return after is not None and after > self.oom_before

    def out_of_memory(self):
        return self.oom_killed()

    def foreign_kill(self):
        """Why a SIGKILL that the tester did not send came, in words (None if there was none)."""
        if self.signal() != signal.SIGKILL or self.killed_by_us:
            return None
        if self.oom_killed():
            return "killed by the kernel's OOM killer (memory cgroup limit)"
        return "killed by SIGKILL, not sent by the sandbox, with no OOM kill recorded"


class Remote(values.Ref):
    """A name in the solution's namespace, seen from the tester: calling it is a round trip."""

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
        runner.send({"id": call_id, "fn": self.name, "args": values.encode(list(args)),
                     "kwargs": values.encode(dict(kwargs)), "rl": sys.getrecursionlimit()})
        while True:
            reply = runner.read_message(self._deadline)
            if type(reply) is dict and reply.get("id") == call_id:
                break
        if reply.get("ok") is True:
            try:
                return values.decode(reply.get("value"))
            except (ValueError, TypeError, RecursionError, MemoryError) as exc:
                raise RemoteError(f"unusable return value: {exc}") from None
        error = str(reply.get("error"))[:500]
        self._errors.append(error)
        if error.startswith("MemoryError"):  # out of memory: stop here, as a contest judge stops on MLE
            runner.kill()
        raise RemoteError(error)

    def __repr__(self):
        return f"<solution function {self.name}>"


class _AssertRewriter(ast.NodeTransformer):
    """Turns each `assert` into `__rlvr_assert__(i, lambda: test)` so every assert counts alone."""

    def __init__(self):
        self.sources = []

    def visit_Assert(self, node):
        if isinstance(node.test, ast.Constant) and node.test.value:  # `assert True, "hint"` tests nothing;
            return ast.copy_location(ast.Pass(), node)  # `assert False, "msg"` is a test that fails
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
        self.raised = None  # what check() raised outside any assert: officially that fails the job

    def check(self, index, thunk):
        try:
            ok = bool(thunk())
            error = None if ok else "assertion failed"
        except RemoteError as exc:
            ok, error = False, str(exc)
        except Exception as exc:
            ok, error = False, values.describe(exc)
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
        if self.raised is not None:  # one more test, failed, so the job cannot pass
            out.append({"name": CHECK_RAN, "passed": False, "error": f"raised outside any assert: {self.raised}"})
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


def run_calls(job, cfg):
    """Function-call tests (HumanEval, MBPP): each assert runs here against `Remote` proxies."""
    deadline = time.monotonic() + cfg.timeout
    code = (job.get("prefix") or "") + (job.get("code") or "")
    runner = Runner(cfg, "call", {"code": code, "setup": job.get("test_setup_code") or ""})
    errors = []
    namespace = _trusted_namespace(job.get("prefix") or "")
    if job.get("tests") is not None:
        rewriter = _AssertRewriter()
        tree = rewriter.visit(ast.parse(job["tests"]))
        ast.fix_missing_locations(tree)
        verdicts = _Verdicts(rewriter.sources or [CHECK_RAN])
        trees, statements = [tree], None
    else:
        statements = [str(s) for s in job.get("test_list") or []]
        trees = [ast.parse(s) for s in statements]
        verdicts = _Verdicts(s[:300] for s in statements)
    result = {"tests": None}
    timed_out, ended_early = False, None
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
                if "check" in namespace:
                    namespace["check"](make_remote(entry))
                elif not rewriter.sources:  # no check() and no assert: nothing was tested
                    raise RemoteError("the tests define neither check(candidate) nor an assert")
                # else: top-level asserts (MBPP style with an entry point) already ran as the tests
            except JobTimeout:
                raise
            except Exception as exc:
                completed = False
                why = str(exc) if isinstance(exc, RemoteError) else values.describe(exc)
                if rewriter.sources:
                    verdicts.raised = why
                else:
                    verdicts.failed[0] = why
            result["tests"] = verdicts.tests(completed)
        else:
            for i, tree in enumerate(trees):
                verdicts.check(i, lambda t=tree: _run_statement(t, namespace))
            result["tests"] = verdicts.tests(True)
        ended_early = runner.exit_status is not None and not runner.killed_by_us
        # The tests are done; like a real run, the main process must now end (its non-daemon
        # threads and atexit handlers included) before the deadline. Processes it started
        # need not: a shell returns when the main process does.
        runner.hang_up()
        runner.wait_exit(deadline)
    except JobTimeout:
        timed_out = True
        if result["tests"] is not None:
            for t in result["tests"]:
                t.update(passed=False, error="the program did not end before the time limit")
    except RemoteError as exc:
        errors.append(str(exc))
    finally:
        if ended_early is None:
            ended_early = runner.exit_status is not None and not runner.killed_by_us
        runner.close()
    if result["tests"] is None:
        result["tests"] = verdicts.tests(False)
        if errors:
            for t in result["tests"]:
                if t["error"] == "not reached":
                    t["error"] = errors[-1]
    result["leftover_processes"] = runner.leftovers
    return _finish(result, runner, timed_out, errors, ended_early)


def _run_statement(tree, namespace):
    exec(compile(tree, "<test>", "exec"), namespace)
    return True


def run_io(job, cfg):
    """Stdin/stdout tests: the program runs once per case; a case passes only if the program
    exits with status 0, in time, within its limits, and prints the expected output."""
    cases = job.get("io_tests") or []
    code = (job.get("prefix") or "") + (job.get("code") or "")
    tests, errors, timed_out, last, leftovers, memory = [], [], False, None, 0, False
    if cfg.language == "python":
        def start(stdin):
            return Runner(cfg, "script", {"code": code}, stdin_data=stdin)
    else:
        source, compile_argv, run_argv, env = languages.plan(cfg.language, code, cfg.memory_mb, cfg.scratch)
        failure = _compile(cfg, source, code, compile_argv, env, len(cases))
        if failure is not None:
            return failure

        def start(stdin):
            return Runner(cfg, "exec", {"argv": run_argv, "env": env}, stdin_data=stdin, address_limit=False)
    for i, case in enumerate(cases):
        name = f"case {i}"
        if timed_out:
            tests.append({"name": name, "passed": False, "error": "not run after a timeout"})
            continue
        runner = start(str(case.get("input", "")).encode("utf-8"))
        runner.keep_all_stdout = True
        last = runner
        deadline = time.monotonic() + cfg.timeout
        try:
            runner.wait_exit(deadline)  # the main process only: what it left running is killed
        except JobTimeout:
            timed_out = True
        finally:
            runner.close()
            leftovers += runner.leftovers
        case_errors = []
        with contextlib.suppress(ValueError, RemoteError):
            while runner._resp:
                message = runner.read_message(time.monotonic())
                if type(message) is dict and message.get("error"):
                    case_errors.append(str(message["error"])[:500])
        errors += case_errors
        verdict = _case_verdict(cfg, runner, case, case_errors, timed_out, job)
        memory = memory or verdict == "memory limit exceeded"
        got, _ = runner.raw_stdout()
        tests.append({"name": name, "passed": verdict is None, "error": verdict,
                      "got": got[:200].decode("utf-8", "replace")})
        if memory or runner.output_exceeded:
            break
    for j in range(len(tests), len(cases)):
        tests.append({"name": f"case {j}", "passed": False, "error": "not run"})
    crashed = last is not None and last.signal() is not None and not last.killed_by_us
    return _finish({"tests": tests, "leftover_processes": leftovers, "language": cfg.language}, last,
                   timed_out, errors, crashed, memory=memory)


def _case_verdict(cfg, runner, case, case_errors, timed_out, job):
    """Why one stdin/stdout case failed, or None if it passed. Decided here, never by the program."""
    got, clipped = runner.raw_stdout()
    if timed_out:
        return "timeout"
    if runner.output_exceeded or clipped:
        return "output limit exceeded"
    markers = languages.LANGUAGES[cfg.language]["oom_markers"]
    stderr = runner.output("stderr")
    if (runner.oom_killed() or any(e.startswith("MemoryError") for e in case_errors)
            or (runner.exit_status != 0 and any(m in stderr for m in markers))):
        return "memory limit exceeded"
    if runner.exit_status != 0:
        reason = runner.foreign_kill() or (case_errors[-1] if case_errors else _last_line(stderr))
        return f"runtime error ({runner.describe_exit()})" + (f": {reason}" if reason else "")
    return compare_output(got, str(case.get("output", "")), job.get("compare", "exact"),
                          float(job.get("float_tolerance", 1e-6)))


def _size(n):
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= scale and n % scale == 0:
            return f"{n // scale} {unit}"
    return f"{n} bytes"


def _last_line(text):
    lines = [line.strip() for line in text.splitlines() if line.strip() and "truncated by rlvr" not in line]
    return lines[-1][:300] if lines else ""


def _compile(cfg, source, code, argv, env, n_cases):
    """Compile once per job, as the job user under the compile limits. None when it worked,
    else the job's `compile_error` result with the compiler's message, truncated."""
    runner = Runner(cfg, "exec", {"files": {source: code}, "argv": argv, "env": env},
                    address_limit=False, cpu_seconds=cfg.compile_timeout)
    problem = None
    try:
        runner.wait_exit(time.monotonic() + cfg.compile_timeout)
    except JobTimeout:
        problem = f"compilation took longer than {cfg.compile_timeout:g} s"
    finally:
        runner.close()
    if problem is None and runner.oom_killed():
        problem = "the compiler ran out of memory"
    elif problem is None and runner.output_exceeded:
        problem = "the compiler's output exceeded the output limit"
    elif problem is None and runner.exit_status != 0:
        message = (runner.output("stderr") + runner.output("stdout")).strip()
        problem = message or f"the compiler failed ({runner.describe_exit()})"
    if problem is None:
        return None
    if len(problem) > COMPILE_MESSAGE:
        problem = problem[:COMPILE_MESSAGE] + TRUNCATED.rstrip()
    tests = [{"name": f"case {i}", "passed": False, "error": "not run: compile error"} for i in range(n_cases)]
    result = _finish({"tests": tests, "leftover_processes": 0, "language": cfg.language}, runner, False,
                     [f"CompileError: {problem}"], False, status="compile_error")
    result["error"] = f"compile error: {problem}"
    return result


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


def _finish(result, runner, timed_out, errors, crashed, memory=None, status=None):
    tests = result["tests"]
    passed = sum(1 for t in tests if t["passed"])
    if memory is None:
        memory = any(e.startswith("MemoryError") for e in errors) or (runner is not None and runner.out_of_memory())
    if status is not None:
        pass
    elif timed_out:
        status = "timeout"
    elif memory:
        status = "memory"
    elif tests and passed == len(tests):
        status = "passed"
    elif crashed:
        status = "crash"
    else:
        status = "failed"
    if runner is not None and status == "crash" and runner.foreign_kill():
        errors = [*errors[:4], runner.foreign_kill()]
    if runner is not None and runner.output_exceeded and status == "failed" and "error" not in result:
        result["error"] = runner.output_cap()  # the reason, naming the limit that killed the program
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


def run(job, cfg):
    """The verdict on one job, as the result dict the server sends back."""
    if job.get("io_tests") is not None:
        return run_io(job, cfg)
    if job.get("tests") is None and job.get("test_list") is None:
        raise ValueError("a job needs tests (with entry_point), test_list or io_tests")
    return run_calls(job, cfg)
