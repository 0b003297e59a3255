"""A deadline on every check under hostile input (#52), with the real parts: hostile loopback servers
for the judge. Speed is measured in bench/hostile.py; the bounds here are generous deadlines only."""

import sys
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_module import load  # noqa: E402

from rlvr.verifiers.core import ERROR  # noqa: E402

HostileServer = load("hostile").HostileServer

pytest.importorskip("httpx")


def judged(mode: str, timeout: float, retries: int, **server):
    from rlvr.verifiers.judge import JudgeVerifier

    with HostileServer(mode, lifetime=60.0, **server) as hostile:
        judge = JudgeVerifier(hostile.url, "hostile", timeout=timeout, retries=retries, backoff=0.5,
                              cache_dir=False)
        started = time.monotonic()
        score = judge.score("The answer is 4.", "4", question="2+2?")
        return score, time.monotonic() - started


@pytest.mark.parametrize("mode", ["drip_headers", "drip_body"])
def test_a_drip_feeding_judge_is_cut_at_the_deadline(mode):
    # A byte every 0.3 s never trips a per-read timeout: the whole reply would take half a minute.
    score, seconds = judged(mode, timeout=2.0, retries=0, interval=0.3)
    assert score.reason == ERROR and score.info["error"] == "timeout", score
    assert seconds < 2.0 + 5.0


def test_retries_of_a_silent_judge_stay_within_the_deadline():
    # Four attempts of 2 s each (and their backoff) would take 8 s or more.
    score, seconds = judged("silent", timeout=2.0, retries=3)
    assert score.reason == ERROR and score.info["error"] == "timeout", score
    assert seconds < 2.0 + 3.0


def test_a_judge_that_hangs_up_is_an_error_not_a_wrong_answer():
    score, _ = judged("hangup", timeout=2.0, retries=1)
    assert score.reason == ERROR and score.value == 0.0, score


def test_the_scripted_judge_answers_after_hostile_ones():
    score, _ = judged("judge", timeout=2.0, retries=0)
    assert score.value == 1.0, score


def _wait_for(condition, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.2)
    return condition()


@pytest.mark.docker
def test_a_sandbox_job_after_a_tainting_one_needs_no_container_start():
    """A hostile job retires its worker; the next job must find a warm one, not wait for a start."""
    from conftest import require_docker

    from rlvr.sandbox.pool import SandboxPool
    from rlvr.sandbox.protocol import Job

    pool = require_docker(lambda: SandboxPool(backend="docker", size=1))
    try:
        assert _wait_for(lambda: pool._idle.qsize() >= 1 + getattr(pool, "spares", 0), 120.0), "spares never started"
        warm = {w.ident for w in pool._workers}
        tests = {"test_list": ["assert f(2) == 2"]}
        hog = "hog = []\nwhile True:\n    hog.append(bytearray(50 * 2**20))\n"  # out of memory: always replaced
        spoiled = pool.run(Job(code=hog, timeout=1.0, **tests))
        fresh = pool.run(Job(code="def f(x):\n    return x\n", timeout=5.0, **tests))
        assert spoiled.status == "memory" and spoiled.tainted, spoiled
        assert fresh.status == "passed", fresh
        assert fresh.worker in warm and fresh.worker != spoiled.worker  # started before the bad job ended
    finally:
        pool.close()


@pytest.mark.docker
def test_the_host_gives_a_timeout_when_the_container_cannot_answer_by_the_due_time():
    """A fork bomb can starve the server that holds the job's deadline; the host keeps its own. The container is
    frozen (docker pause) once the job is under way: its verdict can never come, and it must not be waited for."""
    import threading

    from conftest import require_docker

    from rlvr.sandbox.pool import SandboxPool
    from rlvr.sandbox.protocol import VERDICT_GRACE, Job

    pool = require_docker(lambda: SandboxPool(backend="docker", size=1, spares=0))
    try:
        worker = next(iter(pool._workers))
        freezer = threading.Timer(0.5, lambda: pool._client.api.pause(worker.container.id))
        tests = {"test_list": ["assert f(2) == 2"]}
        freezer.start()
        started = time.monotonic()
        frozen = pool.run(Job(code="import time\ntime.sleep(100)\n", timeout=1.0, **tests))
        seconds = time.monotonic() - started
        freezer.join()
        assert frozen.status == "timeout" and frozen.tainted and "host stopped" in frozen.error, frozen
        assert seconds < 1.0 + VERDICT_GRACE + 1.0, seconds  # not the 16 s of the server's broken-worker budget
        after = pool.run(Job(code="def f(x):\n    return x\n", timeout=5.0, **tests))
        assert after.status == "passed" and after.worker != worker.ident, after
    finally:
        pool.close()


def test_a_megabyte_response_is_refused_unchecked_and_a_long_one_is_still_checked():
    from rlvr.verifiers.instructions import MAX_CHARS, InstructionVerifier

    spec = [{"id": "change_case:capital_word_frequency", "kwargs": {"capital_frequency": 3,
                                                                   "capital_relation": "at least"}}]
    verifier = InstructionVerifier(mode="loose")
    huge = verifier.score("* a\n" * 250_000, spec)  # 1 MB of bullets: the slowest loose check took over 1 s
    assert (huge.value, huge.reason) == (0.0, "overlong"), huge
    long = verifier.score("WORD " * 3 + "a " * (MAX_CHARS // 2 - 20), spec)
    assert long.value == 1.0, long
    assert InstructionVerifier(max_chars=None).score("* a\n" * 250_000, spec).reason == "not_followed"


def test_math_workers_killed_while_idle_do_not_fail_the_next_check():
    """A worker that died between checks (killed, out of memory) is replaced and the check runs on the
    fresh one: the next request after a burst must be answered, not scored `error`."""
    import os
    import signal

    from rlvr.verifiers.math import MathVerifier
    from rlvr.verifiers.math.pool import get_pool

    verifier = MathVerifier(timeout=5.0, workers=2)
    verifier.start()
    pool = get_pool(2)
    for worker in list(pool._all):
        os.kill(worker.pid, signal.SIGKILL)
    assert _wait_for(lambda: all(not os.path.exists(f"/proc/{w.pid}") for w in pool._all), 30.0)
    scores = verifier.score_batch(["\\boxed{\\sin^2 y + \\cos^2 y}", "\\boxed{(y+1)^2}"], ["1", "y^2+2y+1"])
    assert [(s.value, s.reason) for s in scores] == [(1.0, None), (1.0, None)], scores


def test_instruction_verifier_start_loads_the_language_profiles_up_front():
    import subprocess

    probe = ("import langdetect.detector_factory as f\n"
             "from rlvr.verifiers.instructions import InstructionVerifier\n"
             "assert f._factory is None\n"
             "InstructionVerifier().start()\n"
             "assert f._factory is not None and len(f._factory.get_lang_list()) > 50\n")
    subprocess.run([sys.executable, "-c", probe], check=True, timeout=120)
