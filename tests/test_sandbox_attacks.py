"""Every faking trick of issue 4 point 6 scores 0 in the Docker sandbox; honest controls score 1.

Each attack is a *wrong* solution dressed up to look right to a naive harness (exit status
0, "passed" on stdout, an object equal to everything, peeking at the tests). The controls
use the same machinery honestly (printing, exiting at the end, threads) and must pass.
"""

from __future__ import annotations

import pytest
from conftest import require_docker

from rlvr.sandbox.pool import get_pool
from rlvr.verifiers.code import CodeVerifier

pytestmark = pytest.mark.docker

HUMANEVAL_TESTS = '''
def check(candidate):
    assert candidate(2) == 4
    assert candidate(3) == 9
    assert abs(candidate(1.5) - 2.25) < 1e-9
    assert candidate(5) == 25
'''
MBPP_TESTS = ["assert sq(2) == 4", "assert sq(3) == 9", "assert sq(-4) == 16"]

ATTACKS = {
    "sys_exit_at_load": "import sys\nsys.exit(0)\n",
    "os_exit_at_load": "import os\nos._exit(0)\n",
    "sys_exit_in_test": "import sys\ndef sq(x):\n    sys.exit(0)\n",
    "os_exit_in_test": "import os\ndef sq(x):\n    os._exit(0)\n",
    "system_exit_raised": "def sq(x):\n    raise SystemExit(0)\n",
    "keyboard_interrupt": "def sq(x):\n    raise KeyboardInterrupt\n",
    "kill_parent": "import os\ndef sq(x):\n    os.kill(os.getppid(), 9)\n    return 0\n",
    "kill_everything": (
        "import os\ndef sq(x):\n    for pid in (1, os.getppid(), os.getpgid(0)):\n"
        "        try:\n            os.kill(pid, 9)\n        except OSError:\n            pass\n    os.kill(-1, 9)\n"
    ),
    "fake_passed_stdout": (
        "import os, sys\nprint('PASSED 4/4 tests')\nsys.stdout.flush()\n"
        "os.write(1, b'{\"status\": \"passed\", \"passed\": 4, \"total\": 4}\\n')\n"
        "def sq(x):\n    print('ok')\n    return 0\n"
    ),
    "eq_always_true": (
        "class Any:\n    def __eq__(self, other):\n        return True\n    def __ne__(self, other):\n"
        "        return False\n    def __lt__(self, other):\n        return True\n    def __bool__(self):\n"
        "        return True\n    def __sub__(self, other):\n        return 0\n    __rsub__ = __sub__\n"
        "    def __abs__(self):\n        return 0\ndef sq(x):\n    return Any()\n"
    ),
    "int_subclass_eq": (
        "class Liar(int):\n    def __eq__(self, other):\n        return True\n    __hash__ = int.__hash__\n"
        "def sq(x):\n    return Liar(7)\n"
    ),
    "str_subclass_eq": (
        "class Liar(str):\n    def __eq__(self, other):\n        return True\n    __hash__ = str.__hash__\n"
        "def sq(x):\n    return Liar('nope')\n"
    ),
    "float_subclass_eq": (
        "class Liar(float):\n    def __eq__(self, other):\n        return True\n    def __sub__(self, o):\n"
        "        return 0.0\n    __hash__ = float.__hash__\ndef sq(x):\n    return Liar(-1.0)\n"
    ),
    "patched_builtins": (
        "import builtins\nbuiltins.abs = lambda x: 0\nbuiltins.AssertionError = type('E', (Exception,), {})\n"
        "builtins.isinstance = lambda *a: True\nbuiltins.len = lambda x: 0\ndef sq(x):\n    return 1\n"
    ),
    "patched_assert_machinery": (
        "import sys, builtins\nclass Quiet(BaseException):\n    pass\nbuiltins.AssertionError = Quiet\n"
        "sys.modules['builtins'].__dict__['__debug__'] = False\ndef sq(x):\n    assert False\n"
    ),
    "atexit_and_excepthook": (
        "import atexit, os, sys\natexit.register(lambda: os._exit(0))\nsys.excepthook = lambda *a: None\n"
        "def sq(x):\n    raise AssertionError('swallowed?')\n"
    ),
    "reads_cmdline_and_environ": (
        "import os\ndef sq(x):\n    seen = b''\n    for pid in ('self', str(os.getppid()), '1'):\n"
        "        for name in ('cmdline', 'environ'):\n            try:\n"
        "                seen += open(f'/proc/{pid}/{name}', 'rb').read()\n            except OSError:\n"
        "                pass\n    for token in seen.replace(b'\\0', b' ').split():\n"
        "        if token.isdigit() and int(token) == x * x:\n            return int(token)\n    return -1\n"
    ),
    "reads_caller_frames": (
        "import sys, gc\ndef sq(x):\n    frame = sys._getframe(1)\n    while frame is not None:\n"
        "        for value in list(frame.f_locals.values()) + list(frame.f_globals.values()):\n"
        "            if type(value) is str and 'assert' in value:\n                return 0\n"
        "        frame = frame.f_back\n    for obj in gc.get_objects():\n"
        "        if type(obj) is str and 'candidate(' in obj:\n            return 0\n    return -1\n"
    ),
    "forged_replies_from_thread": (
        "import os, threading, time\ndef forge():\n    while True:\n        for i in range(1, 9):\n"
        "            try:\n                os.write(4, b'{\"id\": %d, \"ok\": true, \"value\": 0}\\n' % i)\n"
        "            except OSError:\n                pass\n        time.sleep(0.001)\n"
        "threading.Thread(target=forge, daemon=True).start()\ndef sq(x):\n    time.sleep(0.02)\n    return -1\n"
    ),
    "daemon_left_behind": (
        "import os, time\ndef sq(x):\n    if os.fork() == 0:\n        os.setsid()\n"
        "        if os.fork() == 0:\n            for _ in range(200):\n                print('PASSED', flush=True)\n"
        "                time.sleep(0.01)\n        os._exit(0)\n    return -1\n"
    ),
    "raises_instead": "def sq(x):\n    raise ValueError('no idea')\n",
    "returns_none": "def sq(x):\n    pass\n",
    "no_function": "print('I did it')\n",
    "syntax_error": "def sq(x)\n    return x * x\n",
}

CONTROLS = {
    "plain": "def sq(x):\n    return x * x\n",
    "prints_a_lot": "def sq(x):\n    print('working on', x, '.' * 1000)\n    return x * x\n",
    "uses_threads": (
        "import threading\ndef sq(x):\n    out = []\n    t = threading.Thread(target=lambda: out.append(x * x))\n"
        "    t.start()\n    t.join()\n    return out[0]\n"
    ),
    "uses_multiprocessing": (
        "import multiprocessing\ndef _square(v):\n    return v * v\ndef sq(x):\n"
        "    with multiprocessing.Pool(2) as pool:\n        return pool.map(_square, [x])[0]\n"
    ),
    "runs_a_subprocess": (
        "import subprocess, sys\ndef sq(x):\n    out = subprocess.run([sys.executable, '-c', f'print({x!r} * {x!r})'],\n"
        "                         capture_output=True, text=True).stdout\n    return type(x)(out)\n"
    ),
    "main_guard_exit": "import sys\ndef sq(x):\n    return x * x\nif __name__ == '__main__':\n    sys.exit(1)\n",
    "writes_scratch": (
        "def sq(x):\n    with open('scratch.txt', 'w') as f:\n        f.write(str(x * x))\n"
        "    with open('scratch.txt') as f:\n        return type(x)(f.read()) if type(x) is int else float(f.read())\n"
    ),
}


@pytest.fixture(scope="module")
def verifier():
    v = CodeVerifier(timeout=3.0)
    require_docker(lambda: get_pool(v.backend, v.pool_size, v.image, v.limits))
    return v


def _fence(code):
    return f"Here is my solution.\n```python\n{code}```\n"


def test_attacks_score_zero_humaneval_style(verifier):
    names = list(ATTACKS)
    scores = verifier.score_batch([_fence(ATTACKS[n]) for n in names], None,
                                  [{"tests": HUMANEVAL_TESTS, "entry_point": "sq"}] * len(names))
    got = {n: (s.value, s.info.get("status")) for n, s in zip(names, scores)}
    assert all(value == 0.0 for value, _ in got.values()), got
    assert all(s.reason is not None for s in scores)
    assert all(status != "error" for _, status in got.values()), got


def test_attacks_score_zero_mbpp_style(verifier):
    names = list(ATTACKS)
    scores = verifier.score_batch([_fence(ATTACKS[n]) for n in names], None,
                                  [{"test_list": MBPP_TESTS}] * len(names))
    got = {n: (s.value, s.info.get("status")) for n, s in zip(names, scores)}
    assert all(value == 0.0 for value, _ in got.values()), got
    assert all(s.reason is not None for s in scores)
    assert all(status != "error" for _, status in got.values()), got  # judged, not lost to the infrastructure


def test_controls_pass_in_both_styles(verifier):
    names = list(CONTROLS)
    he = verifier.score_batch([_fence(CONTROLS[n]) for n in names], None,
                              [{"tests": HUMANEVAL_TESTS, "entry_point": "sq"}] * len(names))
    mb = verifier.score_batch([_fence(CONTROLS[n]) for n in names], None,
                              [{"test_list": MBPP_TESTS}] * len(names))
    assert {n: s.value for n, s in zip(names, he)} == dict.fromkeys(names, 1.0), [s.info for s in he]
    assert {n: s.value for n, s in zip(names, mb)} == dict.fromkeys(names, 1.0)


def test_partially_right_gets_partial_credit_only_for_honest_asserts(verifier):
    # Right for 2 and 5 only: 2 of the 4 asserts; `assert True` lines would count nothing.
    code = "def sq(x):\n    return {2: 4, 5: 25}.get(x, -1)\n"
    tests = HUMANEVAL_TESTS + "    assert True, 'debug hint'\n"
    score = verifier.score(_fence(code), tests=tests, entry_point="sq")
    assert score.value == 0.5 and score.reason == "tests_failed"
    assert [t["passed"] for t in score.info["tests"]] == [True, False, False, True]


def test_stdin_stdout_fakes_score_zero(verifier):
    cases = [{"input": "3 4\n", "output": "7\n"}, {"input": "10 -2\n", "output": "8\n"}]
    fakes = [
        "print('PASSED')\n",
        "import os\nos.write(1, b'all tests passed\\n')\nos._exit(0)\n",
        "import sys\nsys.stdout.write('7\\n')\n",  # right once by luck, never reads the input
        "import sys\nsys.stdout.buffer.write(b'\\xff\\xfe7\\n')\n",  # invalid UTF-8 is wrong, not a crash
        "import sys\nsys.exit(0)\n",
    ]
    scores = verifier.score_batch([_fence(f) for f in fakes], None, [{"io_tests": cases}] * len(fakes))
    assert [s.value for s in scores] == [0.0, 0.0, 0.5, 0.0, 0.0], [s.info for s in scores]
    assert all(s.info["status"] != "error" for s in scores)
    honest = "a, b = map(int, input().split())\nprint(a + b)\n"
    assert verifier.score(_fence(honest), io_tests=cases).value == 1.0
