"""The repository grader on a packaged task, with a real Docker engine: gold 1, empty 0,
a partial fix its fraction, dropped paths named, a hung test failing with the grade returned."""

from __future__ import annotations

import re
import time

import pytest
from repo_helpers import repo_task, task_image

from rlvr.envs.repo_mutate import unified_diff
from rlvr.envs.repo_task import RepoTask, load_catalogue, parse_tasks
from rlvr.sandbox.repo_grader import RepoGrader, filter_diff, split_diff

pytestmark = pytest.mark.docker


@pytest.fixture(scope="module")
def task() -> RepoTask:
    return repo_task()


@pytest.fixture(scope="module")
def image(task):
    return task_image(task)


@pytest.fixture(scope="module")
def grader(image):
    grader = RepoGrader(warm=1)
    grader.prewarm(image)
    yield grader
    grader.close()


def _grade(grader, image, task, diff, mode="all", **kw):
    kw.setdefault("source_paths", task.source_paths)
    return grader.grade(image, task.repo_dir, task.setup_patch, diff, task.fail_to_pass, task.pass_to_pass,
                        mode=mode, **kw)


def test_gold_scores_one_and_empty_scores_zero(grader, image, task):
    gold = _grade(grader, image, task, task.gold_patch)
    assert (gold.value, gold.reason) == (1.0, "passed"), gold.info
    assert set(gold.tests) == set(task.fail_to_pass) | set(task.pass_to_pass)
    empty = _grade(grader, image, task, "")
    assert (empty.value, empty.reason) == (0.0, "tests_failed")
    assert all(empty.tests[t] == "failed" for t in task.fail_to_pass)
    assert all(empty.tests[t] == "passed" for t in task.pass_to_pass)
    fraction = _grade(grader, image, task, "", mode="fraction")
    assert fraction.value == pytest.approx(len(task.pass_to_pass) / len(fraction.tests))


def _pristine(task: RepoTask, path: str) -> str:
    """The file as released (from the cached sdist)."""
    import tarfile

    from rlvr.sandbox.repo_image import fetch_sdist

    with tarfile.open(fetch_sdist(task.package, task.version)) as archive:
        member = next(m for m in archive.getmembers() if m.name.split("/", 1)[-1] == path)
        return archive.extractfile(member).read().decode()


def _line_change(patch: str) -> tuple[str, str]:
    minus = [line[1:] for line in patch.splitlines() if line.startswith("-") and not line.startswith("---")]
    plus = [line[1:] for line in patch.splitlines() if line.startswith("+") and not line.startswith("+++")]
    return minus[0], plus[0]


def test_partial_fix_scores_its_fraction(grader, image):
    """Two bugs at once; fixing one passes exactly that one's FAIL_TO_PASS tests."""
    tasks = load_catalogue(["inflection"])
    first, second = next((a, b) for a in tasks for b in tasks
                         if a.mutation.file == b.mutation.file and abs(a.mutation.line - b.mutation.line) > 8
                         and not set(a.fail_to_pass) & set(b.fail_to_pass))
    path = first.mutation.file
    pristine = _pristine(first, path)
    lines = pristine.splitlines(keepends=True)
    for task in (first, second):
        old, new = _line_change(task.mutation.patch)
        assert lines[task.mutation.line - 1].rstrip("\n") == old
        lines[task.mutation.line - 1] = new + "\n"
    both = "".join(lines)
    setup = unified_diff(path, pristine, both)
    lines[first.mutation.line - 1] = pristine.splitlines(keepends=True)[first.mutation.line - 1]
    fix_first = unified_diff(path, both, "".join(lines))
    f2p = list(first.fail_to_pass) + list(second.fail_to_pass)
    grade = grader.grade(image, "/repo", setup, fix_first, f2p, [], source_paths=first.source_paths, mode="fraction")
    assert grade.value == pytest.approx(len(first.fail_to_pass) / len(f2p)), grade.tests
    assert all(grade.tests[t] == "passed" for t in first.fail_to_pass)
    assert all(grade.tests[t] == "failed" for t in second.fail_to_pass)
    strict = grader.grade(image, "/repo", setup, fix_first, f2p, [], source_paths=first.source_paths, mode="all")
    assert strict.value == 0.0


def test_hung_test_fails_and_the_grade_comes_back(grader, image, task):
    """A fix that loops forever inside one function: the deadline ends the run."""
    path = task.mutation.file
    pristine = _pristine(task, path).splitlines(keepends=True)
    at = task.mutation.line - 1
    old, new = _line_change(task.mutation.patch)
    buggy = pristine[:at] + [new + "\n"] + pristine[at + 1:]
    indent = old[: len(old) - len(old.lstrip())]
    looping = pristine[:at] + [f"{indent}while True:\n", f"{indent}    pass\n"] + pristine[at:]
    diff = unified_diff(path, "".join(buggy), "".join(looping))
    started = time.monotonic()
    grade = _grade(grader, image, task, diff, timeout=8)
    took = time.monotonic() - started
    assert grade.value == 0.0 and grade.reason in ("timeout", "tests_failed"), grade.info
    assert grade.info["timed_out"], grade.info
    assert took < 8 + 15, took


def test_dropped_paths_are_named_and_not_applied(grader, image, task):
    test_file = task.fail_to_pass[0].split("::")[0]
    planted = ("diff --git a/conftest.py b/conftest.py\nnew file mode 100644\n--- /dev/null\n+++ b/conftest.py\n"
               "@@ -0,0 +1 @@\n+raise SystemExit(0)\n")
    grade = _grade(grader, image, task, task.gold_patch + planted)
    assert grade.value == 1.0
    assert grade.dropped == ["conftest.py (configuration)"]
    kept, dropped = filter_diff(planted + unified_diff(test_file, "x\n", "y\n"), task.source_paths)
    assert kept == "" and dropped == ["conftest.py (configuration)", f"{test_file} (test file)"]


def test_split_diff_reads_hunks_by_their_counts():
    """A removed line '--- x' inside a hunk does not start a new file (no smuggled headers)."""
    diff = ("--- a/pkg/m.py\n+++ b/pkg/m.py\n@@ -1,2 +1,2 @@\n--- a/conftest.py\n++++ b/conftest.py\n"
            " keep\n")
    assert split_diff(diff) == [(["pkg/m.py"], diff)]
    kept, dropped = filter_diff(diff, ["pkg"])
    assert kept == diff and dropped == []


def test_task_records_round_trip_and_hash_is_checked(task, tmp_path):
    from rlvr.envs.repo_task import load_tasks, save_tasks

    path = tmp_path / "t.jsonl"
    save_tasks([task], path)
    assert load_tasks(path) == [task]
    record = path.read_text().replace(task.fail_to_pass[0], task.fail_to_pass[0] + "x")
    with pytest.raises(ValueError, match="content_hash"):
        parse_tasks(record)


def test_repo_check_passes_a_sound_task_and_says_what_is_wrong_with_an_unsound_one(grader, image, task):
    """`rlvr repo check`'s verdict per task: gold must score 1, empty 0 with exactly FAIL_TO_PASS failing."""
    from dataclasses import replace

    from rlvr.envs.repo_check import check_task

    assert check_task(task, grader.grade, image, 120.0) is None
    assert check_task(replace(task, gold_patch=""), grader.grade, image, 120.0).startswith("gold scored 0.0")
    passing = task.pass_to_pass[0]  # listed as failing, though the bug leaves it passing
    claimed = replace(task, fail_to_pass=(*task.fail_to_pass, passing), pass_to_pass=task.pass_to_pass[1:])
    assert check_task(claimed, grader.grade, image, 120.0).startswith("empty scored")


def test_repo_check_counts_sound_tasks_per_package_with_check_env(task):
    from rlvr.envs.repo_check import check

    result = check([task], workers=1, attacks=True)
    assert (result["tasks"], result["sound"], result["unsound"], result["bad"]) == (1, 1, 0, []), result
    assert result["packages"] == {task.package: 1} and result["unsound_envs"] == [] and result["attacks"]


def test_every_attack_on_a_task_scores_zero_and_a_naive_grade_is_caught(grader, image, task):
    """`rlvr repo check --attacks` on one task passes; with a grade that any attack can win (one that grades
    the gold patch whatever diff comes) the same check fails."""
    from rlvr.envs.repo_attacks import PACKAGE_CODE, PLANTED, attack_diffs, check_attacks
    from rlvr.sandbox.repo_image import fetch_sdist

    sdist = fetch_sdist(task.package, task.version, log=lambda _message: None)
    graded, dropped = attack_diffs(task, sdist)
    assert set(graded) == set(PACKAGE_CODE) and {f"planted {p}" for p in PLANTED} <= set(dropped)
    assert all(task.mutation.file in d for d in graded.values())
    assert check_attacks(task, grader.grade, image, sdist) is None

    def gold_whatever_comes(image, repo_dir, setup_patch, diff, *args, **kwargs):
        return grader.grade(image, repo_dir, setup_patch, task.gold_patch, *args, **kwargs)

    assert check_attacks(task, gold_whatever_comes, image, sdist).startswith("attack ")


def _buggy_and_fixed(task: RepoTask) -> tuple[str, list[str], list[str]]:
    path = task.mutation.file
    pristine = _pristine(task, path).splitlines(keepends=True)
    at = task.mutation.line - 1
    buggy = pristine[:at] + [_line_change(task.mutation.patch)[1] + "\n"] + pristine[at + 1:]
    return path, buggy, pristine


def test_a_container_the_tests_left_clean_grades_again_and_one_with_leftovers_is_replaced(image, task):
    """Reuse is what makes grading cheap (bench/repo_tasks.py); it must change no verdict, and whatever the
    package's code leaves behind (here a file in /tmp, written at import) must never meet a later grade."""
    path, buggy, fixed = _buggy_and_fixed(task)
    planting = unified_diff(path, "".join(buggy), "open('/tmp/planted', 'w').write('x')\n" + "".join(fixed))
    reusing = RepoGrader(warm=0)
    try:
        gold = _grade(reusing, image, task, task.gold_patch)
        empty = _grade(reusing, image, task, "")
        assert (gold.value, empty.value) == (1.0, 0.0), (gold.info, empty.info)
        assert empty.info["container"] == gold.info["container"] and empty.info["reused"], empty.info
        planted = _grade(reusing, image, task, planting)
        assert planted.value == 1.0 and planted.info["container"] == gold.info["container"], planted.info
        assert planted.info["leftovers"] == ["/tmp/planted"], planted.info
        after = _grade(reusing, image, task, "")
        assert after.value == 0.0 and after.info["container"] != planted.info["container"], after.info
        assert not after.info["reused"]
    finally:
        reusing.close()
    once = RepoGrader(warm=0, reuse=False)
    try:
        first, second = (_grade(once, image, task, task.gold_patch) for _ in range(2))
        assert first.value == second.value == 1.0
        assert first.info["container"] != second.info["container"]
    finally:
        once.close()


def test_failure_messages_carry_no_memory_addresses(grader, image, task):
    """`<function f at 0x7f...>` in an assertion message differs from run to run; the grade's info must not
    (gymnasium's check_env compares a step's info across two runs)."""
    path, buggy, _ = _buggy_and_fixed(task)
    objects = ("import types as _t\nfor _n, _v in list(globals().items()):\n"
               "    if isinstance(_v, _t.FunctionType) and not _n.startswith('_'):\n"
               "        globals()[_n] = lambda *a, **k: object()\n")
    diff = unified_diff(path, "".join(buggy), "".join(buggy) + objects)
    grade = _grade(grader, image, task, diff)
    messages = [f["message"] for f in grade.info["failures"].values()]
    assert grade.value == 0.0 and any("object at 0x..." in m for m in messages), messages[:2]
    assert not any(re.search(r"0x[0-9a-f]{6,}", m) for m in messages), messages[:2]
