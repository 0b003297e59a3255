"""The trusted harness's pure parts (no Docker): value wire format, output comparison, asserts
split into separately counted tests, and the local backend end to end."""

from __future__ import annotations

import json
import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rlvr.sandbox import runner, tester, values
from rlvr.sandbox.pool import SandboxPool
from rlvr.sandbox.protocol import Job, Result

plain = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text() | st.binary()
    | st.complex_numbers(allow_nan=False),
    lambda inner: st.lists(inner, max_size=4) | st.tuples(inner, inner)
    | st.dictionaries(st.text(max_size=3) | st.integers(), inner, max_size=3)
    | st.frozensets(st.integers() | st.text(max_size=3), max_size=3),
    max_leaves=20,
)


@given(plain)
def test_runner_encoding_round_trips_through_the_strict_decoder(value):
    decoded = values.decode(json.loads(runner.encode(value)))
    assert decoded == value and type(decoded) is type(value)


def test_non_finite_floats_and_big_ints_survive():
    for value in (math.inf, -math.inf, 10**5000):
        assert values.decode(json.loads(runner.encode(value))) == value
    assert math.isnan(values.decode(json.loads(runner.encode(math.nan))))


def test_lying_objects_stay_behind_as_opaque_handles():
    class Liar(int):
        def __eq__(self, other):
            return True

    value = values.decode(json.loads(runner.encode([Liar(3), object()])))
    assert all(type(v) is values.Opaque for v in value)
    assert value[0] != 3 and not (value[0] == value[1])
    with pytest.raises(TypeError):
        bool(value[0])


@pytest.mark.parametrize("wire", [
    {"~": "eval", "v": "__import__('os')"}, {"~": "tuple"}, {"~": "dict", "v": [[1]]},
    {"~": "complex", "v": ["1", 2]}, {"x": 1}, {"~": "set", "v": [[1]]},
])
def test_decoder_rejects_malformed_values(wire):
    with pytest.raises((ValueError, TypeError)):
        values.decode(wire)


def test_collections_containers_travel_as_their_plain_form():
    import collections

    point = collections.namedtuple("Point", "x y")(1, 2)
    counts = collections.Counter("aab")
    assert values.decode(json.loads(runner.encode(point))) == (1, 2)
    assert values.decode(json.loads(runner.encode(counts))) == {"a": 2, "b": 1}


@pytest.mark.parametrize("got, expected, mode, verdict", [
    (b"3\n", "3", "exact", None),
    (b"1 2  \r\n3\r\n\r\n", "1 2\n3\n", "exact", None),
    (b"3.0000001\n", "3", "exact", "wrong output"),
    (b"3.0000001\n", "3", "float", None),
    (b"3.1\n", "3", "float", "wrong output"),
    (b"nan\n", "nan", "float", None),  # identical tokens match; a NaN never equals a number
    (b"nan\n", "1.0", "float", "wrong output"),
    (b"\xff\xfe3\n", "3", "exact", "output is not valid UTF-8"),
    (b"yes 1.5", "yes 1.50000001", "float", None),
    (b"1 2", "1 2 3", "float", "wrong output"),
])
def test_output_comparison(got, expected, mode, verdict):
    assert tester.compare_output(got, expected, mode) == verdict


def test_each_assert_is_its_own_test_and_constant_asserts_do_not_count():
    rewriter = tester._AssertRewriter()
    rewriter.visit(tester.ast.parse(
        "def check(c):\n    assert c(1) == 1\n    assert True, 'hint'\n    for i in range(3):\n"
        "        assert c(i) >= 0\n"
    ))
    assert rewriter.sources == ["c(1) == 1", "c(i) >= 0"]


def test_job_validation_rejects_bad_input():
    with pytest.raises(ValueError):
        Job(code="x").to_wire()
    with pytest.raises(ValueError):
        Job(code="x", tests="def check(c): pass", entry_point="not an identifier").to_wire()
    with pytest.raises(ValueError):
        Job(code="x", io_tests=[{"input": "1"}]).to_wire()
    with pytest.raises(ValueError):
        Job(code="x", test_list=["assert f()"], timeout=0).to_wire()


def test_a_reply_claiming_passed_without_tests_is_an_error():
    assert Result.from_wire({"status": "passed", "tests": []}).status == "error"
    assert Result.from_wire({"status": "passed", "tests": [{"passed": False}]}).status == "error"
    assert Result.from_wire("garbage").status == "error"


@pytest.fixture(scope="module")
def local_pool():
    pool = SandboxPool(backend="local", size=2)
    yield pool
    pool.close()


def test_local_backend_judges_with_the_same_harness(local_pool):
    tests = "def check(candidate):\n    assert candidate([3, 1, 2]) == [1, 2, 3]\n    assert candidate([]) == []\n"
    good, wrong, exits, loops = local_pool.run_batch([
        Job(code="def srt(xs):\n    return sorted(xs)\n", tests=tests, entry_point="srt"),
        Job(code="def srt(xs):\n    return xs\n", tests=tests, entry_point="srt"),
        Job(code="import sys\nprint('PASSED')\nsys.exit(0)\n", tests=tests, entry_point="srt"),
        Job(code="def srt(xs):\n    while True:\n        pass\n", tests=tests, entry_point="srt", timeout=1.0),
    ])
    assert (good.status, good.passed, good.total) == ("passed", 2, 2)
    assert (wrong.status, wrong.passed) == ("failed", 1)
    assert exits.status == "failed" and exits.passed == 0
    assert loops.status == "timeout" and loops.passed == 0


def test_local_backend_stdin_stdout_and_memory(local_pool):
    cases = [{"input": "2 3\n", "output": "5\n"}, {"input": "10 20\n", "output": "30\n"}]
    adder = Job(code="a, b = map(int, input().split())\nprint(a + b)\n", io_tests=cases)
    hog = Job(code="x = bytearray(1 << 40)\n", io_tests=cases)
    flood = Job(code="while True:\n    print('x' * 4096)\n", io_tests=cases[:1], timeout=5.0)
    add, mem, out = local_pool.run_batch([adder, hog, flood])
    assert (add.status, add.passed, add.total) == ("passed", 2, 2)
    assert mem.status == "memory" and mem.passed == 0
    assert out.status == "failed" and out.truncated and "truncated" in out.stdout
