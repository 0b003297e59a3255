"""Generators by name (trainer/rollout/registry.py): the config's check, the trainer, `rlvr eval` and its
argparse choices all read the one table, and a generator added to it is selectable everywhere."""

from __future__ import annotations

import pytest

from rlvr.cli import main
from rlvr.trainer.config import TrainConfig
from rlvr.trainer.grpo import GRPOTrainer
from rlvr.trainer.rollout import registry
from rlvr.trainer.rollout.local import LocalGenerator

TOY = "test_trainer_toy_env:Letters-v0"


class CountingGenerator(LocalGenerator):
    """A generator added for the test: the local sampler, counting the sessions it opened."""

    name = "counting"
    sessions = 0

    def start(self, batch, settings):
        CountingGenerator.sessions += 1
        return super().start(batch, settings)


@pytest.fixture
def counting(monkeypatch):
    monkeypatch.setitem(registry.GENERATORS, "counting", f"{__name__}:CountingGenerator")
    CountingGenerator.sessions = 0
    return CountingGenerator


def test_the_table_names_each_class_by_its_own_name():
    assert registry.names() == ("local", "vllm")
    assert registry.generator_class("local") is LocalGenerator and registry.is_exact("local")
    vllm = registry.generator_class("vllm")  # imported without vLLM: the engine starts only when built
    assert (vllm.__name__, vllm.name, registry.is_exact("vllm")) == ("VLLMGenerator", "vllm", False)


def test_an_unknown_or_misnamed_generator_is_refused(monkeypatch):
    with pytest.raises(ValueError, match="unknown generator 'sglang': choose one of local, vllm"):
        registry.build("sglang", None, None)
    monkeypatch.setitem(registry.GENERATORS, "fast", "rlvr.trainer.rollout.local:LocalGenerator")
    with pytest.raises(TypeError, match="registered as 'fast' but names itself 'local'"):
        registry.generator_class("fast")


def test_the_config_checks_the_name_against_the_table(counting):
    with pytest.raises(ValueError, match="generator must be one of 'local', 'vllm', 'counting'"):
        TrainConfig(generator="sglang")
    assert TrainConfig(generator="counting").generator == "counting"


def test_the_trainer_builds_its_generator_from_the_table(counting, tmp_path):
    config = TrainConfig(model="tiny", env=TOY, prompts_per_step=2, group_size=2, max_new_tokens=4, threads=1,
                         progress=False, steps=1, generator="counting")
    trainer = GRPOTrainer(config, tmp_path)
    assert type(trainer.generator) is CountingGenerator and trainer.generator.model is trainer.model
    assert not trainer.correct_sampler  # an exact generator: no sampler correction in the loss
    trainer.train()
    assert CountingGenerator.sessions == 1  # the step sampled with it


def test_rlvr_eval_offers_and_builds_what_the_table_holds(counting, capsys):
    assert main(["eval", "--env", "rlvr/Arithmetic-v0", "--model", "tiny", "--generator", "counting", "--limit", "2",
                 "--max-new-tokens", "4", "--no-progress"]) == 0
    assert CountingGenerator.sessions == 1
    assert main(["eval", "--env", "rlvr/Arithmetic-v0", "--model", "tiny", "--generator", "sglang"]) == 2
    err = capsys.readouterr().err
    assert "invalid choice: 'sglang'" in err and all(f"{name}" in err for name in ("local", "vllm", "counting"))


def test_a_generator_other_than_the_default_samples_model_only(capsys):
    assert main(["eval", "--env", "rlvr/Arithmetic-v0", "--policy", "test_one_loop:boxed_42", "--generator",
                 "vllm"]) == 2
    assert "--generator vllm samples --model itself" in capsys.readouterr().err
