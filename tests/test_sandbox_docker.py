"""The Docker backend against a real engine: lock-down, resource abuse, isolation between jobs.

Without an engine these tests skip with the reason, unless CI is set: then they fail.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import socket
import subprocess
import threading
import time

import pytest
from conftest import require_docker

from rlvr.sandbox.docker_backend import LABEL, remove_stale_containers
from rlvr.sandbox.pool import SandboxPool
from rlvr.sandbox.protocol import Job, Limits
from rlvr.verifiers.code import CodeVerifier

pytestmark = pytest.mark.docker

SQ_TESTS = "def check(candidate):\n    assert candidate(2) == 4\n    assert candidate(3) == 9\n"
GOOD = "def sq(x):\n    return x * x\n"


def _pool(size):
    return require_docker(lambda: SandboxPool(backend="docker", size=size))


@pytest.fixture(scope="module")
def pool():
    p = _pool(2)
    yield p
    p.close()


def job(code, timeout=3.0, **tests):
    if not tests:
        tests = {"tests": SQ_TESTS, "entry_point": "sq"}
    return Job(code=code, timeout=timeout, **tests)


def test_container_is_locked_down(pool):
    worker = next(iter(pool._workers))
    attrs = pool._client.api.inspect_container(worker.container.id)
    host = attrs["HostConfig"]
    assert host["NetworkMode"] == "none"
    assert host["ReadonlyRootfs"] is True
    assert host["CapDrop"] == ["ALL"] and sorted(host["CapAdd"]) == ["KILL", "SETGID", "SETUID"]
    assert "no-new-privileges" in host["SecurityOpt"]
    assert host["Init"] is True
    assert host["LogConfig"]["Type"] == "none"
    assert host["Memory"] > 0 and host["Memory"] == host["MemorySwap"]
    assert host["PidsLimit"] == pool.limits.pids and host["NanoCpus"] == int(pool.limits.cpus * 1e9)
    assert not host.get("Binds") and not attrs["Mounts"]
    assert set(host["Tmpfs"]) == {"/tmp"}
    assert attrs["Config"]["OpenStdin"] and attrs["Config"]["StdinOnce"]


def test_correct_passes_and_wrong_fails(pool):
    good, wrong, half = pool.run_batch([
        job(GOOD), job("def sq(x):\n    return x + x\n"), job("def sq(x):\n    return 4\n"),
    ])
    assert (good.status, good.passed, good.total) == ("passed", 2, 2)
    assert (wrong.status, wrong.passed) == ("failed", 1)  # 2 + 2 == 2 * 2
    assert (half.status, half.passed, half.total) == ("failed", 1, 2)


ABUSE = {
    "infinite_loop": ("def sq(x):\n    while True:\n        pass\n", {"timeout"}),
    "sleep_loop": ("import time\ndef sq(x):\n    while True:\n        time.sleep(0.5)\n", {"timeout"}),
    "sigstop": ("import os, signal\ndef sq(x):\n    os.kill(os.getpid(), signal.SIGSTOP)\n    return x * x\n",
                {"timeout"}),
    "fork_bomb": ("import os\ndef sq(x):\n    while True:\n        try:\n            os.fork()\n"
                  "        except OSError:\n            pass\n", {"timeout"}),
    "memory_bomb": ("def sq(x):\n    hog = []\n    while True:\n        hog.append(bytearray(50 * 2**20))\n",
                    {"memory"}),
    "huge_allocation": ("def sq(x):\n    return len(bytearray(64 * 2**30))\n", {"memory"}),
    "disk_fill": ("import itertools\ndef sq(x):\n    for i in itertools.count():\n"
                  "        with open(f'/tmp/fill{i}', 'wb') as f:\n            f.write(b'x' * 2**20)\n",
                  {"failed"}),
    "big_file": ("def sq(x):\n    with open('big', 'wb') as f:\n        while True:\n"
                 "            f.write(b'x' * 2**20)\n", {"failed"}),
    "output_flood": ("import sys\ndef sq(x):\n    while True:\n        sys.stdout.write('spam' * 10000)\n",
                     {"failed"}),
    "stderr_flood": ("import os\ndef sq(x):\n    while True:\n        os.write(2, b'e' * 65536)\n", {"failed"}),
}


def test_resource_abuse_is_contained_and_the_pool_stays_healthy(pool):
    names = list(ABUSE)
    results = pool.run_batch([job(ABUSE[n][0]) for n in names])
    for name, result in zip(names, results):
        assert result.status in ABUSE[name][1], (name, result)
        assert result.passed == 0, name
    by_name = dict(zip(names, results))
    for name in ("output_flood", "stderr_flood"):
        r = by_name[name]
        assert r.truncated and "truncated" in (r.stdout + r.stderr)
        assert len(r.stdout) < 70_000 and len(r.stderr) < 70_000
    assert by_name["memory_bomb"].tainted
    assert not any(by_name[n].tainted for n in ("infinite_loop", "sleep_loop", "output_flood"))  # cleaned, reused
    after = pool.run_batch([job(GOOD)] * 4)
    assert [r.status for r in after] == ["passed"] * 4


def test_no_network(pool):
    code = (
        "import socket\ndef probe():\n    interfaces = sorted(l.split(':')[0].strip() for l in\n"
        "                        open('/proc/net/dev').read().splitlines()[2:])\n    try:\n"
        "        socket.create_connection(('1.1.1.1', 53), timeout=1)\n        reached = True\n"
        "    except OSError:\n        reached = False\n    return interfaces, reached\n"
    )
    result = pool.run(job(code, test_list=["assert probe() == (['lo'], False)"]))
    assert result.status == "passed", result


def test_host_files_and_environment_are_invisible(pool, tmp_path):
    marker = tmp_path / "host-secret.txt"
    marker.write_text("do-not-leak")
    code = (
        f"import os\ndef look():\n    paths = [{str(marker)!r}, {str(tmp_path)!r}, '/work', '/root',\n"
        "             '/var/run/docker.sock', '/run/docker.sock', '/proc/1/environ', '/proc/1/fd/0']\n"
        "    visible = [p for p in paths if os.path.exists(p) and os.access(p, os.R_OK)]\n"
        "    return sorted(os.environ), visible, os.getuid() != 0\n"
    )
    result = pool.run(job(code, test_list=[
        "assert look() == (['HOME', 'LANG', 'PATH'], [], True)",
    ]))
    assert result.status == "passed", result


def test_consecutive_jobs_on_one_container_cannot_see_each_other():
    solo = _pool(1)
    try:
        plant = (
            "import os, sys\ndef sq(x):\n"
            "    for path in ('/tmp/w/secret', '/tmp/secret', '/dev/shm/secret', '/tmp/w/sitecustomize.py'):\n"
            "        with open(path, 'w') as f:\n            f.write('import os; os._exit(0)')\n"
            "    os.makedirs('/tmp/w/lib/python3.11/site-packages', exist_ok=True)\n"
            "    with open('/tmp/w/evil.pth', 'w') as f:\n            f.write('import os; os._exit(0)')\n"
            "    return x * x\n"
        )
        probe = (
            "import os, sys\ndef sq(x):\n    found = [p for d in ('/tmp', '/tmp/w', '/dev/shm') for p in os.listdir(d)\n"
            "             if p not in ('w',)]\n    site = getattr(sys.modules.get('sitecustomize'), '__file__', '') or ''\n"
            "    assert not site.startswith('/tmp'), 'planted code ran'\n"
            "    me = os.getuid()\n"
            "    alive = [p for p in os.listdir('/proc') if p.isdigit() and int(p) != os.getpid()\n"
            "             and os.stat('/proc/' + p).st_uid == me]\n"
            "    return x * x if not (found or alive) else (found, alive)\n"
        )
        spoil = (  # plants, leaves a daemon, then runs past its deadline
            "import os, time\ndef sq(x):\n    with open('/tmp/w/secret', 'w') as f:\n        f.write('x')\n"
            "    if os.fork() == 0:\n        os.setsid()\n        time.sleep(1000)\n"
            "    while True:\n        pass\n"
        )
        first = solo.run(job(plant))
        second = solo.run(job(probe))
        assert first.status == "passed" and not first.tainted, first
        assert second.status == "passed", second
        assert first.worker == second.worker  # the same container served both
        # Killed at its deadline with a few processes, a job is cleaned up at once by the same sweep and wipe
        # as every job, and its container serves again; a fork bomb's too, unless many processes were
        # still exiting (then it is replaced). Either way the next job finds nothing of it.
        spoiled = solo.run(job(spoil, timeout=1.0))
        fresh = solo.run(job(probe))
        assert spoiled.status == "timeout" and not spoiled.tainted, spoiled
        assert fresh.status == "passed" and fresh.worker == spoiled.worker, fresh
        bomb = solo.run(job(ABUSE["fork_bomb"][0], timeout=1.0))
        after = solo.run(job(probe))
        assert bomb.status == "timeout", bomb
        assert after.status == "passed" and (after.worker != bomb.worker) == bomb.tainted, (bomb, after)
    finally:
        solo.close()


def test_a_container_killed_mid_job_is_replaced_and_the_job_retried():
    solo = _pool(1)
    try:
        worker = next(iter(solo._workers))
        killer = threading.Timer(0.7, lambda: solo._client.api.kill(worker.container.id))
        killer.start()
        slow = "import time\ndef sq(x):\n    time.sleep(0.6)\n    return x * x\n"
        result = solo.run(job(slow))
        killer.join()
        assert result.status == "passed" and result.worker != worker.ident, result
    finally:
        solo.close()


def test_pool_removes_its_containers_on_close():
    solo = _pool(1)
    ids = [w.container.id for w in solo._workers]
    client = solo._client
    solo.close()
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        alive = [c.id for c in client.containers.list(all=True) if c.id in ids]
        if not alive:
            break
        time.sleep(0.2)
    assert not alive


def test_missing_image_is_an_infrastructure_error_not_a_wrong_answer(pool):
    verifier = CodeVerifier(image="rlvr-sandbox:does-not-exist")
    score = verifier.score(f"```python\n{GOOD}```", tests=SQ_TESTS, entry_point="sq")
    assert (score.value, score.reason, score.info["status"]) == (0.0, "error", "error")
    assert "does-not-exist" in score.info["error"]


def test_limits_are_validated():
    with pytest.raises(ValueError):
        Limits(memory_mb=0)
    with pytest.raises(ValueError):
        Limits(cpus=float("nan"))


def test_a_forked_child_exiting_does_not_take_the_pool_down(pool):
    before = pool.run(job(GOOD))
    pid = os.fork()
    if pid == 0:  # runs the exit handlers, as a worker process forked by a training loop would
        try:
            atexit._run_exitfuncs()
        finally:
            os._exit(0)
    os.waitpid(pid, 0)
    after = pool.run(job(GOOD))
    assert before.status == after.status == "passed"
    assert {before.worker, after.worker} <= {w.ident for w in pool._workers}


def test_stale_containers_are_removed_only_when_their_owner_is_gone(pool):
    gone = subprocess.Popen(["true"])
    gone.wait()  # a pid no live process has
    here = socket.gethostname()
    owners = {"dead": f"{here}:{gone.pid}", "alive": f"{here}:{os.getpid()}", "other_host": f"elsewhere:{gone.pid}"}
    made = {name: pool._client.containers.create(pool.image, command=["true"],
                                                 labels={LABEL: "1", f"{LABEL}.owner": owner})
            for name, owner in owners.items()}
    try:
        assert remove_stale_containers(pool._client) >= 1
        left = {c["Id"] for c in pool._client.api.containers(all=True, filters={"label": LABEL})}
        assert {name for name, c in made.items() if c.id in left} == {"alive", "other_host"}
    finally:
        for container in made.values():
            with contextlib.suppress(Exception):
                container.remove(force=True)
