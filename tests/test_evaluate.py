"""rlvr eval: the pass@k estimator, evaluation with scripted policies, and the real model path."""

from __future__ import annotations

import importlib.util
import json
import math
import re

import needs
import pytest
import sympy

from rlvr.cli import main
from rlvr.evaluation.passk import evaluate_pass_at_k, pass_at_k


def _gold(prompt: list[dict]) -> str:
    expr = re.search(r"Compute (.+?)\. Give", prompt[-1]["content"]).group(1)
    return str(sympy.sympify(expr))


def one_right_policy(prompts, n):
    """The first of the n samples is right, the others wrong."""
    return [[f"\\boxed{{{_gold(p)}}}"] + ["\\boxed{0.5}"] * (n - 1) for p in prompts]


def even_items_policy(prompts, n):
    """Right on prompts whose expression's first number is even, unboxed otherwise."""
    out = []
    for p in prompts:
        first = int(re.search(r"Compute (\d+)", p[-1]["content"]).group(1))
        out.append([f"\\boxed{{{_gold(p)}}}" if first % 2 == 0 else _gold(p)] * n)
    return out


@pytest.mark.parametrize("n,c,k", [(1, 0, 1), (1, 1, 1), (5, 2, 1), (5, 2, 3), (10, 3, 4), (20, 0, 5), (20, 20, 7)])
def test_pass_at_k_matches_the_binomial_formula(n, c, k):
    expected = 1.0 - math.comb(n - c, k) / math.comb(n, k)
    assert pass_at_k(n, c, k) == pytest.approx(expected, abs=1e-12)


def test_pass_at_k_rejects_impossible_counts():
    with pytest.raises(ValueError):
        pass_at_k(4, 5, 1)
    with pytest.raises(ValueError):
        pass_at_k(4, 1, 5)


@pytest.mark.parametrize("counts,message", [({"n": 0}, "n must"), ({"batch_size": 0}, "batch_size must"),
                                            ({"limit": 0}, "limit must"), ({"n": 2, "ks": (3,)}, "1..n")])
def test_bad_counts_are_refused_before_any_env_is_made(counts, message):
    # an unknown id: making an env first would raise "unknown env" instead
    with pytest.raises(ValueError, match=message):
        evaluate_pass_at_k("rlvr/Nope-v0", one_right_policy, progress=False, **counts)


def test_evaluate_with_a_scripted_policy():
    result = evaluate_pass_at_k("rlvr/Arithmetic-v0", one_right_policy, n=4, ks=(1, 2, 4), limit=6, batch_size=4,
                      env_kwargs={"digits": 2, "ops": "+-"}, progress=False, keep_samples=True)
    assert result.items == 6 and result.n == 4
    assert result.pass_at == pytest.approx({1: 0.25, 2: 0.5, 4: 1.0})
    assert result.mean_reward == pytest.approx(0.25)
    assert result.reasons == {"wrong": 18}
    assert len(result.samples) == 24 and sum(s["correct"] for s in result.samples) == 6


def test_evaluate_counts_per_item_correctness():
    result = evaluate_pass_at_k("rlvr/Arithmetic-v0", even_items_policy, n=2, limit=10, batch_size=3,
                      env_kwargs={"digits": 2}, progress=False)
    from rlvr.envs import make

    env = make("rlvr/Arithmetic-v0", digits=2)
    evens = sum(int(re.search(r"Compute (\d+)", env.reset(options={"index": i})[0][-1]["content"]).group(1)) % 2 == 0
                for i in range(10))
    assert result.pass_at[1] == pytest.approx(evens / 10)
    assert result.reasons == {"no_answer": 2 * (10 - evens)}


def test_cli_with_a_policy(capsys, tmp_path):
    out = tmp_path / "samples.jsonl"
    code = main(["eval", "--env", "rlvr/Arithmetic-v0", "--policy", "test_evaluate:one_right_policy", "-n", "3",
                 "--limit", "4", "--env-arg", "digits=1", "--json", "--no-progress", "--output", str(out)])
    assert code == 0
    result = json.loads(capsys.readouterr().out)
    assert result["items"] == 4 and result["pass_at"]["pass@1"] == pytest.approx(1 / 3)
    assert result["pass_at"]["pass@3"] == 1.0
    assert len(out.read_text().splitlines()) == 12


@pytest.mark.parametrize("argv,message", [
    (["--env", "rlvr/Nope-v0", "--policy", "test_evaluate:one_right_policy"], "unknown env 'rlvr/Nope-v0'"),
    (["--env", "rlvr/GSM8K-v0", "--split", "dev", "--policy", "test_evaluate:one_right_policy"], "GSM8K has splits"),
    (["--env", "rlvr/GSM8K-v0", "--env-arg", "path=/nonexistent/gsm.jsonl", "--policy",
      "test_evaluate:one_right_policy"], "no such dataset file"),
    (["--env", "rlvr/Arithmetic-v0", "--policy", "test_evaluate:one_right_policy", "-n", "2", "-k", "3"], "1..n"),
    (["--env", "rlvr/Arithmetic-v0", "--policy", "nomodule"], "MODULE:ATTR"),
    (["--env", "rlvr/Arithmetic-v0", "--policy", "test_evaluate:one_right_policy", "--logprobs"], "asks an --endpoint"),
    (["--env", "rlvr/Arithmetic-v0"], "one of the arguments --model --policy is required"),
    # checked before any model loads (a hub lookup of a typo would retry for half a minute)
    (["--env", "rlvr/Nope-v0", "--model", "smollm2"], "unknown env 'rlvr/Nope-v0'"),
    (["--env", "rlvr/Arithmetic-v0", "--model", "smolm2"], "unknown model 'smolm2'"),
    (["--env", "rlvr/Arithmetic-v0", "--policy", "test_evaluate:one_right_policy", "--generator", "vllm"],
     "samples --model itself"),
    pytest.param(["--env", "rlvr/Arithmetic-v0", "--model", "smollm2", "--generator", "vllm"], "needs vLLM",
                 marks=pytest.mark.skipif(importlib.util.find_spec("vllm") is not None, reason="vllm is installed")),
])
def test_cli_bad_arguments_give_one_line(capsys, argv, message):
    assert main(["eval", *argv, "--no-progress"]) == 2
    err = capsys.readouterr().err.strip()
    assert message in err and len(err.splitlines()) == 1


def test_cli_with_the_real_model(capsys):
    needs.module("rlvr.trainer.rollout.sampler")
    code = main(["eval", "--env", "rlvr/Arithmetic-v0", "--model", "smollm2", "--limit", "1", "-n", "2",
                 "--max-new-tokens", "8", "--env-arg", "digits=1", "--json", "--no-progress"])
    assert code == 0
    result = json.loads(capsys.readouterr().out)
    assert result["items"] == 1 and result["n"] == 2
    assert set(result["pass_at"]) == {"pass@1", "pass@2"}
    assert 0.0 <= result["pass_at"]["pass@1"] <= result["pass_at"]["pass@2"] <= 1.0
    assert sum(result["reasons"].values()) <= 2


def test_the_models_log_probs_reach_the_samples_without_the_env_tokens():
    """`--model` on a multi-turn env: each kept sample's `logprobs` are the sampler's, for the tokens it sampled,
    in order; the env's tokens between turns (weight 0) are left out."""
    needs.module("rlvr.trainer.rollout.sampler")
    from rlvr.envs import make
    from rlvr.trainer.models import load_model
    from rlvr.trainer.rollout.chat import eos_ids
    from rlvr.trainer.rollout.local import LocalGenerator
    from rlvr.trainer.rollout.loop import rollout
    from rlvr.trainer.rollout.sessions import SamplingSettings

    model, tok = load_model("smollm2")
    generator, stop = LocalGenerator(model, tok.pad_token_id), tuple(eos_ids(tok, model))
    result = evaluate_pass_at_k("rlvr/MathSelfCheck-v0", generator, limit=1, batch_size=1, tokenizer=tok, stop_token_ids=stop,
                      max_new_tokens=12, keep_samples=True, progress=False)
    sample, = result.samples
    env = make("rlvr/MathSelfCheck-v0")
    try:  # the same greedy episode, with the loop's own record of it
        group, = rollout(generator, [env], [{"options": {"index": 0}}], [0],
                         SamplingSettings(max_new_tokens=12, greedy=True, stop_token_ids=stop), tokenizer=tok)
    finally:
        env.close()
    weights = group.weights[0]
    assert sample["turns"] == 2 and 0 in weights  # env tokens were there to leave out
    assert sample["logprobs"] == [lp for lp, w in zip(group.sample_logps[0], weights) if w]
    assert len(sample["logprobs"]) == sum(weights)
