"""bench/race.py runs a recipe through TRL only where TRL can run it as rlvr does: what it cannot take
is refused with the reason, before anything trains."""

from __future__ import annotations

import sys
from pathlib import Path

import needs
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_module import load  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT.parent / "shared" / "datasets"
race = load("race")


def recipe(name: str, *overrides: str):
    return race.recipe(str(ROOT / "configs" / name), 0, 1.0, list(overrides))


@needs.skip_unless((DATA / "mbpp").is_dir(), "shared datasets not present")
def test_the_code_recipe_races():
    assert race.refusal(recipe("code-lora-smollm2.yaml")) is None


@pytest.mark.parametrize("name,overrides,reason", [
    ("arith-lora-smollm2.yaml", (), "curriculum"),
    ("tools-smollm2.yaml", (), "no lora"),
    ("code-lora-smollm2.yaml", ("refill_rounds=1",), "refill"),
    ("code-lora-smollm2.yaml", ("replay_fraction=0.25",), "replay"),
    ("code-lora-smollm2.yaml", ("advantage=rft",), "advantages"),
    ("code-lora-smollm2.yaml", ("aggregation=seq-mean-token-sum-norm", "mu=2"), "mu"),
    ("code-lora-smollm2.yaml", ("model=tiny",), "SmolLM2 only"),
    ("code-lora-smollm2.yaml", ("env=rlvr/CodeFeedback-v0", "env_kwargs={tasks: codegen}"), "multi-turn"),
])
def test_what_trl_cannot_run_is_refused_with_its_reason(name, overrides, reason):
    assert reason in (race.refusal(recipe(name, *overrides)) or "")


def side(*points):
    return {"curve": [list(p) for p in points], "accuracy_after": points[-1][1]}


def test_both_sides_rose_the_ratio_is_to_the_lower_final_accuracy():
    v = race.verdict({"rlvr": side((0, 0.05), (5, 0.3), (10, 0.5)), "trl": side((0, 0.05), (20, 0.3), (30, 0.3))}, 30)
    assert v["target"] == 0.3 and v["minutes_to_target"] == {"rlvr": 5, "trl": 20} and v["time_ratio"] == 0.25


def test_a_side_that_never_rose_gives_a_bound_not_a_ratio_of_zeros():
    v = race.verdict({"rlvr": side((0, 0.05), (12, 0.5), (30, 0.5)), "trl": side((0, 0.05), (30, 0.05))}, 30)
    assert v["target"] == 0.5 and v["time_ratio"] is None and v["time_ratio_at_most"] == 0.4
    v = race.verdict({"rlvr": side((0, 0.05), (30, 0.0)), "trl": side((0, 0.05), (10, 0.2), (30, 0.2))}, 30)
    assert v["target"] == 0.2 and v["time_ratio"] is None and v["time_ratio_at_least"] == 3.0
