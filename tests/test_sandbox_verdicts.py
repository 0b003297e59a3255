"""Verdicts an adversarial suite found wrong, on the real Docker engine.

* Values nested thousands deep cross between tester and runner: a correct solution passes
  whatever depth the interpreter itself allows.
* A program whose main process keeps running after its functions return (a non-daemon
  thread, a hanging `atexit`) never ends in a real run: the job is a `timeout` and no test
  passes. A child process it leaves running does not keep it alive: it is killed and
  counted, and the job passes (test_sandbox_leftovers has the cases).
* A stdin/stdout case whose program exits non-zero fails, with the reason in its verdict.
* A SIGKILL the sandbox did not send is `memory` only when the cgroup counted an OOM kill
  (the kernel OOM kill itself is exercised by the memory bombs of test_sandbox_languages).
* Memory and output caps are set per job (from `CodeVerifier` too).
"""

from __future__ import annotations

import pytest
from conftest import require_docker

from rlvr.sandbox.pool import SandboxPool
from rlvr.sandbox.protocol import Job, Limits
from rlvr.verifiers.code import CodeVerifier

pytestmark = pytest.mark.docker

SQ_TESTS = "def check(candidate):\n    assert candidate(2) == 4\n    assert candidate(3) == 9\n"
ADD = [{"input": "1 2\n", "output": "3\n"}, {"input": "5 7\n", "output": "12\n"}]


@pytest.fixture(scope="module")
def pool():
    p = require_docker(lambda: SandboxPool(backend="docker", size=2))
    yield p
    p.close()


# -- deeply nested values --

DEEP_TESTS = '''
import sys
sys.setrecursionlimit(50000)
def chain(n):
    node = None
    for i in range(n):
        node = [i, node]
    return node
def check(candidate):
    assert candidate(chain(3000)) == 3000
    assert candidate(chain(12000)) == 12000
    assert candidate(chain(0)) == 0
'''
DEEP_SOLUTION = "def depth(node):\n    return 0 if node is None else 1 + depth(node[1])\n"
BUILDS_DEEP = '''
import sys
sys.setrecursionlimit(50000)
def check(candidate):
    value = candidate(5000)
    n = 0
    while value != ():
        n += 1
        value = value[0]
    assert n == 5000
    assert candidate(5000) == candidate(5000)
'''
BUILDS_SOLUTION = "def nest(n):\n    v = ()\n    for _ in range(n):\n        v = (v, {'k': [1, 2]})\n    return v\n"


def test_deep_arguments_and_return_values_cross_intact(pool):
    args, returns, wrong = pool.run_batch([
        Job(code=DEEP_SOLUTION, tests=DEEP_TESTS, entry_point="depth", timeout=10.0),
        Job(code=BUILDS_SOLUTION, tests=BUILDS_DEEP, entry_point="nest", timeout=10.0),
        Job(code="def depth(node):\n    return 3000\n", tests=DEEP_TESTS, entry_point="depth", timeout=10.0),
    ])
    assert (args.status, args.passed, args.total) == ("passed", 3, 3), args.tests
    assert (returns.status, returns.passed) == ("passed", 2), returns.tests
    assert (wrong.status, wrong.passed) == ("failed", 1)


def test_the_solution_keeps_its_own_recursion_limit_when_the_tests_do_not_raise_it(pool):
    tests = "def check(candidate):\n    assert candidate(list(range(5))) == 5\n    assert candidate(list(range(5000))) == 5000\n"
    code = "def count(xs, i=0):\n    return 0 if i == len(xs) else 1 + count(xs, i + 1)\n"
    result = pool.run(Job(code=code, tests=tests, entry_point="count"))
    assert result.passed == 1 and "RecursionError" in result.tests[1]["error"]


def test_a_cyclic_return_value_is_refused_not_hung(pool):
    code = "def loop(x):\n    a = []\n    a.append(a)\n    return a\n"
    result = pool.run(Job(code=code, tests="def check(candidate):\n    assert candidate(1) == []\n",
                          entry_point="loop", timeout=10.0))
    assert result.status == "failed" and "too large" in result.tests[0]["error"]


# -- programs that never end --

def test_a_non_daemon_thread_after_the_functions_return_is_a_timeout_a_child_process_is_not(pool):
    lingering_thread = ("import threading, time\ndef sq(x):\n"
                        "    threading.Thread(target=lambda: time.sleep(3600)).start()\n    return x * x\n")
    lingering_process = ("import subprocess\ndef sq(x):\n    subprocess.Popen(['sleep', '3600'])\n    return x * x\n")
    finishing_thread = ("import threading, time\ndef sq(x):\n"
                        "    threading.Thread(target=lambda: time.sleep(0.2)).start()\n    return x * x\n")
    hanging_atexit = "import atexit, time\natexit.register(lambda: time.sleep(3600))\ndef sq(x):\n    return x * x\n"
    results = pool.run_batch([Job(code=c, tests=SQ_TESTS, entry_point="sq", timeout=2.0)
                              for c in (lingering_thread, lingering_process, finishing_thread, hanging_atexit)])
    for name, result in zip(("thread", "process", "finishing", "atexit"), results):
        if name in ("finishing", "process"):
            assert (result.status, result.passed) == ("passed", 2), (name, result.tests)
            assert result.leftovers == (2 if name == "process" else 0), (name, result.leftovers)  # one per call
        else:
            assert (result.status, result.passed) == ("timeout", 0), (name, result.tests)
            assert "did not end" in result.tests[0]["error"]


def test_a_stdin_stdout_program_whose_thread_never_ends_is_a_timeout(pool):
    code = ("import threading, time\na, b = map(int, input().split())\nprint(a + b, flush=True)\n"
            "threading.Thread(target=lambda: time.sleep(3600)).start()\n")
    result = pool.run(Job(code=code, io_tests=ADD, timeout=2.0))
    assert (result.status, result.passed) == ("timeout", 0)


# -- exit status of stdin/stdout programs --

def test_a_case_that_exits_non_zero_fails_with_the_reason(pool):
    reads_past = "a, b = map(int, input().split())\nprint(a + b)\ninput()\n"
    raises = "a, b = map(int, input().split())\nprint(a + b)\nraise ValueError('after the answer')\n"
    exits = "import sys\na, b = map(int, input().split())\nprint(a + b)\nsys.exit(3)\n"
    honest = "import sys\nprint(sum(map(int, sys.stdin.read().split())))\nsys.exit(0)\n"
    past, raised, exited, ok = pool.run_batch([Job(code=c, io_tests=ADD) for c in (reads_past, raises, exits, honest)])
    assert (past.status, past.passed) == ("failed", 0)
    assert past.tests[0]["error"] == "runtime error (exit status 1): EOFError: EOF when reading a line"
    assert past.tests[0]["got"] == "3\n"
    assert raised.passed == 0 and "ValueError: after the answer" in raised.tests[1]["error"]
    assert exited.passed == 0 and exited.tests[0]["error"] == "runtime error (exit status 3)"
    assert (ok.status, ok.passed) == ("passed", 2)


# -- kills the sandbox did not send --

def test_a_program_that_kills_its_own_process_group_is_a_crash_not_memory(pool):
    io = "import os, signal\nprint(3, flush=True)\nos.killpg(0, signal.SIGKILL)\n"
    call = "import os, signal\ndef sq(x):\n    os.kill(os.getpid(), signal.SIGKILL)\n"
    by_io, by_call = pool.run_batch([Job(code=io, io_tests=ADD), Job(code=call, tests=SQ_TESTS, entry_point="sq")])
    for result in (by_io, by_call):
        assert result.status == "crash", result
        assert any("not sent by the sandbox, with no OOM kill recorded" in e for e in result.errors), result.errors
    assert "runtime error (killed by SIGKILL)" in by_io.tests[0]["error"]


# -- per-job limits --

def test_memory_and_output_caps_are_per_job(pool):
    grab = "x = bytearray(300 * 2**20)\nprint(len(x) > 0)\n"
    shout = "print('y' * 5000)\n"
    roomy, tight, loud, quiet = pool.run_batch([
        Job(code=grab, io_tests=[{"input": "", "output": "True\n"}]),
        Job(code=grab, io_tests=[{"input": "", "output": "True\n"}], memory_mb=128),
        Job(code=shout, io_tests=[{"input": "", "output": "y" * 5000 + "\n"}]),
        Job(code=shout, io_tests=[{"input": "", "output": "y" * 5000 + "\n"}], output_limit=1000),
    ])
    assert roomy.status == "passed" and tight.status == "memory"
    assert loud.status == "passed" and quiet.tests[0]["error"] == "output limit exceeded"
    with pytest.raises(ValueError, match="memory_mb"):
        Job(code="", io_tests=ADD, memory_mb=10**6).to_wire(Limits())


def test_code_verifier_sets_the_caps_per_job(pool):
    verifier = CodeVerifier(timeout=3.0, output_limit=1000)
    code = "```python\nprint('y' * 5000)\n```"
    capped = verifier.score(code, io_tests=[{"input": "", "output": "y" * 5000 + "\n"}])
    assert capped.value == 0.0 and capped.info["tests"][0]["error"] == "output limit exceeded"
    task_memory = verifier.score("```python\nx = bytearray(300 * 2**20)\nprint(1)\n```",
                                 io_tests=[{"input": "", "output": "1\n"}], memory_mb=100)
    assert task_memory.info["status"] == "memory"
