"""Training, `rlvr eval` (a policy, a local model) and `rlvr eval --endpoint` all run the one episode loop,
`trainer/rollout/loop.py`'s `rollout` (issue #29).

The loop opens each batch's generator session through the `start` it imported; a spy put there records
what each batch was sampled by (the session's type, and whether greedily) and hands back the real
session. A path that sampled its episodes in a loop of its own would leave no record."""

from __future__ import annotations

import pytest

from rlvr.cli import main
from rlvr.trainer.config import TrainConfig
from rlvr.trainer.grpo import GRPOTrainer
from rlvr.trainer.rollout import loop as rollout


@pytest.fixture
def batches(monkeypatch) -> list[tuple[str, bool]]:
    """(session type, greedy) of every batch the loop runs while the test does."""
    seen, real = [], rollout.start

    def start(generator, batch, settings):
        session = real(generator, batch, settings)
        seen.append((type(session).__name__, settings.greedy))
        return session

    monkeypatch.setattr(rollout, "start", start)
    return seen


def boxed_42(prompts, n):
    """A text policy for `rlvr eval --policy test_one_loop:boxed_42`."""
    return [["The answer is \\boxed{42}."] * n for _ in prompts]


@pytest.mark.parametrize("env", ["rlvr/Arithmetic-v0", "rlvr/MathSelfCheck-v0"])
def test_rlvr_eval_of_a_policy(batches, env, capsys):
    assert main(["eval", "--env", env, "--policy", "test_one_loop:boxed_42", "--limit", "3", "--batch-size", "2",
                 "--no-progress"]) == 0
    assert batches == [("_PolicySession", True)] * 2  # tasks 0-1, then task 2
    assert "pass@1" in capsys.readouterr().out


def test_rlvr_eval_of_a_local_model(batches, capsys):
    assert main(["eval", "--env", "rlvr/Arithmetic-v0", "--model", "tiny", "--limit", "2", "-n", "2",
                 "--max-new-tokens", "4", "--no-progress"]) == 0
    assert batches == [("CarriedSession", False)]


def test_rlvr_eval_against_an_endpoint(batches, llama_server, capsys):
    assert main(["eval", "--env", "rlvr/MathSelfCheck-v0", "--endpoint", llama_server.url, "--model",
                 llama_server.model, "--limit", "2", "--max-new-tokens", "8", "--no-progress"]) == 0
    assert batches == [("_EndpointSession", True)]


def test_training_and_its_held_out_evaluation(batches, tmp_path):
    config = TrainConfig(model="tiny", env="test_trainer_toy_env:Letters-v0", prompts_per_step=2, group_size=4,
                         max_new_tokens=4, threads=1, progress=False, steps=2, eval_prompts=2, eval_every=1)
    GRPOTrainer(config, tmp_path).train()
    sampled, evaluated = (sum(1 for b in batches if b == ("CarriedSession", greedy)) for greedy in (False, True))
    assert len(batches) == sampled + evaluated and sampled >= 2 and evaluated >= 2, batches
