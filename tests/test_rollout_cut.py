"""`TurnByTurn` cuts a turn where the env's parser says a tool call ended, for a generator that has no
stop strings and samples past the call. The env (rlvr/ToolMath-v0, python in Docker), its parser, the
SmolLM2 tokenizer and the episode loop are real; only the generator is a test double: its `sample`
returns scripted ids, so the exact token where the call closes is known."""

from __future__ import annotations

import pytest
from conftest import require_docker

from rlvr.envs import make
from rlvr.envs.python_tool import PythonTool
from rlvr.trainer.rollout.loop import rollout
from rlvr.trainer.rollout.sessions import Sampled, SamplingSettings

KWARGS = {"tasks": "arithmetic", "digits": 3, "ops": "*", "require_boxed": False, "demos": 1, "max_turns": 3}


class Scripted:
    """A generator double: turn t of the episode is `turns[t]`, each token's log-prob -(its position + 1) / 100."""

    def __init__(self, turns: list[list[int]]):
        self.turns, self.calls = turns, []

    def sample(self, prompt_ids, settings, seeds):
        ids = self.turns[len(self.calls)]
        self.calls.append([list(p) for p in prompt_ids])
        logps = [-(i + 1) / 100 for i in range(len(ids))]
        return [Sampled(list(p), [list(ids)] * settings.n, [True] * settings.n, [logps] * settings.n)
                for p in prompt_ids]


@pytest.fixture(scope="module")
def tok():
    from rlvr.trainer.models import load_tokenizer

    require_docker(lambda: PythonTool().pool())
    return load_tokenizer("smollm2")


@pytest.mark.parametrize("parser", ["hermes", "code"])
def test_a_turn_is_cut_right_after_the_call_the_env_parser_reads(tok, parser):
    env = make("rlvr/ToolMath-v0", parser=parser, **KWARGS)
    call = env.unwrapped.parser.format_call("python", {"code": "print(6 * 7)"})
    call_ids = tok(call, add_special_tokens=False)["input_ids"]
    past = tok("\nI think the tool will say 42, so \\boxed{41}", add_special_tokens=False)["input_ids"]
    answer = tok("The tool says 42, so \\boxed{42}.", add_special_tokens=False)["input_ids"] + [tok.eos_token_id]
    generator = Scripted([call_ids + past, answer])
    settings = SamplingSettings(n=1, max_new_tokens=64, stop_token_ids=(tok.eos_token_id,))
    try:
        (group,) = rollout(generator, [env], [{"seed": 3}], [7], settings, tokenizer=tok, budget=400)
    finally:
        env.close()
    ids, weights, logps, info = group.completion_ids[0], group.weights[0], group.sample_logps[0], group.infos[0]
    k = len(call_ids)
    # the first turn trained is the call and not one token more or less, with its own log-probs
    assert ids[:k] == call_ids and weights[:k] == [1] * k and weights[k] == 0
    assert logps[:k] == [-(i + 1) / 100 for i in range(k)]
    assert info["replies"][0] == tok.decode(call_ids, skip_special_tokens=True)
    assert info["tool_calls"] == 1 and "42" in tok.decode(ids[k:weights.index(1, k)])
    # the second turn continues the episode from the call (what was sampled past it is gone) ...
    assert generator.calls[1] == [group.prompt_ids + ids[:weights.index(1, k)]]
    # ... and, with no call in it, is kept whole
    assert ids[-len(answer):] == answer and weights[-len(answer):] == [1] * len(answer)
    assert info["turns"] == 2 and info["replies"][1].endswith("\\boxed{42}.")
