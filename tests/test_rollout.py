"""The one episode loop with the real SmolLM2 on multi-turn tool episodes (rlvr/ToolMath-v0, python in
Docker): the ids trained are the ids the generator sampled and the env's tokens, appended as tokens,
never re-tokenized from text; for the local sampler (its KV cache carried across turns) and for a
generator that only samples (turn by turn, each turn re-submitting the episode's ids)."""

from __future__ import annotations

import pytest
import torch
from conftest import require_docker
from padded import padded

from rlvr.envs import make
from rlvr.envs.python_tool import PythonTool
from rlvr.trainer.rollout.chat import eos_ids
from rlvr.trainer.rollout.groups import prompt_seed
from rlvr.trainer.rollout.local import LocalGenerator
from rlvr.trainer.rollout.loop import rollout
from rlvr.trainer.rollout.sessions import SamplingSettings, start

ENV = "rlvr/ToolMath-v0"
KWARGS = {"tasks": "arithmetic", "digits": 3, "ops": "*", "require_boxed": False, "demos": 2, "max_turns": 3}
PROMPTS, GROUP = 2, 2
# fp32 on a CPU: the sampler's log-prob and the training forward's differ by float rounding (~1e-6 here);
# a token read at the wrong position or under another context is off by far more than 1e-2
TOL = 1e-3


class Recorder:
    """The generator, with what its session gave (each turn's ids) and was given (each env reply's ids)."""

    def __init__(self, generator):
        self.generator = generator
        self.pieces: dict[int, list[tuple[str, list[int]]]] = {}

    def start(self, batch, settings):
        session = start(self.generator, batch, settings)
        pieces = self.pieces
        self.prompts = [list(p) for p in batch.prompts]

        class Session:
            def turns(self):
                out = session.turns()
                for t in out:
                    pieces.setdefault(t.row, []).append(("sampled", list(t.ids)))
                return out

            def extend(self, row, messages, reply_ids):
                pieces[row].append(("env", list(reply_ids)))
                session.extend(row, messages, reply_ids)

            def finish(self, row):
                session.finish(row)

            def close(self):
                session.close()

        return Session()


class SampleOnly:
    """A generator with nothing but `sample` (as vLLM's), recording each call's prompts and completions."""

    def __init__(self, generator):
        self.generator, self.calls = generator, []

    def sample(self, prompt_ids, settings, seeds):
        out = self.generator.sample(prompt_ids, settings, seeds)
        self.calls += [(list(s.prompt_ids), c) for s in out for c in s.completion_ids]
        return out


@pytest.fixture(scope="module")
def smollm2():
    from rlvr.trainer.models import load_model

    require_docker(lambda: PythonTool().pool())
    model, tok = load_model("smollm2")
    return model.eval(), tok


def tool_episodes(generator, model, tok, seed: int = 0):
    """G=2 sampled ToolMath episodes of 2 prompts through the loop, with what the generator exchanged."""
    recorder = Recorder(generator)
    envs = [make(ENV, **KWARGS) for _ in range(PROMPTS * GROUP)]
    settings = SamplingSettings(n=GROUP, max_new_tokens=48, temperature=0.7, stop_token_ids=tuple(eos_ids(tok, model)))
    try:
        groups = rollout(recorder, envs, [{"seed": seed + i} for i in range(PROMPTS)],
                         [prompt_seed(seed, i) for i in range(PROMPTS)], settings, tokenizer=tok, budget=600)
    finally:
        for env in envs:
            env.close()
    return groups, recorder


def assert_token_exact(groups, recorder, tok):
    """Each trained sequence is the concatenation of the turns sampled and the env replies given, weights 1
    and 0 on them; each reply is the template's rendering after its turn; episodes went past a tool call."""
    multi = 0
    for p, g in enumerate(groups):
        assert g.prompt_ids == recorder.prompts[p]
        for j, (ids, weights, info) in enumerate(zip(g.completion_ids, g.weights, g.infos)):
            pieces = recorder.pieces[p * GROUP + j]
            assert ids == [t for _, piece in pieces for t in piece]
            assert weights == [int(kind == "sampled") for kind, piece in pieces for _ in piece]
            assert [kind for kind, _ in pieces] == ["sampled", "env"] * (len(pieces) // 2) + ["sampled"] * (
                len(pieces) % 2)
            multi += info["turns"] >= 2 and info["tool_calls"] >= 1
            for kind, piece in pieces:
                if kind == "env":  # the env's reply starts right after the turn, as the template renders it
                    assert tok.decode(piece).startswith(("\n<|im_start|>", "<|im_end|>\n<|im_start|>"))
    assert multi >= 2, [g.infos for g in groups]


def assert_sampler_logps_are_the_trainers(groups, model):
    from rlvr.trainer.logprobs import group_logprobs

    worst = 0.0
    for g in groups:
        ids, mask = padded(g.completion_ids, g.weights)
        with torch.no_grad():
            logp = group_logprobs(model, torch.tensor(g.prompt_ids), ids, mask, temperature=0.7)[0]
        for i, (w, sampled) in enumerate(zip(g.weights, g.sample_logps)):
            for t, (wt, lp) in enumerate(zip(w, sampled)):
                if wt:
                    worst = max(worst, abs(float(logp[i, t]) - lp))
    assert worst < TOL, worst


def test_local_episodes_train_the_ids_sampled(smollm2):
    model, tok = smollm2
    groups, recorder = tool_episodes(LocalGenerator(model, tok.pad_token_id), model, tok)
    assert_token_exact(groups, recorder, tok)
    assert_sampler_logps_are_the_trainers(groups, model)


def test_turn_by_turn_resubmits_the_episodes_own_ids(smollm2):
    model, tok = smollm2
    generator = SampleOnly(LocalGenerator(model, tok.pad_token_id))
    groups, recorder = tool_episodes(generator, model, tok)
    assert_token_exact(groups, recorder, tok)
    assert_sampler_logps_are_the_trainers(groups, model)
    episodes = [g.prompt_ids + ids for g in groups for ids in g.completion_ids]
    later = [(prompt, c) for prompt, c in generator.calls if len(prompt) > min(len(g.prompt_ids) for g in groups)]
    assert later  # turns after the first: each asked on an episode's own ids so far
    for prompt, completion in later:
        assert any(e[:len(prompt) + len(completion)] == prompt + completion for e in episodes)



def test_the_loop_and_endpoint_evaluation_import_without_torch():
    """`rlvr eval --endpoint` runs the loop where torch is not installed."""
    import subprocess
    import sys

    code = ("import sys; sys.modules['torch'] = None\n"
            "import rlvr.evaluation.cli, rlvr.evaluation.endpoint, rlvr.trainer.rollout.loop, rlvr.trainer.rollout.local\n"
            "from rlvr.trainer.rollout import registry; assert registry.names() == ('local', 'vllm')\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr


@pytest.mark.parametrize("keys,message", [
    ({"generator": "vLLM"}, "generator must be one of 'local', 'vllm'"),
    ({"generator": "vllm", "parallel": "fsdp"}, "parallel: replicate"),
    ({"vllm_sleep": True}, "vllm_sleep needs generator: vllm"),
    ({"generator": "vllm", "vllm_kv_cache_gib": 0}, "vllm_kv_cache_gib must be positive"),
])
def test_generator_config_mistakes_are_named(keys, message):
    from rlvr.trainer.config import TrainConfig

    with pytest.raises(ValueError, match=message):
        TrainConfig(**keys)
