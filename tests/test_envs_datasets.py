"""Dataset envs read the shared copies of GSM8K, MATH-500, HumanEval and MBPP correctly."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import gymnasium as gym
import needs
import pytest
from gymnasium.utils.env_checker import check_env

import rlvr.envs  # noqa: F401
from rlvr.cli import main
from rlvr.envs.datasets import GSM8KTasks, HumanEvalTasks, MathTasks, MBPPTasks, gsm8k_gold, math_gold

DATA = Path(__file__).resolve().parents[1].parent / "shared" / "datasets"
pytestmark = needs.skip_unless(DATA.is_dir(), "shared datasets not present")


@pytest.fixture(autouse=True)
def _data_root(monkeypatch):
    monkeypatch.setenv("RLVR_DATA_DIR", str(DATA))


@pytest.mark.parametrize("source,count", [
    (lambda: GSM8KTasks(), 1319), (lambda: GSM8KTasks(split="train"), 7473), (lambda: MathTasks(), 500),
    (lambda: MathTasks(difficulty=1), 43), (lambda: MathTasks(difficulty=5), 134),
    (lambda: MathTasks(subject="Algebra"), 124), (lambda: HumanEvalTasks(), 164), (lambda: MBPPTasks(), 500),
    (lambda: MBPPTasks(split="train"), 374), (lambda: MBPPTasks(split="validation"), 90),
    (lambda: MBPPTasks(split="prompt"), 10), (lambda: MBPPTasks(split="full"), 974),
])
def test_counts(source, count):
    assert source().size == count


def test_gsm8k_gold_answers():
    tasks = GSM8KTasks().tasks
    assert tasks[0].reference == "18" and tasks[0].prompt.startswith("Janet’s ducks lay 16 eggs")
    assert tasks[146].reference == "2125" and tasks[201].reference == "114200"  # "#### 2,125", "#### 114,200"
    assert all(t.reference is not None and t.reference.lstrip("-").replace(".", "").isdigit() for t in tasks)
    assert GSM8KTasks(split="train").tasks[0].reference == "72"
    assert gsm8k_gold("so 3\n#### 1,234") == "1234" and gsm8k_gold("no marker") is None


def test_math500_gold_answers_and_levels():
    tasks = MathTasks().tasks
    assert tasks[0].reference == "\\left( 3, \\frac{\\pi}{2} \\right)"
    assert tasks[0].task_id == "test/precalculus/807.json" and tasks[0].difficulty == 2
    assert Counter(t.difficulty for t in tasks) == {1: 43, 2: 90, 3: 105, 4: 128, 5: 134}
    assert all(t.reference for t in tasks)


def test_math_format_without_answer_field_uses_the_last_box(tmp_path):
    path = tmp_path / "math.jsonl"
    records = [
        {"problem": "What is 1/2 + 0?", "solution": "First \\boxed{1} no wait \\boxed{\\frac{1}{2}}.",
         "level": "Level 3", "type": "Algebra"},
        {"problem": "Name 2.", "solution": "It is \\boxed{2}", "level": "Level 1", "type": "Prealgebra"},
    ]
    path.write_text("\n".join(json.dumps(r) for r in records))
    source = MathTasks(path=str(path))
    assert [t.reference for t in source.tasks] == ["\\frac{1}{2}", "2"]
    assert [t.difficulty for t in source.tasks] == [3, 1]
    assert MathTasks(path=str(path), subject="Prealgebra").size == 1
    assert math_gold({"solution": "unclosed \\boxed{3"}) is None


def test_parquet_and_folder_paths(tmp_path):
    import datasets

    rows = [json.loads(line) for line in (DATA / "gsm8k" / "test.jsonl").read_text().splitlines()[:5]]
    datasets.Dataset.from_list(rows).to_parquet(str(tmp_path / "part.parquet"))
    source = GSM8KTasks(path=str(tmp_path / "part.parquet"))
    assert source.size == 5 and source.tasks[0].reference == "18"
    assert GSM8KTasks(path=str(tmp_path)).size == 5


def test_code_dataset_fields():
    he = HumanEvalTasks().tasks[0]
    assert he.task_id == "HumanEval/0" and "def has_close_elements" in he.prompt
    assert he.fields["entry_point"] == "has_close_elements" and "def check(candidate)" in he.fields["tests"]
    assert he.fields["prefix"].startswith("from typing import List")
    mbpp = MBPPTasks().tasks[0]
    assert mbpp.task_id == "mbpp/11" and len(mbpp.fields["test_list"]) == 3
    assert mbpp.fields["test_list"][0] in mbpp.prompt and mbpp.fields["test_list"][1] not in mbpp.prompt
    setups = [t for t in MBPPTasks(split="full").tasks if t.fields["test_setup_code"]]
    assert len(setups) == 2


@pytest.mark.parametrize("env_id,kwargs", [("rlvr/GSM8K-v0", {}), ("rlvr/GSM8K-v0", {"split": "train", "think": True}),
                                           ("rlvr/MATH500-v0", {"difficulty": 3})])
def test_check_env_passes(env_id, kwargs):
    check_env(gym.make(env_id, **kwargs).unwrapped)


def test_math_envs_score_the_gold_answers():
    env = gym.make("rlvr/GSM8K-v0")
    env.reset(options={"index": 146})
    _, reward, _, _, info = env.step("2125 pieces... so the answer is \\boxed{2,125}")
    assert reward == 1.0 and info["correct"] and info["task_id"] == "gsm8k/test/146"
    env = gym.make("rlvr/MATH500-v0")
    env.reset(options={"index": 0})
    results = env.unwrapped.score_group(["\\boxed{(3, \\frac{\\pi}{2})}", "\\boxed{(3, \\pi)}", "(3, pi/2)"])
    assert [r for r, _ in results] == [1.0, 0.0, 0.0]
    assert [i["score"]["reason"] for _, i in results] == [None, "wrong", "no_answer"]


def test_reset_walks_the_split_by_index():
    env = gym.make("rlvr/MATH500-v0", difficulty=1)
    ids = {env.reset(options={"index": i})[1]["task_id"] for i in range(43)}
    assert len(ids) == 43
    with pytest.raises(ValueError, match="0..42"):
        env.reset(options={"index": 43})


@pytest.mark.parametrize("make,error,message", [
    (lambda: gym.make("rlvr/GSM8K-v0", split="dev"), ValueError, "GSM8K has splits train, test; got 'dev'"),
    (lambda: gym.make("rlvr/MATH500-v0", split="train"), ValueError, "MATH-500 has splits test"),
    (lambda: gym.make("rlvr/MBPP-v0", split="tests"), ValueError, "MBPP has splits"),
    (lambda: gym.make("rlvr/MATH500-v0", difficulty=6), ValueError, "1..5"),
    (lambda: gym.make("rlvr/GSM8K-v0", path="/no/such/gsm8k.jsonl"), FileNotFoundError, "no such dataset file"),
    (lambda: gym.make("rlvr/HumanEval-v0", path=str(DATA / "gsm8k" / "test.jsonl")), ValueError,
     "not in HumanEval format"),
])
def test_bad_arguments(make, error, message):
    with pytest.raises(error, match=message):
        make()


def test_rlvr_list_shows_every_env(capsys):
    assert main(["list"]) == 0
    out = capsys.readouterr().out
    for env_id in ["rlvr/GSM8K-v0", "rlvr/MATH500-v0", "rlvr/HumanEval-v0", "rlvr/MBPP-v0", "rlvr/Countdown-v0",
                   "rlvr/CodeFeedback-v0", "rlvr/MathSelfCheck-v0"]:
        line = next(line for line in out.splitlines() if env_id in line)
        assert len(line.split(env_id, 1)[1].strip()) > 10  # a one-line description
