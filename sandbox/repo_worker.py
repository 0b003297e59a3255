"""The grader's worker inside a task container: apply patches, run tests, judge them (trusted).

Started as root with `python3 -I -B /opt/rlvr-repo/repo_worker.py` and the host's pipe on
stdin/stdout. It imports pytest and the plugin before any request arrives (a warm container
pays no interpreter or pytest start), moves its own stdout to a private descriptor and points
fd 1 and 2 at a log file, then says READY. Each request (one JSON line) gets a fresh copy of
the pristine repository in /tmp, has the setup patch, the agent's diff and the test patch
applied with `git apply` (always at /tmp/rlvr-work, where the image compiled the released modules and
tests: the copy keeps their mtimes, so only files a patch changed are compiled again), and forks a
test process that drops to uid 10001 (no capabilities,
cannot write the copy, cannot signal or read this process) and runs pytest with the grader's
own ini (the repository's pytest.ini, setup.cfg, tox.ini and pyproject.toml are not read),
plugin autoloading off, PYTEST_* variables removed and `repo_plugin` registered first. Verdicts
come back on a pipe as token-carrying lines (see repo_plugin). The deadline is kept here: at
it every process of uid 10001 is SIGKILLed and the tests without a verdict count as failed.
The reply is one JSON line on the private descriptor; it says whether the test user left anything
behind (`clean`), for the host serves a clean container again. This file uses the standard library
and pytest only: it runs on the container's Python, not the host's.
"""

from __future__ import annotations

import gc
import json
import os
import select
import shutil
import signal
import subprocess
import sys
import time

HERE = "/opt/rlvr-repo"
sys.path.insert(0, HERE)

import pytest  # noqa: E402 - imported before any request: the warm start
import repo_plugin  # noqa: E402
from _pytest.config import get_config  # noqa: E402 - pytest is pinned (repo_image.TEST_WHEELS)

get_config()  # imports every builtin plugin now, not in each forked test process (a tenth of a grade)
gc.freeze()  # and a test process's collector never touches (so never copies) the pages it shares with us

REPO = os.environ.get("RLVR_REPO_DIR", "/repo")
WORK = "/tmp/rlvr-work"  # always here: the image's bytecode cache is keyed by the copy's path
PYCACHE = "/opt/rlvr-repo/pycache"  # compiled at image build (repo_image.py), readable by the test user only
UID = 10001
OUTPUT_TAIL = 4000
RECORD_LIMIT = 16 << 20


def main() -> int:
    channel = os.fdopen(os.dup(1), "w", buffering=1)
    log = os.open("/tmp/rlvr-worker.log", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    os.dup2(log, 1)
    os.dup2(log, 2)
    os.close(log)
    channel.write("READY\n")
    serial = 0
    for line in sys.stdin:
        if not line.strip():
            continue
        serial += 1
        try:
            reply = handle(json.loads(line), serial)
        except Exception as exc:  # noqa: BLE001 - reported to the host as an infrastructure error
            reply = {"error": f"{type(exc).__name__}: {exc}"[:2000]}
        channel.write(json.dumps(reply) + "\n")
    return 0


def apply(work: str, patch: str, what: str) -> str | None:
    """git apply `patch` in `work`; the error text, or None when it applied."""
    if not patch.strip():
        return None
    proc = subprocess.run(["git", "apply", "--whitespace=nowarn", "--unsafe-paths", "-p1", "-"],
                          input=patch.encode(), cwd=work, capture_output=True, timeout=60,
                          env={"PATH": "/usr/bin:/bin", "HOME": "/tmp", "GIT_CEILING_DIRECTORIES": "/tmp"})
    if proc.returncode != 0:
        return f"{what} did not apply: {proc.stderr.decode(errors='replace').strip()[-1500:]}"
    return None


def tree_state(root: str) -> dict[str, tuple[int, int, int]]:
    """path -> (size, mtime, mode) of every entry under root."""
    state = {}
    for folder, dirs, files in os.walk(root):
        for name in dirs + files:
            path = os.path.join(folder, name)
            st = os.lstat(path)
            state[os.path.relpath(path, root)] = (st.st_size, st.st_mtime_ns, st.st_mode)
    return state


def changed(before: dict, after: dict) -> set[str]:
    return {p for p in set(before) | set(after) if before.get(p) != after.get(p) and not _is_dir(before, after, p)}


def _is_dir(before: dict, after: dict, path: str) -> bool:
    import stat

    return any(path in s and stat.S_ISDIR(s[path][2]) for s in (before, after))


def handle(request: dict, serial: int) -> dict:
    started = time.monotonic()
    work = WORK
    shutil.rmtree(work, ignore_errors=True)
    shutil.copytree(REPO, work, symlinks=True)
    for key in ("setup_patch", "diff", "test_patch"):
        before = tree_state(work) if key == "diff" else None
        problem = apply(work, request.get(key) or "", key)
        if not problem and before is not None:
            allowed = set(request.get("diff_paths") or ())
            stray = sorted(p for p in changed(before, tree_state(work)) if p not in allowed)
            if stray:
                problem = f"diff changed files it does not name: {', '.join(stray[:5])}"
        if problem:
            shutil.rmtree(work, ignore_errors=True)
            return {"patch_error": problem, "which": key}
    os.chmod(work, 0o755)
    token = os.urandom(16).hex()
    tests = request.get("tests")
    targets = sorted({t.split("::")[0] for t in tests}) if tests else list(request.get("paths") or ["."])
    read, write = os.pipe()
    out_path = f"/tmp/rlvr-out-{serial}"
    out = os.open(out_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    scratch = f"/tmp/rlvr-scratch-{serial}"
    os.makedirs(scratch, exist_ok=True)
    os.chown(scratch, UID, UID)
    pid = os.fork()
    if pid == 0:  # the test process: untrusted from the moment package code is imported
        try:
            os.close(read)
            os.setsid()
            os.setgroups([])
            os.setgid(UID)
            os.setuid(UID)
            null = os.open(os.devnull, os.O_RDONLY)
            os.dup2(null, 0)
            os.dup2(out, 1)
            os.dup2(out, 2)
            os.closerange(3, write)
            os.closerange(write + 1, 1 << 16)
            env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST", "PYTHON"))}
            env.update(HOME=scratch, TMPDIR=scratch, PYTEST_DISABLE_PLUGIN_AUTOLOAD="1",
                       PYTHONDONTWRITEBYTECODE="1", LANG="C.UTF-8")
            os.environ.clear()
            os.environ.update(env)
            os.chdir(work)
            src = os.path.join(work, "src")
            sys.path.insert(0, src if os.path.isdir(src) else work)
            sys.pycache_prefix = PYCACHE  # the released modules and tests, compiled and assert-rewritten
            sys.argv = ["pytest"]
            repo_plugin.arm(write, token, work, tests)
            args = ["-c", os.path.join(HERE, "pytest.ini"), "--rootdir", work, "-p", "repo_plugin",
                    "-p", "no:cacheprovider", "-p", "no:randomly", "-q", "--tb=no", "-o", "console_output_style=classic"]
            if request.get("maxfail"):
                args.append(f"--maxfail={int(request['maxfail'])}")
            pytest.main(args + targets)
        except BaseException:  # noqa: BLE001 - shown in the output tail, never a verdict
            import traceback

            traceback.print_exc()
        finally:
            os._exit(0)
    os.close(write)
    os.close(out)
    deadline = started + float(request.get("timeout", 120))
    data, timed_out = bytearray(), False
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            timed_out = True
            break
        ready, _, _ = select.select([read], [], [], min(left, 0.5))
        if ready:
            chunk = os.read(read, 1 << 16)
            if not chunk:
                break
            if len(data) < RECORD_LIMIT:
                data += chunk
        elif os.waitpid(pid, os.WNOHANG)[0] == pid:
            pid = 0
            # the test process is gone; what it left holding the pipe is killed below
            break
    kill_all()
    if pid:
        os.waitpid(pid, 0)
    while select.select([read], [], [], 0)[0]:
        chunk = os.read(read, 1 << 16)
        if not chunk:
            break
        if len(data) < RECORD_LIMIT:
            data += chunk
    os.close(read)
    tests_out, details, tampered, ended = {}, {}, None, False
    for raw in bytes(data).split(b"\n"):
        try:
            record = json.loads(raw)
        except ValueError:
            continue
        if not (isinstance(record, list) and len(record) == 5 and record[0] == token):
            continue
        _, kind, nodeid, verdict, detail = record
        if kind == "test" and isinstance(nodeid, str) and verdict in ("passed", "failed"):
            tests_out[nodeid] = verdict
            if detail:
                details[nodeid] = detail
        elif kind == "tamper":
            tampered = str(detail)[:500]
        elif kind == "end":
            ended = True
    output = ""
    try:
        with open(out_path, "rb") as handle_:
            handle_.seek(0, os.SEEK_END)
            size = handle_.tell()
            handle_.seek(max(0, size - OUTPUT_TAIL))
            output = handle_.read().decode(errors="replace")
    except OSError:
        pass
    for path in (work, out_path, f"/tmp/rlvr-scratch-{serial}"):
        shutil.rmtree(path, ignore_errors=True) if os.path.isdir(path) else _unlink(path)
    left = leftovers()
    return {"tests": tests_out, "details": details, "tampered": tampered, "timed_out": timed_out, "ended": ended,
            "output_tail": output, "duration": round(time.monotonic() - started, 3), "clean": not left,
            "leftovers": left[:5]}


def leftovers() -> list[str]:
    """What the test user left once its processes are killed and its copy and scratch removed: a process, a
    file or folder of its own in the writable places, a SysV IPC object. Anything at all and the host does
    not let this container grade again."""
    found = [f"process {pid}" for pid in _user_processes()]
    for root in ("/tmp", "/dev/shm"):
        for folder, dirs, files in os.walk(root):
            for name in dirs + files:
                path = os.path.join(folder, name)
                try:
                    if os.lstat(path).st_uid == UID:
                        found.append(path)
                except OSError:
                    continue
    for kind in ("shm", "msg", "sem"):  # nothing trusted here uses SysV IPC: any object is the tests'
        try:
            with open(f"/proc/sysvipc/{kind}") as table:
                found += [f"sysv {kind}"] * (len(table.read().splitlines()) - 1)
        except OSError:
            continue
    return found


def _unlink(path: str) -> None:
    try:
        os.unlink(path)
    except OSError:
        pass


def kill_all() -> None:
    """SIGKILL every process of the test user until none is left (a fork bomb included).
    kill(-1) from this root process reaches every process but init and itself, and needs no
    fork, which a fork bomb at the pids limit would refuse."""
    for _ in range(200):
        try:
            os.kill(-1, signal.SIGKILL)
        except ProcessLookupError:
            pass
        if not _user_processes():
            return
        time.sleep(0.01)


def _user_processes() -> list[int]:
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat", "rb") as stat:
                    zombie = stat.read().rsplit(b")", 1)[1].split()[0] == b"Z"
                if os.stat(f"/proc/{entry}").st_uid == UID and not zombie:
                    found.append(int(entry))
            except (OSError, IndexError):
                continue
    return found


if __name__ == "__main__":
    sys.exit(main())
