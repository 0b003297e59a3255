"""The training splits and evaluation sets: MATH, DeepScaleR, AIME, CodeContests, TACO, APPS.

Each loader reads a small fixture written here in its dataset's real record format (field
names, nesting, JSON-in-a-string, level labels); the problems themselves are our own.
The competitive-programming tasks are scored in the Docker sandbox.
"""

from __future__ import annotations

import json

import datasets
import gymnasium as gym
import pytest
from conftest import require_docker
from gymnasium.utils.env_checker import check_env

import rlvr.envs  # noqa: F401
from rlvr.envs import score_groups
from rlvr.envs.datasets import AIMETasks, DeepScaleRTasks, MathTrainTasks
from rlvr.envs.tasks_contests import APPSTasks, CodeContestsTasks, TACOTasks

SQUARE = "n = int(input())\nprint(n * n)"


def write_jsonl(path, records):
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return str(path)


def write_parquet(path, records):
    datasets.Dataset.from_list(records).to_parquet(str(path))
    return str(path)


# --- math --------------------------------------------------------------------------------

MATH_RECORDS = [  # the MATH / MATH-lighteval layout: problem, level "Level k", type, solution with a box
    {"problem": "What is $3 \\cdot 4$?", "level": "Level 1", "type": "Prealgebra",
     "solution": "Three fours are $\\boxed{12}$."},
    {"problem": "Solve $2x = 10$.", "level": "Level 2", "type": "Algebra",
     "solution": "Divide: $x = \\boxed{5}$."},
    {"problem": "Simplify $\\frac{6}{8}$.", "level": "Level 2", "type": "Prealgebra",
     "solution": "We get $\\frac{6}{8} = \\boxed{\\frac{3}{4}}$."},
]


def test_math_train_split_reads_levels_subjects_and_boxed_gold(tmp_path):
    path = write_parquet(tmp_path / "train.parquet", MATH_RECORDS)
    source = MathTrainTasks(path=path)
    assert [t.reference for t in source.tasks] == ["12", "5", "\\frac{3}{4}"]
    assert [t.difficulty for t in source.tasks] == [1, 2, 2]
    assert MathTrainTasks(path=path, difficulty=2).size == 2
    assert MathTrainTasks(path=path, subject="Algebra").size == 1
    env = gym.make("rlvr/MATH-v0", path=path, difficulty=2)
    env.reset(options={"index": 1})
    assert env.step("so \\boxed{0.75}")[1] == 1.0  # the math verifier: 3/4 = 0.75
    env.reset(options={"index": 1})
    assert env.step("\\boxed{3/5}")[4]["score"]["reason"] == "wrong"
    check_env(env.unwrapped)


def test_deepscaler_uses_the_answer_field(tmp_path):
    records = [{"problem": "How many primes are below 10?", "answer": "4", "solution": "2, 3, 5, 7."},
               {"problem": "What is $2^{10}$?", "answer": "1024", "solution": "Double ten times."}]
    path = write_jsonl(tmp_path / "deepscaler.jsonl", records)
    source = DeepScaleRTasks(path=path)
    assert [(t.reference, t.difficulty) for t in source.tasks] == [("4", None), ("1024", None)]
    env = gym.make("rlvr/DeepScaleR-v0", path=path)
    env.reset(options={"index": 1})
    assert env.step("\\boxed{1024}")[1] == 1.0


@pytest.mark.parametrize("records", [
    # HuggingFaceH4/aime_2024: integer answers; the Maxwell-Jia layout: capitalised fields
    [{"id": 60, "problem": "Find the remainder when $7^{2}$ is divided by 10.", "solution": "49.", "answer": 9,
      "url": "https://example.org/1", "year": "2024"}],
    [{"ID": "2024-I-1", "Problem": "Find the remainder when $7^{2}$ is divided by 10.", "Solution": "49.",
      "Answer": 9}],
])
def test_aime_accepts_both_common_layouts(tmp_path, records):
    path = write_jsonl(tmp_path / "aime.jsonl", records)
    source = AIMETasks(year=2024, path=path)
    assert source.size == 1 and source.tasks[0].reference == "9" and source.family == "aime2024"
    env = gym.make("rlvr/AIME2025-v0", path=path)
    env.reset(seed=0)
    assert env.step("\\boxed{9}")[1] == 1.0
    with pytest.raises(ValueError, match="AIME years"):
        AIMETasks(year=1999, path=path)


# --- competitive programming ---------------------------------------------------------------

def contest_record(name, rating, public, private, generated=()):
    """A CodeContests record: tests as {"input": [...], "output": [...]}, plus the fields we ignore."""
    def tests(pairs):
        return {"input": [i for i, _ in pairs], "output": [o for _, o in pairs]}
    return {
        "name": name, "description": f"{name}: read n and print n squared.", "public_tests": tests(public),
        "private_tests": tests(private), "generated_tests": tests(generated), "source": 2, "difficulty": 7,
        "solutions": {"language": [3], "solution": [SQUARE]}, "incorrect_solutions": {"language": [], "solution": []},
        "cf_contest_id": 1, "cf_index": "A", "cf_points": 500.0, "cf_rating": rating, "cf_tags": ["math"],
        "is_description_translated": False, "untranslated_description": "",
        "time_limit": {"seconds": 1, "nanos": 0}, "memory_limit_bytes": 256000000, "input_file": "", "output_file": "",
    }


CONTESTS = [
    contest_record("1A", 800, [("3\n", "9\n")], [("4\n", "16\n"), ("0\n", "0\n")], [("5\n", "25\n")]),
    contest_record("2B", 2100, [("7\n", "49\n")], []),
    contest_record("3C", 0, [], []),  # no tests at all: left out
]


def test_code_contests_tests_levels_and_limits(tmp_path):
    path = write_parquet(tmp_path / "train.parquet", CONTESTS)
    source = CodeContestsTasks(path=path)
    assert source.size == 2 and [t.difficulty for t in source.tasks] == [1, 4]
    assert [len(t.fields["io_tests"]) for t in source.tasks] == [3, 1]
    assert source.tasks[0].fields["io_tests"][1] == {"input": "4\n", "output": "16\n"}
    assert len(CodeContestsTasks(path=path, generated=True).tasks[0].fields["io_tests"]) == 4
    assert len(CodeContestsTasks(path=path, max_tests=1).tasks[0].fields["io_tests"]) == 1
    assert CodeContestsTasks(path=path, difficulty=4).size == 1
    assert source.tasks[0].fields["language"] == "python" and "Python" in source.system_hint
    cpp = CodeContestsTasks(path=path, language="c++")
    assert cpp.tasks[0].fields["language"] == "cpp" and "C++" in cpp.system_hint
    with pytest.raises(ValueError, match="language must be one of"):
        CodeContestsTasks(path=path, language="cobol")
    with pytest.raises(ValueError, match="not in CodeContests format"):
        CodeContestsTasks(path=write_jsonl(tmp_path / "x.jsonl", [{"question": "q"}]))


def apps_record(question, io, difficulty, **extra):
    """An APPS / TACO record: `input_output` is a JSON string."""
    return {"question": question, "input_output": json.dumps(io), "difficulty": difficulty,
            "solutions": json.dumps([SQUARE]), "starter_code": "", **extra}


APPS = [
    apps_record("Print n squared.", {"inputs": ["2\n", "3\n"], "outputs": ["4\n", "9\n"]}, "introductory",
                problem_id=0, url="https://example.org/a"),
    apps_record("Print n squared (lines).", {"inputs": [["5"]], "outputs": [["25"]]}, "competition",
                problem_id=1, url="https://example.org/b"),
    apps_record("Write square(n).", {"inputs": [[2]], "outputs": [4], "fn_name": "square"}, "interview",
                problem_id=2, url="https://example.org/c"),  # call-based: left out
    apps_record("Broken.", "not json", "interview", problem_id=3, url=""),
]


def test_apps_keeps_stdin_stdout_problems_and_joins_line_lists(tmp_path):
    records = APPS[:3] + [{**APPS[3], "input_output": "{not json"}]
    source = APPSTasks(path=write_jsonl(tmp_path / "test.jsonl", records))
    assert source.size == 2 and [t.difficulty for t in source.tasks] == [1, 3]
    assert source.tasks[1].fields["io_tests"] == [{"input": "5\n", "output": "25\n"}]
    assert APPSTasks(path=str(tmp_path / "test.jsonl"), difficulty=3).size == 1


def test_taco_levels_from_labels(tmp_path):
    records = [apps_record("Print n squared.", {"inputs": ["6\n"], "outputs": ["36\n"]}, level, name=level,
                           source="codeforces", tags="[]", skill_types="[]", url="", raw_tags="[]")
               for level in ("EASY", "VERY_HARD", "UNKNOWN_DIFFICULTY")]
    source = TACOTasks(path=write_parquet(tmp_path / "train.parquet", records))
    assert [t.difficulty for t in source.tasks] == [1, 5, None]


@pytest.mark.docker
@pytest.mark.parametrize("env_id,records,writer", [
    ("rlvr/CodeContests-v0", CONTESTS, write_parquet),
    ("rlvr/APPS-v0", APPS[:3], write_jsonl),
    ("rlvr/TACO-v0", APPS[:2], write_parquet),
])
def test_contest_problems_are_scored_in_the_sandbox(tmp_path, env_id, records, writer):
    path = writer(tmp_path / ("data.parquet" if writer is write_parquet else "data.jsonl"), records)
    envs = [gym.make(env_id, path=path) for _ in range(2)]
    for i, env in enumerate(envs):
        env.reset(options={"index": i})
    right, wrong = f"```python\n{SQUARE}\n```", "```python\nprint(int(input()) + 1)\n```"
    results = require_docker(lambda: score_groups(envs, [[right, wrong]] * 2))
    for row in results:
        assert row[0][0] == 1.0 and row[0][1]["correct"]
        assert row[1][0] < 1.0 and row[1][1]["score"]["reason"] == "tests_failed"
    check_env(envs[0].unwrapped)
