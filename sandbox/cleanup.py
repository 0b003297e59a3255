"""Killing what a job started and wiping what it wrote, so that nothing reaches the next job."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import stat
import subprocess
import time

SCRATCH_DIRS = ("/tmp", "/dev/shm", "/dev/mqueue")
KILL_SECONDS = 5.0  # a SIGKILLed process may take a while to die on a loaded machine


def kill_job_processes(cfg, pid, wait=True):
    """SIGKILL everything the job started; returns how many live processes were killed.

    Isolated, this needs no fork (a fork bomb may have used up the pids limit): with
    CAP_KILL we first SIGSTOP every process of the job user, sweep after sweep until a sweep
    finds none it has not stopped (a stopped process cannot fork, and keeps its pid, so a fork
    bomb cannot refill the slots), then SIGKILL them all. Killing outright instead lets the
    bomb's survivors fork into each freed slot, which on a loaded machine took seconds.
    Either way it returns only once the victims are dead (or after `KILL_SECONDS`), so none is
    counted again by a later sweep; isolated with `wait=False`, once every one has been sent its
    SIGKILL: at a deadline the victims' own exit took up to 2 s in a burst of fork bombs (they run
    at the lowest priority), and the harness's cleanup waits for them before the container serves again.
    """
    if cfg.uid is None:
        return kill_local_tree(pid, cfg.server_pid, {cfg.zygote.pid})
    stopped: set[int] = set()
    if pid is not None:  # the job's own process group (the zygote starts it in a new session): one call stops
        with contextlib.suppress(OSError):  # every member that did not leave it, a plain fork bomb whole
            os.killpg(pid, signal.SIGSTOP)
    deadline = time.monotonic() + KILL_SECONDS
    while time.monotonic() < deadline:
        fresh = user_processes(cfg.uid, skip=stopped)  # a stopped pid's status is not read again
        if not fresh:
            break
        _send(fresh, signal.SIGSTOP)
        stopped.update(fresh)
    killed = _send(stopped, signal.SIGKILL)  # all stopped: none can fork, and each keeps its pid until reaped
    while wait and time.monotonic() < deadline:
        victims = user_processes(cfg.uid)
        if not victims:
            break
        killed |= _send(victims, signal.SIGKILL)
    return len(killed)


def _send(pids, sig):
    """The pids that took the signal (those already gone are skipped)."""
    sent = set()
    for pid in pids:
        with contextlib.suppress(OSError):
            os.kill(pid, sig)
            sent.add(pid)
    return sent


def as_job_user(uid, wipe):
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


def scratch_dirty(uid):
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
    if sysv_ipc_objects():
        subprocess.run(["ipcrm", "--all"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                       check=False)


def _make_writable(top):
    for root, dirs, _ in os.walk(top):
        for d in dirs:
            with contextlib.suppress(OSError):
                os.chmod(os.path.join(root, d), 0o700)
    with contextlib.suppress(OSError):
        os.chmod(top, 0o700)


# The container's memory cgroup: cgroup v2 counts OOM kills in memory.events, v1 (kernel 4.13+)
# in memory.oom_control. Both say `oom_kill N`; docker mounts the container's own cgroup here.
OOM_COUNTERS = ("/sys/fs/cgroup/memory.events", "/sys/fs/cgroup/memory/memory.oom_control")


def oom_kills():
    """How many processes the kernel's OOM killer has killed in this container, or None if unknown."""
    for path in OOM_COUNTERS:
        try:
            with open(path) as f:
                lines = f.read().splitlines()
        except OSError:
            continue
        for line in lines:
            key, _, value = line.partition(" ")
            if key == "oom_kill" and value.strip().isdigit():
                return int(value)
    return None


def sysv_ipc_objects():
    count = 0
    for kind in ("shm", "sem", "msg"):
        with contextlib.suppress(OSError), open(f"/proc/sysvipc/{kind}") as f:
            count += max(0, len(f.read().splitlines()) - 1)
    return count


def local_process_count(cache=[]):  # noqa: B006 - counted once per server: a full /proc scan
    if not cache:
        cache.append(len(user_processes(os.getuid())))
    return cache[0]


def user_processes(uid, skip=frozenset()):
    """Live (non-zombie) processes whose real uid is the job user's (pids in `skip` left unread)."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) in skip:
            continue
        fields = _status(entry)
        if fields is None or fields.get("State", "").strip().startswith("Z"):
            continue
        if int(fields.get("Uid", "-1").split()[0]) == uid:
            found.append(int(entry))
    return found


def _status(pid):
    try:
        with open(f"/proc/{pid}/status") as f:
            status = f.read()
    except OSError:
        return None
    return dict(line.split(":", 1) for line in status.splitlines() if ":" in line)


def _alive(pid):
    fields = _status(pid)
    return fields is not None and not fields.get("State", "").strip().startswith("Z")


def kill_local_tree(pid, server_pid, spare):
    """Local mode: the runner's process group and every descendant of the server (a subreaper)
    except the caller and the zygote; returns how many live processes were killed."""
    killed = set()
    if pid is not None and _alive(pid):
        with contextlib.suppress(OSError):
            os.killpg(pid, signal.SIGKILL)
            killed.add(pid)
    deadline = time.monotonic() + KILL_SECONDS
    while time.monotonic() < deadline:
        victims = [v for v in _descendants(server_pid) if v not in spare and _alive(v)]
        if not victims:
            break
        for victim in victims:
            with contextlib.suppress(OSError):
                os.kill(victim, signal.SIGKILL)
                killed.add(victim)
        _reap()
    _reap()  # orphans that ended on their own are the server's (a subreaper) to reap
    return len(killed)


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
