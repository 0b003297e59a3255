"""CodeVerifier: code extraction, reasons, modes, batching, pickling, registry and Composite.

The sandbox isolation itself is tested against Docker in test_sandbox_*.py; here the
verifier runs on the local backend so its own logic is tested on any machine.
"""

from __future__ import annotations

import pickle

import pytest

from rlvr.registry import make_verifier
from rlvr.verifiers import Composite, ThinkFormat
from rlvr.verifiers.code import CodeVerifier, extract_code

TESTS = "def check(candidate):\n    assert candidate(1, 2) == 3\n    assert candidate(-1, 1) == 0\n"
GOOD = "def add(a, b):\n    return a + b\n"


@pytest.fixture(scope="module")
def verifier():
    return CodeVerifier(backend="local", timeout=3.0)


def fenced(code, lang="python"):
    return f"Let me write it.\n```{lang}\n{code}```\nThat should work."


@pytest.mark.parametrize("text, code", [
    ("```python\nx = 1\n```", "x = 1\n"),
    ("```py\nx = 1\n```\nthen\n```\nx = 2\n```", "x = 2\n"),  # the last Python block wins
    ("```python\nx = 1\n```\n```text\nnot code\n```", "x = 1\n"),  # other languages are skipped
    ("x = 3\nprint(x)", "x = 3\nprint(x)"),  # no fence: the whole region
    ("```python\nx = 4\n", "x = 4\n"),  # cut off before the closing fence
])
def test_extract_code(text, code):
    assert extract_code(text) == code


def test_correct_wrong_and_partial(verifier):
    good, wrong, half = verifier.score_batch(
        [fenced(GOOD), fenced("def add(a, b):\n    return a - b\n"), fenced("def add(a, b):\n    return 3\n")],
        None, [{"tests": TESTS, "entry_point": "add"}] * 3,
    )
    assert (good.value, good.reason) == (1.0, None)
    assert (wrong.value, wrong.reason) == (0.0, "tests_failed")
    assert (half.value, half.reason) == (0.5, "tests_failed")
    assert half.info["passed"] == 1 and half.info["total"] == 2 and len(half.info["tests"]) == 2


def test_all_or_nothing_mode():
    strict = CodeVerifier(mode="all", backend="local")
    score = strict.score(fenced("def add(a, b):\n    return 3\n"), tests=TESTS, entry_point="add")
    assert (score.value, score.reason) == (0.0, "tests_failed")


def test_bonus_mode_halves_partial_credit_and_pays_a_whole_program_in_full():
    bonus = CodeVerifier(mode="bonus", backend="local")
    good, half = bonus.score_batch([fenced(GOOD), fenced("def add(a, b):\n    return 3\n")], None,
                                   [{"tests": TESTS, "entry_point": "add"}] * 2)
    assert (good.value, good.reason) == (1.0, None)
    assert (half.value, half.reason) == (0.25, "tests_failed")  # one test of two, at half weight


def test_reasons_for_zeros(verifier):
    fields = {"tests": TESTS, "entry_point": "add"}
    assert verifier.score("", **fields).reason == "no_answer"
    assert verifier.score("<think>still thinking ```python\nx=1\n```", **fields).reason == "no_answer"
    assert verifier.score(fenced("def add(a, b)\n    return a + b\n"), **fields).reason == "parse_error"
    assert verifier.score(fenced(GOOD)).reason == "bad_reference"
    assert verifier.score(fenced(GOOD), test_list=["assert add(1, 1) =="]).reason == "bad_reference"
    assert verifier.score(fenced(GOOD), tests="def check(c):\n  assert", entry_point="add").reason == "bad_reference"
    slow = verifier.score(fenced("def add(a, b):\n    while True:\n        pass\n"), **fields)
    assert (slow.value, slow.reason, slow.info["status"]) == (0.0, "timeout", "timeout")


def test_code_after_think_only(verifier):
    text = "<think>```python\ndef add(a, b):\n    return 0\n```</think>" + fenced(GOOD)
    assert verifier.score(text, tests=TESTS, entry_point="add").value == 1.0
    chat = [{"role": "user", "content": "add"}, {"role": "assistant", "content": fenced(GOOD)}]
    assert verifier.score(chat, tests=TESTS, entry_point="add").value == 1.0


def test_tests_can_come_in_the_reference(verifier):
    assert verifier.score(fenced(GOOD), {"tests": TESTS, "entry_point": "add"}).value == 1.0
    assert verifier.score(fenced(GOOD), TESTS, entry_point="add").value == 1.0
    assert verifier.score(fenced(GOOD), {"test": TESTS, "entry_point": "add", "prompt": ""}).value == 1.0
    mbpp = {"test_list": ["assert add(2, 2) == 4", "assert add(0, 0) == 0"]}
    assert verifier.score(fenced(GOOD), mbpp).value == 1.0


def test_prefix_is_trusted_code_before_the_completion(verifier):
    prefix = "import math\n\ndef hyp(a, b):\n"
    body = "    return math.sqrt(a * a + b * b)\n"
    tests = "def check(candidate):\n    assert abs(candidate(3, 4) - 5.0) < 1e-9\n"
    assert verifier.score(body, prefix=prefix, tests=tests, entry_point="hyp").value == 1.0


def test_stdin_stdout_float_mode():
    approx = CodeVerifier(backend="local", compare="float", float_tolerance=1e-3)
    cases = [{"input": "1 3\n", "output": "0.3333\n"}]
    assert approx.score(fenced("a, b = map(int, input().split())\nprint(a / b)\n"), io_tests=cases).value == 1.0
    exact = CodeVerifier(backend="local")
    assert exact.score(fenced("a, b = map(int, input().split())\nprint(a / b)\n"), io_tests=cases).value == 0.0


def test_batch_keeps_input_order_with_unjudged_items(verifier):
    items = [fenced(GOOD), "", fenced("def add(a, b):\n    return -99\n"), fenced(GOOD)]
    scores = verifier.score_batch(items, None, [{"tests": TESTS, "entry_point": "add"}] * 4)
    assert [s.value for s in scores] == [1.0, 0.0, 0.0, 1.0]
    assert [s.reason for s in scores] == [None, "no_answer", "tests_failed", None]
    with pytest.raises(ValueError):
        verifier.score_batch(items, None, [{}])


def test_picklable_registered_and_composable(verifier):
    clone = pickle.loads(pickle.dumps(verifier))
    assert clone.score(fenced(GOOD), tests=TESTS, entry_point="add").value == 1.0
    made = make_verifier("code", backend="local", mode="all")
    assert isinstance(made, CodeVerifier) and made.mode == "all"
    combo = Composite({"correct": (verifier, 1.0), "format": (ThinkFormat(), 0.2)})
    score = combo.score("<think>easy</think>" + fenced(GOOD), tests=TESTS, entry_point="add")
    assert score.components == {"correct": 1.0, "format": 1.0} and score.value == pytest.approx(1.2)


def test_bad_options_raise():
    with pytest.raises(ValueError):
        CodeVerifier(mode="most")
    with pytest.raises(ValueError):
        CodeVerifier(backend="ssh")
    with pytest.raises(TypeError):
        CodeVerifier(colour="blue")
    with pytest.raises(ValueError):
        CodeVerifier(timeout=0)
