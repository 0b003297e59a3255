"""The trusted job server and tester: the only code whose word decides a verdict.

Runs inside every sandbox container as root with just CAP_SETUID, CAP_SETGID and CAP_KILL
(`python3 -I -B harness.py serve`), or as a plain local subprocess (`serve --local`, weaker
isolation). It reads one JSON job per line on stdin and writes one JSON result per line on
stdout. Standard library only, like its siblings `tester.py` (running the tests), `values.py`
(the wire format), `zygote.py` (spawning runners), `cleanup.py` and `runner.py` (the
untrusted side); all are copied into the image.

Why it cannot be faked
----------------------
The program under test runs in a separate process (`runner.py`) as the job user (uid
10001), which differs from the server's. That process is forked from a *zygote*: a process
the server forks at start-up, before it reads any job, and which never receives one.
Everything that decides the verdict stays on this side:

* **Tests never cross over.** The test code (HumanEval's `check`, MBPP's asserts) runs
  here, in a tester process forked per job. The solution's functions appear in it as
  proxies: a call sends the *arguments* to the runner and gets back the *return value*.
  Expected values, test sources and comparisons never reach the untrusted process: not in
  argv (`/proc/<pid>/cmdline` is the server's fixed command line), not in its environment
  (a fixed clean one), not in a file (the job arrives on the server's stdin, whose
  `/proc/<pid>/fd` is root's), not in its memory or stack (the zygote it is forked from
  never held a job; the tester, which does, is another process). Stdin/stdout tests send
  the input only; the output is compared here.
* **Only plain data comes back.** A return value is decoded here from a tagged JSON form
  into values of exact builtin types (int, float, str, bool, None, list, tuple, dict, set,
  frozenset, bytes, complex). Any other object (one with an always-true `__eq__`, an
  `int`/`str` subclass) stays in the runner; the tester gets an `Opaque` handle that equals
  nothing but itself and refuses `bool()`, usable only as an argument to the solution.
  Whatever bytes a patched encoder sends are still just a value that the trusted
  comparison must accept. Each assert runs here, so patched builtins, `assert` rewriting,
  `atexit`, `sys.excepthook` or a replaced `AssertionError` in the runner change nothing.
* **Exit status and printed text are ignored by function-call tests.** `sys.exit(0)`, `os._exit(0)` or
  `SystemExit` in a test only end the runner early: every test it did not answer fails.
  "PASSED" lines on stdout or fd 1 are just captured output.
* **The tester cannot be touched.** The job user holds no capabilities, so it can neither
  signal nor ptrace the tester or the server (other uid), and `no-new-privileges` plus a
  read-only root leave no way up. Killing its own parent fails with EPERM.
* **Nothing outlives a job.** The program has ended when its main process exits (after its
  non-daemon threads and `atexit` handlers, as `python prog.py` does); whatever it left
  running (a detached child, a double-forked daemon, a grandchild holding stdout) is
  SIGKILLed at that moment, counted in the result as `leftover_processes`, and changes
  nothing else in the verdict. After each job the server SIGKILLs every process of the job
  user again (sweeping /proc with CAP_KILL until none is left, so threads, daemons, stopped
  processes and fork bombs all go, without needing a fork itself); if the job left anything
  in `/tmp`, `/dev/shm`, `/dev/mqueue` or SysV IPC, a cleaner that becomes the job user
  wipes it. If a process survives, scratch stays dirty, the job ran out of memory or died
  by a signal, or it was killed (a timeout, an output flood, a process left behind) with
  more than a few processes to clean up, the result says `tainted` and the host replaces
  the container. (A killed job's few processes go in milliseconds, and the same cleanup
  makes every passing job's container safe to reuse.) Runners never import from scratch: the
  server runs with `-I` (no user site, no `PYTHON*` variables, no script directory on the
  path) and the zygote has loaded everything a runner needs, so a planted `sitecustomize`
  or `.pth` file has nothing to hook into.

The server acknowledges each job as it reads it; the host then allows the job's time limits
plus `protocol.VERDICT_GRACE` for the verdict, and past that stops the whole container and
reports a timeout: a fork bomb shares the server's CPU cgroup and can starve it for seconds.

Statuses: `passed` (every test passed), `failed`, `timeout` (wall clock, enforced here with
SIGKILL, including a main process kept alive by a thread or an `atexit` handler), `memory`
(the container's OOM counter rose, or the runtime reported a failed allocation), `crash`
(the program died by a signal the tester did not send, or broke the protocol), `compile_error` (another
language's compiler refused it), `error` (this side failed: an infrastructure error, never
the model's fault).

Other languages (`languages.py`) take stdin/stdout tests only: the runner writes the source
into scratch and execs the compiler once, then execs the binary once per case, each time
as the job user under the same limits, and the same sweep and wipe follow the job.
"""

from __future__ import annotations

import contextlib
import gc
import json
import os
import select
import shutil
import signal
import sys
import tempfile
import time
import traceback

if __package__:  # imported as part of rlvr.sandbox
    from . import cleanup, tester, values, zygote
else:  # run as a script: in the image, or by the local backend
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import cleanup
    import tester
    import values
    import zygote


ACCEPTED = json.dumps({"accepted": True}).encode() + b"\n"
FEW_PROCESSES = 8  # a killed job that left more than this is not waited for: its container is replaced


def run_job(job, isolated):
    """Run one job in a forked tester process; returns its result (saying whether we are tainted) and the
    cleanup still to run after the reply, if any."""
    started = time.monotonic()
    cfg = tester.Config(job, isolated)
    local_scratch = None
    if not isolated:
        local_scratch = tempfile.mkdtemp(prefix="rlvr-job-")
        job = dict(job, _scratch=local_scratch)
        cfg.scratch = local_scratch
    read_fd, write_fd = os.pipe()
    tester_pid = os.fork()
    if tester_pid == 0:
        os.close(read_fd)
        null = os.open(os.devnull, os.O_RDWR)
        for fd in (0, 1):  # the server's stdin/stdout carry the protocol: test code must not touch them
            os.dup2(null, fd)
        try:
            result = tester.run(job, cfg)
        except BaseException as exc:
            result = {"status": "error", "error": values.describe(exc), "detail": traceback.format_exc()[-2000:]}
        try:
            data = json.dumps(result).encode()
            with os.fdopen(write_fd, "wb") as out:
                out.write(data)
        finally:
            os._exit(0)
    os.close(write_fd)
    budget = cfg.timeout * max(1, len(job.get("io_tests") or [])) + 5.0
    if cfg.language != "python":
        budget += cfg.compile_timeout
    result = _collect(read_fd, tester_pid, cfg, started + budget)
    overran = result.pop("overran", False)
    suspect = overran or result.get("status") in ("memory", "crash", "error")
    killed = (result.get("status") == "timeout" or result.get("output_exceeded")
              or result.get("leftover_processes"))
    if isolated and (suspect or killed and len(cleanup.user_processes(cfg.uid)) > FEW_PROCESSES):
        # The host retires a tainted container whatever the cleanup finds, and removing it kills all it holds:
        # the verdict goes back first, the cleanup runs after it (a fork bomb's took seconds on a loaded machine)
        result.update(tainted=True, duration=round(time.monotonic() - started, 4))
        return result, lambda: _clean_isolated(cfg)
    if isolated:  # a job killed with a few processes is cleaned at once, and its container serves again if clean
        tainted = _clean_isolated(cfg)
    else:  # a local worker's leftovers outlive its server: they die before the verdict goes back
        cleanup.kill_local_tree(None, os.getpid(), {cfg.zygote.pid})
        shutil.rmtree(local_scratch, ignore_errors=True)
        tainted = suspect or killed  # no sweep by user to prove it clean: replaced, as before
    result["tainted"] = bool(tainted)
    result["duration"] = round(time.monotonic() - started, 4)
    return result, None


def _clean_isolated(cfg):
    """Kill the job user's processes and wipe scratch; returns whether anything is left behind."""
    cleanup.kill_job_processes(cfg, None)
    if cleanup.scratch_dirty(cfg.uid) or cleanup.sysv_ipc_objects():  # most jobs write nothing: no fork then
        cleanup.as_job_user(cfg.uid, wipe=True)
    return bool(cleanup.user_processes(cfg.uid)) or cleanup.sysv_ipc_objects() > 0 or cleanup.scratch_dirty(cfg.uid)


def _collect(read_fd, tester_pid, cfg, limit):
    """The tester's result, or a timeout if even the tester overran (backstop: SIGKILL)."""
    chunks = []
    with os.fdopen(read_fd, "rb") as pipe:
        while True:
            remaining = limit - time.monotonic()
            if remaining <= 0 or not select.select([pipe], [], [], remaining)[0]:
                cleanup.kill_job_processes(cfg, None)
                with contextlib.suppress(OSError):
                    os.kill(tester_pid, signal.SIGKILL)
                os.waitpid(tester_pid, 0)
                return {"status": "timeout", "passed": 0, "total": 0, "tests": [], "error": "the tester overran",
                        "overran": True}
            chunk = pipe.read1(1 << 20)
            if not chunk:
                break
            chunks.append(chunk)
    _, wait_status = os.waitpid(tester_pid, 0)
    try:
        return json.loads(b"".join(chunks))
    except ValueError:
        return {"status": "error", "passed": 0, "total": 0, "tests": [],
                "error": f"the tester died (wait status {wait_status})"}


def serve(isolated):
    """Answer jobs from stdin until EOF (the host closing the attach stream ends the container)."""
    stdin, stdout = sys.stdin.buffer, sys.stdout.buffer
    # Every job forks this process: frozen objects are never scanned by the collector, so
    # forked children do not copy pages just to update their GC headers.
    gc.freeze()
    spawner = zygote.Zygote()  # before the first job is read: its memory must never hold one
    if isolated:
        cleanup.as_job_user(tester.job_uid(), wipe=True)
    else:
        _become_subreaper()
    stdout.write(json.dumps({"ready": True, "pid": os.getpid(), "isolated": isolated}).encode() + b"\n")
    stdout.flush()
    for line in stdin:
        if not line.strip():
            continue
        stdout.write(ACCEPTED)  # the host's own deadline for the verdict starts now
        stdout.flush()
        job, later = None, None
        try:
            job = json.loads(line)
            result, later = run_job(dict(job, _zygote=spawner, _server_pid=os.getpid()), isolated)
        except Exception as exc:
            result = {"status": "error", "error": values.describe(exc), "tainted": True}
        if isinstance(job, dict) and "id" in job:
            result["id"] = job["id"]
        stdout.write(json.dumps(result).encode() + b"\n")
        stdout.flush()
        if later is not None:
            later()


def _become_subreaper():
    zygote.prctl(36, 1)  # PR_SET_CHILD_SUBREAPER


def main(argv):
    if len(argv) < 1 or argv[0] != "serve":
        print("usage: harness.py serve [--local]", file=sys.stderr)
        return 2
    serve(isolated="--local" not in argv)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
