"""An env's own stop strings (`TaskEnv(stop=...)`) end a single-turn completion where it first writes
one, for every generator: the local sampler stops there, a generator that only samples is cut there,
and every generator is sent them. The SmolLM2 model, its tokenizer and the loop are real; the envs
(rlvr/Arithmetic-v0) score without Docker."""

from __future__ import annotations

import gymnasium as gym
import pytest

import rlvr.envs  # noqa: F401  (registers the rlvr/ ids)
from rlvr.trainer.rollout.chat import eos_ids
from rlvr.trainer.rollout.local import LocalGenerator
from rlvr.trainer.rollout.loop import rollout
from rlvr.trainer.rollout.sessions import SamplingSettings

KWARGS = {"digits": 2, "ops": "+", "require_boxed": False}
SEEDS = [{"seed": 5}, {"seed": 6}]


class SampleOnly:
    """A generator with nothing but `sample` (as vLLM's), keeping the settings it was sent."""

    def __init__(self, generator):
        self.generator, self.settings = generator, []

    def sample(self, prompt_ids, settings, seeds):
        self.settings.append(settings)
        return self.generator.sample(prompt_ids, settings, seeds)


@pytest.fixture(scope="module")
def smollm2():
    from rlvr.trainer.models import load_model

    model, tok = load_model("smollm2")
    return model.eval(), tok


def completions(generator, model, tok, stop=()):
    envs = [gym.make("rlvr/Arithmetic-v0", stop=list(stop), **KWARGS) for _ in SEEDS]
    settings = SamplingSettings(n=1, max_new_tokens=40, greedy=True, stop_token_ids=tuple(eos_ids(tok, model)))
    groups = rollout(generator, envs, SEEDS, [1, 2], settings, tokenizer=tok)
    return [g.completion_ids[0] for g in groups], [g.texts[0] for g in groups]


@pytest.mark.parametrize("wrapped", [False, True], ids=["local-sampler", "sample-only"])
def test_a_completion_ends_at_the_first_token_that_writes_a_stop_string(smollm2, wrapped):
    model, tok = smollm2
    free_ids, free_texts = completions(LocalGenerator(model, tok.pad_token_id), model, tok)
    # a stop string from the middle of the first greedy completion, written before its end
    text = free_texts[0]
    stop = text[len(text) // 3:len(text) // 3 + 3]
    assert len(free_ids[0]) > 8 and stop.strip(), text
    generator = LocalGenerator(model, tok.pad_token_id)
    sampler = SampleOnly(generator) if wrapped else generator
    ids, texts = completions(sampler, model, tok, stop=[stop])
    for stopped, free in zip(ids, free_ids):
        assert free[:len(stopped)] == stopped  # the same greedy tokens, up to the stop
        if stop in tok.decode(free, skip_special_tokens=False):
            assert stop in tok.decode(stopped, skip_special_tokens=False)
            assert stop not in tok.decode(stopped[:-1], skip_special_tokens=False)  # ended at the first one
        else:
            assert stopped == free
    assert len(ids[0]) < len(free_ids[0]) and texts[0] != free_texts[0]
    if wrapped:  # a generator with stop strings of its own (vLLM) is sent the env's
        assert all(stop in s.stop for s in sampler.settings)


@pytest.mark.parametrize("stop", ["\n```\n", [""], [3], None])
def test_stop_must_be_a_list_of_non_empty_strings(stop):
    with pytest.raises(TypeError, match="stop must be a list of non-empty strings"):
        gym.make("rlvr/Arithmetic-v0", stop=stop)
    assert gym.make("rlvr/CodeGen-v0", stop=["\n```\n"]).unwrapped.stop == ("\n```\n",)
