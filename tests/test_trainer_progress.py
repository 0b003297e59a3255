"""The progress bar follows the limit that ends the run: a time budget that binds before `steps`
sets the share done and the time left, as `make run` (steps=1000, max_minutes=11) needs."""

from __future__ import annotations

import re

import pytest
import test_trainer_run

from rlvr.trainer.config import TrainConfig
from rlvr.trainer.grpo import GRPOTrainer
from rlvr.trainer.progress import clock, estimate


def test_a_binding_budget_sets_the_share_and_the_time_left():
    # make run after 120 steps in 415 s: the budget ends it in 245 s, long before step 1000
    done, left = estimate(120, 1000, 415.0, 660.0, s_per_step=415 / 120)
    assert done == pytest.approx(415 / 660) and left == pytest.approx(245.0)
    # steps bind: 5 of 10 steps at 8 s a step end the run in 40 s, well inside the 600 s budget
    assert estimate(5, 10, 40.0, 600.0, s_per_step=8.0) == (0.5, pytest.approx(40.0))
    assert estimate(5, 10, 40.0, 0.0, s_per_step=8.0) == (0.5, pytest.approx(40.0))  # no budget
    assert estimate(0, 10, 0.0, 0.0, s_per_step=None) == (0.0, None)  # no step timed yet
    assert estimate(190, 1000, 700.0, 660.0, s_per_step=3.7) == (1.0, 0.0)  # the last step overran
    assert (clock(245), clock(3 * 3600 + 30 * 60), clock(None)) == ("4:05", "3:30:00", "?")


def test_the_bar_of_a_run_its_budget_ends_reaches_100_percent(tmp_path, capsys):
    config = TrainConfig(**{**test_trainer_run.TOY, "progress": True}, steps=10_000, max_minutes=0.05)
    records = GRPOTrainer(config, tmp_path / "run").train()
    assert 1 <= len(records) < 10_000
    lines = [line.strip() for line in re.split(r"[\r\n]", capsys.readouterr().err) if line.startswith("grpo")]
    last = lines[-1]
    assert last.startswith("grpo 100%"), lines
    assert f"step {len(records)}/10000" in last and "of 0:03 budget, 0:00 left" in last, last
    for line in lines[1:]:  # before the end too, the share is the budget's, far ahead of step / 10000
        step, share = int(re.search(r"step (\d+)/", line)[1]), int(re.match(r"grpo\s+(\d+)%", line)[1])
        assert step == 0 or share >= 1, line  # step / 10000 would show 0%
