"""A deadline on every check under hostile input (#52), with the real parts: hostile loopback servers
for the judge. Speed is measured in bench/hostile.py; the bounds here are generous deadlines only."""

import sys
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))
from hostile import HostileServer  # noqa: E402

from rlvr.verifiers.core import ERROR  # noqa: E402

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
