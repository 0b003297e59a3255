"""The trusted server inside a repository workspace container (standard library only).

Started as `python3 -I -c <this file's text> REPO UID` by `repo_workspace.py`, as root with a few
capabilities (chown, read and write the agent's files, switch user, kill). It reads one JSON
request per line on stdin and writes one JSON reply per line on stdout, so a tool call costs a
line each way instead of a `docker exec`. Every command of the agent runs as the unprivileged
`UID` in its own session, with a wall-clock limit, an output cap, a per-file size limit and a
process-count limit below the container's pids limit, so a fork bomb cannot starve this server;
when the command ends every process of `UID` is killed (one `kill(-1)` as `UID`, then a /proc
check), so nothing the agent started runs while this server reads or writes files or computes the diff.
The agent cannot signal or ptrace this process (another uid, no capabilities).

Requests (`op`): `setup` (own the repository to UID, remember its pristine contents), `run`
(a shell command), `read` (a file's text), `write` (a file's text), `diff` (the repository
against the pristine copy, as a unified diff `git apply` and `patch -p1` take).
"""

import difflib
import json
import os
import resource
import select
import signal
import subprocess
import sys
import time

REPO = os.path.realpath(sys.argv[1])
UID = int(sys.argv[2])
SKIP_DIRS = {"__pycache__", ".pytest_cache", ".git", ".hg", ".tox", ".nox", ".mypy_cache", ".ruff_cache",
             ".hypothesis", ".eggs"}
SKIP_SUFFIXES = (".pyc", ".pyo")
MAX_FILE_BYTES = 4 << 20  # larger files are not kept in the snapshot (their change shows as binary)
AGENT_NPROC = 192  # below the container's pids limit: the server can always fork
AGENT_FSIZE = 256 << 20
SWEEP_SECONDS = 10.0  # the dead may take a while to go on a loaded machine
ENV = {"PATH": os.environ.get("PATH") or "/usr/local/bin:/usr/bin:/bin", "HOME": "/tmp", "LANG": "C.UTF-8",
       "PYTHONDONTWRITEBYTECODE": "1", "TERM": "dumb", "USER": "agent"}
# The package imports from the checkout, as the grader's test process does (src layout or not).
ENV["PYTHONPATH"] = os.path.join(REPO, "src") if os.path.isdir(os.path.join(REPO, "src")) else REPO
pristine = {}


def repo_files():
    """{relative path: bytes or None (too large or unreadable)} of the repository's regular files."""
    out = {}
    for root, dirs, files in os.walk(REPO):
        dirs[:] = sorted(d for d in dirs if d not in SKIP_DIRS and not d.endswith(".egg-info"))
        for name in files:
            if name.endswith(SKIP_SUFFIXES):
                continue
            path = os.path.join(root, name)
            if os.path.islink(path) or not os.path.isfile(path):
                continue
            rel = os.path.relpath(path, REPO)
            try:
                out[rel] = open(path, "rb").read() if os.path.getsize(path) <= MAX_FILE_BYTES else None
            except OSError:
                out[rel] = None
    return out


def agent_processes():
    """The live processes of the agent's uid (zombies are already dead)."""
    found = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/status") as f:
                fields = dict(line.split(":", 1) for line in f if line.startswith(("Uid:", "State:")))
        except (OSError, ValueError):
            continue
        if int(fields.get("Uid", "-1").split()[0]) == UID and not fields.get("State", "").strip().startswith("Z"):
            found.append(int(pid))
    return found


def sweep(shell):
    """Kill every process of the agent's uid, `shell` (the command's bash) among them; return once none is alive.

    Most commands leave nothing running: then /proc holds only init, this server and the shell's
    zombie, and neither a fork nor a status read is needed (reading a running fork bomb's took 2-3 s).
    Otherwise a forked killer that becomes UID calls `kill(-1, SIGKILL)`: the kernel signals every
    process of UID in this container in one pass and fails any fork in flight, so a fork bomb cannot
    refill the slots (killing pid by pid let it fork into each freed slot: over 30 s, half the time).
    Then /proc is read until the victims are gone, killing pid by pid should the fork have failed.
    """
    others = {int(pid) for pid in os.listdir("/proc") if pid.isdigit()} - {1, os.getpid(), shell.pid}
    if not others and shell.poll() is not None:
        return
    try:
        killer = os.fork()
    except OSError:
        killer = -1
    if killer == 0:
        try:
            os.setgroups([])
            os.setgid(UID)
            os.setuid(UID)
            for _ in range(1000):  # until none is left to signal (a zombie counts: bounded, a few ms)
                os.kill(-1, signal.SIGKILL)  # every process of UID but this one, and none can fork meanwhile
        finally:
            os._exit(0)
    if killer > 0:
        os.waitpid(killer, 0)
    deadline = time.monotonic() + SWEEP_SECONDS
    while time.monotonic() < deadline:
        alive = agent_processes()
        if not alive:
            return
        for pid in alive:
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        time.sleep(0.002)


def as_agent():
    resource.setrlimit(resource.RLIMIT_NPROC, (AGENT_NPROC, AGENT_NPROC))
    resource.setrlimit(resource.RLIMIT_FSIZE, (AGENT_FSIZE, AGENT_FSIZE))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    os.setgroups([])
    os.setgid(UID)
    os.setuid(UID)


def run(req):
    """A shell command as the agent, in the repository; output capped at `limit` bytes."""
    timeout, limit = float(req.get("limit_s", 30)), int(req.get("limit", 16384))
    start = time.monotonic()
    proc = subprocess.Popen(["/bin/bash", "-c", req["command"]], cwd=REPO, env=ENV, stdin=subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, preexec_fn=as_agent,
                            start_new_session=True, close_fds=True)
    chunks, size, truncated, timed_out = [], 0, False, False
    fd = proc.stdout.fileno()
    while True:
        left = start + timeout - time.monotonic()
        if left <= 0:
            timed_out = True
            break
        exited = proc.poll() is not None
        ready, _, _ = select.select([fd], [], [], 0 if exited else min(left, 0.05))
        if not ready:
            if exited:  # the shell is done; what it left running may hold the pipe open: not waited for
                break
            continue
        chunk = os.read(fd, 65536)
        if not chunk:
            break
        chunks.append(chunk)
        size += len(chunk)
        if size > limit:
            truncated = True
            break
    sweep(proc)  # the command, and whatever it left running
    proc.stdout.close()
    status = proc.wait()
    output = b"".join(chunks)[:limit].decode("utf-8", "replace")
    return {"output": output, "exit": status, "timed_out": timed_out, "truncated": truncated,
            "seconds": round(time.monotonic() - start, 4)}


def resolve(rel):
    """The real path of `rel` inside the repository, or an error message."""
    if not isinstance(rel, str) or not rel or "\0" in rel:
        return None, "give a path relative to the repository"
    path = os.path.realpath(os.path.join(REPO, rel))
    if path != REPO and not path.startswith(REPO + os.sep):
        return None, f"{rel} is outside the repository"
    return path, None


def read(req):
    path, error = resolve(req.get("path"))
    if error:
        return {"error": error}
    if not os.path.isfile(path):
        return {"error": f"no such file: {req['path']}"}
    if os.path.getsize(path) > MAX_FILE_BYTES:
        return {"error": f"{req['path']} is larger than {MAX_FILE_BYTES} bytes"}
    data = open(path, "rb").read()
    try:
        return {"content": data.decode("utf-8")}
    except UnicodeDecodeError:
        return {"error": f"{req['path']} is not UTF-8 text"}


def write(req):
    path, error = resolve(req.get("path"))
    if error:
        return {"error": error}
    if not os.path.isdir(os.path.dirname(path)):
        return {"error": f"no such directory for {req['path']}"}
    if os.path.exists(path) and not os.path.isfile(path):
        return {"error": f"{req['path']} is not a regular file"}
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o644)
    with os.fdopen(fd, "wb") as f:
        f.write(req["content"].encode("utf-8"))
    os.chown(path, UID, UID)
    return {}


def setup(req):
    """Own the repository to the agent (it edits and runs tests there) and remember its contents."""
    global pristine
    for root, dirs, files in os.walk(REPO):
        for name in dirs + files:
            os.lchown(os.path.join(root, name), UID, UID)
    os.chown(REPO, UID, UID)
    pristine = repo_files()
    return {"files": len(pristine)}


def _lines(data):
    text = data.decode("utf-8")
    lines = text.splitlines(keepends=True)
    if lines and not lines[-1].endswith("\n"):
        lines[-1] += "\n\\ No newline at end of file\n"
    return lines


def diff(req):
    now = repo_files()
    parts, changed = [], []
    for rel in sorted(set(pristine) | set(now)):
        old, new = pristine.get(rel), now.get(rel)
        if rel in pristine and rel in now and old == new and old is not None:
            continue
        changed.append(rel)
        head = [f"diff --git a/{rel} b/{rel}\n"]
        if rel not in pristine:
            head.append("new file mode 100644\n")
        elif rel not in now:
            head.append("deleted file mode 100644\n")
        try:
            before = _lines(old) if old is not None else None
            after = _lines(new) if new is not None else None
            if (rel in pristine and before is None) or (rel in now and after is None):
                raise UnicodeDecodeError("utf-8", b"", 0, 1, "too large")
        except UnicodeDecodeError:
            parts.append("".join(head) + f"Binary files a/{rel} and b/{rel} differ\n")
            continue
        body = difflib.unified_diff(before or [], after or [], "a/" + rel if rel in pristine else "/dev/null",
                                    "b/" + rel if rel in now else "/dev/null")
        parts.append("".join(head) + "".join(body))
    return {"diff": "".join(parts), "files": changed}


def apply_patch(req):
    """Apply a unified diff (paths a/<file>, b/<file>) exactly: each hunk's old lines must be found,
    at its line number or the nearest place; nothing is written unless every hunk applies."""
    files, current = {}, None
    lines = req["patch"].splitlines(keepends=True)
    i = 0
    while i < len(lines):
        line = lines[i]
        if line.startswith("+++ "):
            target = line[4:].strip().split("\t")[0]
            current = None if target == "/dev/null" else target[2:] if target.startswith("b/") else target
            files.setdefault(current, [])
        elif line.startswith("@@") and current is not None:
            start = int(line.split()[1][1:].split(",")[0])
            old, new = [], []
            i += 1
            while i < len(lines) and lines[i][:1] in (" ", "-", "+", "\\"):
                body = lines[i]
                if body.startswith("\\"):
                    for side in (old, new):
                        if side and side[-1].endswith("\n"):
                            side[-1] = side[-1][:-1]
                else:
                    if body[0] in " -":
                        old.append(body[1:])
                    if body[0] in " +":
                        new.append(body[1:])
                i += 1
            files[current].append((start, old, new))
            continue
        i += 1
    results = {}
    for rel, hunks in files.items():
        path, error = resolve(rel)
        if error:
            return {"error": error}
        text = open(path, encoding="utf-8").read() if os.path.exists(path) else ""
        have = text.splitlines(keepends=True)
        shift = 0
        for start, old, new in hunks:
            at = max(0, start - 1 + shift) if old else start + shift
            spots = sorted(range(len(have) - len(old) + 1), key=lambda k: abs(k - at))
            spot = next((k for k in spots if have[k:k + len(old)] == old), None)
            if spot is None:
                return {"error": f"hunk at line {start} of {rel} does not apply"}
            have[spot:spot + len(old)] = new
            shift += len(new) - len(old)
        results[rel] = "".join(have)
    for rel, text in results.items():
        write({"path": rel, "content": text})
    return {"files": sorted(results)}


def remove(req):
    """Delete files of the repository (tests hidden from the agent)."""
    for rel in req["paths"]:
        path, error = resolve(rel)
        if error:
            return {"error": error}
        if os.path.isfile(path):
            os.unlink(path)
    return {}


OPS = {"run": run, "read": read, "write": write, "setup": setup, "diff": diff, "apply": apply_patch,
       "remove": remove}


def main():
    out = sys.stdout
    out.write(json.dumps({"ready": True, "repo": REPO}) + "\n")
    out.flush()
    for line in sys.stdin:
        try:
            req = json.loads(line)
            reply = OPS[req["op"]](req)
        except Exception as exc:  # a bad request or an OS error: said in the reply, the server goes on
            reply = {"error": f"{type(exc).__name__}: {exc}", "server_error": True}
        out.write(json.dumps(reply) + "\n")
        out.flush()


main()
