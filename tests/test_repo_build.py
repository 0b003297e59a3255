"""Building repository tasks from scratch (sdist from PyPI, image, baseline, mutants) and
grading what was built: the whole path CI must run (#51). Also the mutation operators."""

from __future__ import annotations

import ast
import json

import pytest

from rlvr.envs.repo_mutate import mutants, sample_mutants, unified_diff

SOURCE = '''"""doc"""


def clamp(x, low=0, high=10):
    if x < low:
        return low
    while x > high and not False:
        x = x - 1
    return x if x >= 0 else -x
'''


def test_mutants_change_one_line_and_parse():
    found = list(mutants("m.py", SOURCE))
    operators = {m.operator for m in found}
    assert {"compare", "binop", "constant", "return", "condition", "not", "delete", "boolop"} <= operators
    for m in found:
        ast.parse(m.source)
        before, after = SOURCE.splitlines(), m.source.splitlines()
        assert len(before) == len(after)
        assert sum(a != b for a, b in zip(before, after)) == 1, m
        assert m.line != 1  # docstrings are left alone
    picked = sample_mutants({"m.py": SOURCE}, 5, seed=1)
    assert len(picked) == 5 and len({m.line for m in picked}) == 5


def test_unified_diff_round_trips_with_git_apply(tmp_path):
    import subprocess

    old, new = "a\nb\nc", "a\nB\nc"          # no final newline: the marker must be written
    (tmp_path / "f.py").write_text(old)
    patch = unified_diff("f.py", old, new)
    assert "\\ No newline at end of file" in patch
    subprocess.run(["git", "apply", "-"], input=patch.encode(), cwd=tmp_path, check=True)
    assert (tmp_path / "f.py").read_text() == new
    subprocess.run(["git", "apply", "-"], input=unified_diff("f.py", new, old).encode(), cwd=tmp_path, check=True)
    assert (tmp_path / "f.py").read_text() == old


@pytest.mark.docker
def test_build_a_package_from_scratch_and_grade_it(tmp_path, monkeypatch, capsys):
    """`rlvr repo build inflection==0.5.1` with a fresh sdist cache, then gold 1 / empty 0."""
    from repo_helpers import task_image

    from rlvr.cli import main
    from rlvr.envs.repo_task import load_tasks
    from rlvr.sandbox.repo_grader import RepoGrader

    monkeypatch.setenv("RLVR_REPO_CACHE", str(tmp_path / "cache"))
    out = tmp_path / "tasks.jsonl"
    code = main(["repo", "build", "inflection==0.5.1", "--limit", "16", "--keep", "2", "--out", str(out),
                 "--seed", "3"])
    assert code == 0
    stats = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert stats["baseline"] > 400 and stats["mutants_tried"] >= stats["kept"] >= 1, stats
    tasks = load_tasks(out)
    assert len(tasks) == stats["kept"]
    for task in tasks:
        assert 1 <= len(task.fail_to_pass) <= 5 and task.pass_to_pass
        assert not set(task.fail_to_pass) & set(task.pass_to_pass)
        assert task.content_hash == task.compute_hash()
        changed = [line for line in task.setup_patch.splitlines() if line.startswith(("-", "+"))
                   and not line.startswith(("---", "+++"))]
        for line in changed:                       # the statement never shows the mutated line
            if len(line[1:].strip()) > 3:
                assert line[1:].strip() not in task.problem_statement
        assert all(t in task.problem_statement for t in task.fail_to_pass)
    image = task_image(tasks[0])
    grader = RepoGrader(warm=0)
    try:
        task = tasks[0]
        gold = grader.grade(image, task.repo_dir, task.setup_patch, task.gold_patch, task.fail_to_pass,
                            task.pass_to_pass, source_paths=task.source_paths)
        empty = grader.grade(image, task.repo_dir, task.setup_patch, "", task.fail_to_pass, task.pass_to_pass,
                             source_paths=task.source_paths)
    finally:
        grader.close()
    assert (gold.value, empty.value) == (1.0, 0.0), (gold.info, empty.info)


def test_cli_rejects_a_bad_spec(capsys):
    from rlvr.cli import main

    assert main(["repo", "build", "not a spec"]) == 2
    assert "NAME==VERSION" in capsys.readouterr().err


def test_test_ids_that_differ_between_interpreters_are_named():
    """isodate's parametrized ids follow the hash seed: a package whose two baseline runs (two containers, two
    interpreters) collect different ids is refused, since its tasks' tests could be missing when graded."""
    from rlvr.envs.repo_build import unstable_ids

    same = {"tests": {"t.py::a[x]": "passed", "t.py::b": "failed"}}
    assert unstable_ids(same, {"tests": dict(same["tests"])}) == []
    shuffled = {"tests": {"t.py::a[expected9]": "passed", "t.py::b": "passed"}}
    other = {"tests": {"t.py::a[expected21]": "passed", "t.py::b": "passed"}}
    assert unstable_ids(shuffled, other) == ["t.py::a[expected21]", "t.py::a[expected9]"]
