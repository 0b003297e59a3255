"""Processes a correct program leaves behind: the program's own end decides the verdict.

A shell returns when the program's main process exits, and Python does not wait for its
children, so a correct solution that leaves a process running passes. The sandbox kills
every leftover at that moment, counts it in the verdict, never waits on a pipe it holds,
and nothing of it reaches the next job. Three correct solutions, each on two cases: one
starts a detached process, one leaves a child holding stdout (it would print "late"), one
double-forks a daemon that would write a file later. On Docker (a job in the same warm
container looks for survivors and the file) and on the local backend (the host looks).
A main process kept alive by a non-daemon thread stays a timeout (test_sandbox_verdicts).
"""

from __future__ import annotations

import os
import time

import pytest
from conftest import require_docker

from rlvr.sandbox.docker_backend import DockerWorker
from rlvr.sandbox.pool import SandboxPool
from rlvr.sandbox.protocol import Job, Result

ADD = [{"input": "1 2\n", "output": "3\n"}, {"input": "5 7\n", "output": "12\n"}]
LATE_SECONDS = 1.5  # when the daemon would write its file
TIMEOUT = 10.0

# Each program appends the pid of what it leaves behind to PIDS, before its main process exits.
PROGRAMS = {
    "detached": (
        "import subprocess\na, b = map(int, input().split())\n"
        "p = subprocess.Popen(['sleep', '300'], start_new_session=True, stdin=subprocess.DEVNULL,\n"
        "                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)\n"
        "open(PIDS, 'a').write(f'{p.pid}\\n')\nprint(a + b)\n"
    ),
    "holds_stdout": (
        "import subprocess, sys\na, b = map(int, input().split())\nprint(a + b, flush=True)\n"
        "p = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(1); print(\"late\", flush=True); "
        "time.sleep(300)'])\nopen(PIDS, 'a').write(f'{p.pid}\\n')\n"
    ),
    "daemon": (
        "import os, time\na, b = map(int, input().split())\nchild = os.fork()\nif child == 0:\n"
        "    os.setsid()\n    daemon = os.fork()\n    if daemon == 0:\n"
        f"        time.sleep({LATE_SECONDS})\n        open(LATE, 'w').write('I survived')\n        os._exit(0)\n"
        "    open(PIDS, 'a').write(f'{daemon}\\n')\n    os._exit(0)\nos.waitpid(child, 0)\nprint(a + b)\n"
    ),
}

# The next job in the same container: the job user's other live processes right away and
# after the daemon's moment, and whether its file appeared.
PROBE = f"""import os, time
def others():
    found = []
    for pid in os.listdir('/proc'):
        if not pid.isdigit() or int(pid) == os.getpid():
            continue
        try:
            fields = dict(l.split(':', 1) for l in open(f'/proc/{{pid}}/status').read().splitlines() if ':' in l)
            cmd = open(f'/proc/{{pid}}/cmdline', 'rb').read().replace(bytes(1), b' ').decode()
        except OSError:
            continue
        if int(fields['Uid'].split()[0]) == os.getuid() and not fields['State'].strip().startswith('Z'):
            found.append(cmd)
    return found
now = others()
time.sleep({LATE_SECONDS + 1.0})
print(now, others(), os.path.exists('/dev/shm/late'))
"""


def _program(kind, pids, late):
    return f"PIDS = {pids!r}\nLATE = {late!r}\n" + PROGRAMS[kind]


def _check_verdict(kind, result):
    assert (result.status, result.passed, result.total) == ("passed", 2, 2), (kind, result.tests, result.errors)
    assert result.leftovers == len(ADD), (kind, result.leftovers)  # one per case, each killed
    assert result.duration < TIMEOUT / 2, (kind, result.duration)  # no wait on a pipe a leftover holds
    assert result.stdout == "12\n" and "late" not in result.stdout + str(result.tests)


@pytest.fixture(scope="module")
def worker():
    pool = require_docker(lambda: SandboxPool(backend="docker", size=1))  # the image, built if missing
    pool.close()
    made = DockerWorker(pool._client, pool.image, pool.limits)
    yield made
    made.close()


def _run(worker, job):
    return Result.from_wire(worker.run(job.to_wire(worker.limits), job.verdict_due(), job.budget()), "docker")


@pytest.mark.docker
@pytest.mark.parametrize("kind", list(PROGRAMS))
def test_docker_kills_leftovers_and_the_next_job_finds_none(worker, kind):
    code = _program(kind, "/dev/null", "/dev/shm/late")
    _check_verdict(kind, _run(worker, Job(code=code, io_tests=ADD, timeout=TIMEOUT)))
    probe = _run(worker, Job(code=PROBE, io_tests=[{"input": "", "output": ""}], timeout=TIMEOUT))
    assert probe.stdout == "[] [] False\n", (kind, probe.stdout, probe.status)  # same container, next job


def _alive(pid):
    try:
        with open(f"/proc/{pid}/status") as f:
            return "zombie" not in f.read()
    except OSError:
        return False


@pytest.fixture(scope="module")
def local_pool():
    pool = SandboxPool(backend="local", size=2)
    yield pool
    pool.close()


def test_local_backend_kills_leftovers_before_the_verdict_returns(local_pool, tmp_path):
    jobs = [Job(code=_program(kind, str(tmp_path / f"pids-{kind}"), str(tmp_path / "late")), io_tests=ADD,
                timeout=TIMEOUT) for kind in PROGRAMS]
    results = local_pool.run_batch(jobs)
    pids = {}
    for kind, result in zip(PROGRAMS, results):
        _check_verdict(kind, result)
        pids[kind] = [int(x) for x in (tmp_path / f"pids-{kind}").read_text().split()]
        assert len(pids[kind]) == len(ADD), (kind, pids[kind])
    assert not [(kind, pid) for kind, found in pids.items() for pid in found if _alive(pid)]
    time.sleep(LATE_SECONDS + 1.0)
    assert not os.path.exists(tmp_path / "late")


def test_the_code_reward_reports_what_it_killed(tmp_path):
    """A correct solution that leaves processes passes, and the score's info says how many were killed."""
    from rlvr.verifiers import CodeVerifier

    verifier = CodeVerifier(backend="local", timeout=TIMEOUT)
    code = "```python\n" + _program("detached", str(tmp_path / "pids"), str(tmp_path / "late")) + "```"
    score = verifier.score(code, io_tests=ADD)
    assert (score.value, score.reason) == (1.0, None), score.info
    assert score.info["leftovers"] == len(ADD), score.info
    assert not [pid for pid in map(int, (tmp_path / "pids").read_text().split()) if _alive(pid)]
