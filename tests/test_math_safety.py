"""Safety of the math verifier: fuzzing, hard time limits, threads, bad references, canary, exit.

Everything runs against the real worker processes. Time limits are kept short (0.5 s)
so the suite stays cheap; the margins allow for a loaded 2-core CI machine.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import rlvr.verifiers.math as math_verifier
from rlvr.verifiers.core import BAD_REFERENCE, REASONS, TIMEOUT
from rlvr.verifiers.math import MathVerifier, grade
from rlvr.verifiers.math.pool import get_pool

LIMIT = 0.5
MARGIN = 1.5  # pipes, process kill and a busy CI machine
PATHOLOGICAL = "\\boxed{\\sum_{k=1}^{10^{9}} k^{k}}"  # passes the guards, then runs for minutes


@pytest.fixture(scope="module")
def verifier():
    v = MathVerifier(timeout=LIMIT)
    v.start()  # pool start-up is not part of any limit
    return v


LATEX_TOKENS = st.sampled_from([
    "\\boxed{", "\\fbox{", "}", "{", "\\frac", "\\sqrt", "^", "_", "\\pi", "x", "y", "i", "e", "2", "10", "0",
    "-", "+", "(", ")", "[", "]", "\\{", "\\}", ",", "=", "<", "\\leq", "\\infty", "\\cup", "\\pm", "\\cdot",
    "\\times", "\\text{", "or", " ", "\\\\", "&", "\\begin{pmatrix}", "\\end{pmatrix}", "!", "%", ".", "\\overline",
    "<think>", "</think>", "<answer>", "</answer>", "The answer is ", "#### ", "$", "\\left(", "\\right)",
    "\\log", "\\sin", "9^{9^{9}}", "\\binom", "\\sum", "0.\\overline{3}", "1{,}000",
])
LATEX = st.lists(LATEX_TOKENS, max_size=40).map("".join)


def _check(verifier, completion, reference):
    start = time.monotonic()
    score = verifier.score(completion, reference)
    elapsed = time.monotonic() - start
    assert elapsed < LIMIT + MARGIN, f"{elapsed:.2f}s for {completion!r} vs {reference!r}"
    assert score.value in (0.0, 1.0)
    assert (score.value == 1.0) == (score.reason is None)
    assert score.reason is None or score.reason in REASONS
    assert "answer" in score.info


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(completion=LATEX, reference=LATEX)
def test_fuzz_latex_like_never_raises_or_overruns(verifier, completion, reference):
    _check(verifier, completion, reference)
    _check(verifier, "\\boxed{" + completion + "}", reference or "1")


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(pattern=st.lists(LATEX_TOKENS, min_size=1, max_size=4).map("".join).filter(bool),
       reference=st.sampled_from(["5", "x^2+1", "(1, 2)", "1, 2", "[0, 1)", "\\frac{1}{2}"]))
def test_fuzz_long_repetitive_answers_stay_within_the_limit(verifier, pattern, reference):
    # a pattern repeated up to the 2000-character answer cap: catches quadratic in-process stages
    answer = (pattern * (1900 // len(pattern) + 1))[:1900]
    _check(verifier, "\\boxed{" + answer + "}", reference)
    _check(verifier, answer, reference)


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(completion=st.text(max_size=200), reference=st.text(max_size=30))
def test_fuzz_arbitrary_text_never_raises_or_overruns(verifier, completion, reference):
    _check(verifier, completion, reference)


@settings(max_examples=150, deadline=None)
@given(answer=LATEX, reference=LATEX)
def test_fuzz_fast_grader_never_raises(answer, reference):
    assert grade(answer, reference) in (True, False, None)


def test_pathological_input_times_out_within_the_limit(verifier):
    pool = get_pool(verifier.workers)
    replaced, cpu = pool.replaced, pool.cpu_seconds
    start = time.monotonic()
    score = verifier.score(PATHOLOGICAL, "5")
    assert time.monotonic() - start < LIMIT + MARGIN
    assert (score.value, score.reason) == (0.0, TIMEOUT)
    assert pool.replaced == replaced + 1
    # the killed task's CPU is charged at its whole limit, not lost with its worker (approx: the running
    # total is a float, and 2.434 - 1.934 came out 0.49999999999999978 in CI)
    assert pool.cpu_seconds - cpu == pytest.approx(LIMIT)
    # the killed worker was replaced: the next symbolic check works at once, in a worker (not from
    # the verdict cache, which other tests fill with the same pairs)
    math_verifier._cache.clear()
    cpu = pool.cpu_seconds
    assert verifier.score("\\boxed{\\log_2 8}", "3").value == 1.0
    assert pool.cpu_seconds > cpu


def test_sub_second_limit_works_off_the_main_thread():
    v = MathVerifier(timeout=0.3)
    v.start()
    out = {}
    worker = threading.Thread(target=lambda: out.update(s=v.score(PATHOLOGICAL, "5"), t=time.monotonic()))
    start = time.monotonic()
    worker.start()
    worker.join(timeout=30)
    assert out["s"].reason == TIMEOUT and out["t"] - start < 0.3 + MARGIN


HUGE = {
    "dollars": "$" * 1_000_000,
    "math_spans": "$x$ " * 200_000,
    "box_stream": "".join(f"\\boxed{{{i}}}" for i in range(100_000)),
    "unclosed_boxes": "\\boxed{" * 200_000,
    "letters_in_box": "\\boxed{" + "a" * 200_000 + "}",
    "braces": "{" * 500_000 + "}" * 500_000,
    "statements": "The answer is " * 100_000,
    "answer_tags": "<answer>1</answer>" * 50_000,
    "distinct_answer_tags": "".join(f"<answer>{i}</answer>" for i in range(50_000)),
    "deep_parentheses": "\\boxed{" + "(" * 900 + "1" + ")" * 900 + "}",
    "relation_chain": "\\boxed{" + "x<" * 950 + "1}",
    "equation_chain": "\\boxed{" + "x=" * 950 + "1}",
    "list_of_relations": "\\boxed{" + ", ".join(["x<1"] * 300) + "}",
}


@pytest.mark.parametrize("name", sorted(HUGE))
def test_huge_adversarial_completions_stay_cheap(verifier, name):
    # the in-process stages have no timer: they must be linear (a quadratic scan of 1 MB takes minutes of
    # CPU). This process's CPU time, not wall time, so a loaded machine does not make it fail.
    start = time.process_time()
    score = verifier.score(HUGE[name], "5")
    assert time.process_time() - start < 5.0
    assert score.value == 0.0 and score.reason in REASONS


@pytest.mark.parametrize("answer", [
    "2^{2^{2^{2^{2^{2}}}}}", "9^{9^{9^{9}}}", "10^{10^{10^{10}}}", "100000000!", "(10^{100})!",
])
def test_guards_refuse_before_evaluating(verifier, answer):
    # a refusal and a worker killed at the limit both score TIMEOUT: the `why` and the pool's count of
    # replaced workers tell them apart (a guard that let the answer through would cost a killed worker)
    pool = get_pool(verifier.workers)
    replaced, start = pool.replaced, time.monotonic()
    score = verifier.score("\\boxed{" + answer + "}", "5")
    assert score.value == 0.0 and score.reason == TIMEOUT
    assert score.info["why"].startswith("refused before evaluation"), score.info
    assert pool.replaced == replaced
    assert time.monotonic() - start < LIMIT + MARGIN


@pytest.mark.parametrize("reference", ["\\frac{1}{", "???", "", "  ", None, "\\sqrt{", "x^{", float("nan")])
def test_unusable_reference_is_bad_reference(verifier, reference):
    for answer in ("5", "\\frac{1}{2}", "\\sqrt{2}"):
        score = verifier.score("\\boxed{" + answer + "}", reference)
        assert (score.value, score.reason) == (0.0, BAD_REFERENCE), (reference, answer, score)


def test_a_reference_that_ran_out_of_time_is_tried_again_and_under_a_longer_limit():
    """Parsing a reference in time depends on the limit and the load: a timeout is not cached as a
    bad reference for good (a verifier with a longer limit must still read it)."""
    ref = " + ".join(f"\\tan x_{{{i}}} \\cos x_{{{i}}}" for i in range(40))  # about 1 s of sympy parsing
    for cache in (math_verifier._cache, math_verifier._valid_refs, math_verifier._slow_refs):
        cache.clear()
    rushed, patient = MathVerifier(timeout=0.05), MathVerifier(timeout=60.0)
    rushed.start()
    workers = get_pool(rushed.workers)
    for _ in range(math_verifier._REFERENCE_TRIES):  # each batch tries again at this limit
        cpu = workers.cpu_seconds
        score = rushed.score("\\boxed{" + ref + "}", ref)
        assert (score.value, score.reason) == (0.0, BAD_REFERENCE) and "time limit" in score.info["why"]
        assert workers.cpu_seconds > cpu
    cpu = workers.cpu_seconds  # then it gives up at this limit: nothing is sent to the workers
    assert rushed.score("\\boxed{1}", ref).reason == BAD_REFERENCE
    assert workers.cpu_seconds == cpu
    score = patient.score("\\boxed{" + ref + "}", ref)
    assert (score.value, score.reason) == (1.0, None), score.info
    assert math_verifier._valid_refs[ref] is None and ref not in math_verifier._slow_refs
    assert rushed.score("\\boxed{" + ref + "}", ref).value == 1.0  # parsed once: good at any limit now


THREAD_PAIRS = [
    ("\\boxed{\\sqrt{8}}", "2\\sqrt{2}"), ("\\boxed{\\log_2 8}", "3"), ("\\boxed{\\log_3 9}", "3"),
    ("\\boxed{x^2-1}", "(x-1)(x+1)"), ("\\boxed{\\frac{1}{2}}", "0.5"), ("\\boxed{(1,2)}", "(2,1)"),
    ("\\boxed{\\sin^2 x + \\cos^2 x}", "1"), ("\\boxed{y = 2x+1}", "2x - y + 1 = 0"),
    ("\\boxed{3 or 4}", "3"), ("\\boxed{\\{1,2\\}}", "x=1, x=2"), ("\\boxed{\\ln(e^2)}", "2"),
    ("\\boxed{\\tan x \\cos x}", "\\sin x"), ("\\boxed{\\log_2 9}", "3"), ("no answer here", "4"),
    ("\\boxed{\\binom{6}{3}}", "20"), ("\\boxed{e^{i\\pi}}", "-1"),
]


def test_eight_threads_agree_with_single_threaded_scoring():
    v = MathVerifier(timeout=10.0)  # generous: only agreement is under test here
    v.start()
    workers = get_pool(v.workers)
    expected = [v.score(c, r).to_dict() for c, r in THREAD_PAIRS]
    # Each threaded phase starts from an empty verdict cache, so that the threads send their
    # symbolic checks to the worker pool at once instead of reading the verdicts stored above.
    math_verifier._cache.clear()
    runs = workers.cpu_seconds
    jobs = THREAD_PAIRS * 4
    with ThreadPoolExecutor(max_workers=8) as pool:
        got = list(pool.map(lambda pair: v.score(*pair).to_dict(), jobs))
    assert workers.cpu_seconds > runs
    assert [g["score"] for g in got] == [e["score"] for e in expected] * 4
    assert [g["reason"] for g in got] == [e["reason"] for e in expected] * 4
    math_verifier._cache.clear()
    runs = workers.cpu_seconds
    with ThreadPoolExecutor(max_workers=8) as pool:
        batches = list(pool.map(lambda _: v.score_batch([c for c, _ in THREAD_PAIRS], [r for _, r in THREAD_PAIRS]),
                                range(8)))
    assert workers.cpu_seconds > runs
    for batch in batches:
        assert [s.value for s in batch] == [e["score"] for e in expected]


def _run_python(code: str, env=None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True,
                          timeout=180, env=env)


def test_broken_installation_fails_the_canary_loudly(tmp_path):
    # A latex2sympy that parses everything as 0 is a broken install: the pool must refuse to start.
    fake = tmp_path / "latex2sympy2_extended"
    fake.mkdir()
    (fake / "__init__.py").write_text(
        "import sympy\n"
        "class NormalizationConfig:\n    def __init__(self, **kw):\n        pass\n"
        "def latex2sympy(s, **kw):\n    return sympy.Integer(0)\n"
    )
    (fake / "latex2sympy2.py").write_text(
        "class ConversionConfig:\n    def __init__(self, **kw):\n        pass\n"
    )
    env = dict(os.environ, PYTHONPATH=str(tmp_path))
    done = _run_python("""
        from rlvr.verifiers.math import CanaryError, MathVerifier
        try:
            MathVerifier().start()
        except CanaryError as exc:
            print("CANARY", exc)
    """, env=env)
    assert "CANARY" in done.stdout and "canary failed" in done.stdout, done.stderr[-2000:]


def test_no_worker_outlives_the_interpreter():
    done = _run_python("""
        import threading
        from rlvr.verifiers.math import MathVerifier
        from rlvr.verifiers.math.pool import get_pool
        v = MathVerifier(timeout=0.5)
        threading.Thread(target=lambda: v.score("\\\\boxed{\\\\log_2 8}", "3")).start()
        assert v.score("\\\\boxed{\\\\log_2 8}", "3").value == 1.0
        pool = get_pool()
        print(" ".join(str(p) for p in [pool._zygote.process.pid, *(w.pid for w in pool._all)]))
    """)
    assert done.returncode == 0, done.stderr[-2000:]
    pids = [int(p) for p in done.stdout.split()]
    assert len(pids) >= 2
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and any(_alive(p) for p in pids):
        time.sleep(0.1)
    assert not any(_alive(p) for p in pids)


def test_a_forked_child_uses_its_own_pool_and_leaves_the_parents_alone():
    done = _run_python("""
        import os, sys
        from rlvr.verifiers.math import MathVerifier
        v = MathVerifier()
        assert v.score("\\\\boxed{\\\\log_2 8}", "3").value == 1.0
        pid = os.fork()
        if pid == 0:  # the child scores too, then exits normally (running its atexit handlers)
            ok = v.score("\\\\boxed{\\\\log_3 9}", "2").value == 1.0
            sys.exit(0 if ok else 3)
        _, status = os.waitpid(pid, 0)
        assert os.waitstatus_to_exitcode(status) == 0
        assert v.score("\\\\boxed{\\\\log_2 16}", "4").value == 1.0
        print("OK")
    """)
    assert done.stdout.strip() == "OK", done.stderr[-2000:]


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().split(")")[-1].split()[0] != "Z"
    except FileNotFoundError:
        return False
