"""TRL adapter: the reward-function contract, and a real GRPOTrainer step rewarded by rlvr."""

import importlib.util
import math
import pickle
from pathlib import Path

import needs
import pytest

from rlvr.integrations.trl import EnvReward, RewardFunc, env_dataset
from rlvr.verifiers import Composite, TagCount, ThinkFormat

TRL_BENCH = Path(__file__).resolve().parents[1].parent / "shared" / "bench" / "trl_grpo_step.py"

GOOD = "<think>2 and 2 make 4</think> The answer is \\boxed{4}."
TAGGED = "<think>2 and 2 make 4</think><answer>4</answer>"
CHAT_BAD = [{"role": "assistant", "content": "4"}]


def test_plain_and_chat_completions_score_with_the_verifier():
    reward = RewardFunc("think_format")
    assert reward.__name__ == "think_format"
    assert reward(prompts=["q", "q"], completions=[GOOD, CHAT_BAD]) == [1.0, 0.0]
    assert reward(prompts=[[{"role": "user", "content": "q"}]],
                  completions=[[{"role": "assistant", "content": GOOD}]]) == [1.0]


def test_dataset_columns_become_reference_and_task_fields():
    seen = []

    class Recorder(ThinkFormat):
        def score(self, completion, reference=None, **fields):
            seen.append((reference, fields))
            return super().score(completion, reference, **fields)

    reward = RewardFunc(Recorder(), reference="answer")
    reward(prompts=["q"], completions=[GOOD], answer=["4"], level=[3], reference=["a column"],
           trainer_state=object(), log_extra=None, log_metric=None, completion_ids=[[1, 2]])
    assert seen == [("4", {"level": 3})]
    seen.clear()
    RewardFunc(Recorder(), reference="answer", fields=[])(prompts=["q"], completions=[GOOD], answer=["4"], level=[3])
    assert seen == [("4", {})]


def test_when_gives_none_to_rows_it_does_not_apply_to():
    reward = RewardFunc("think_format", when={"kind": ["think", "both"]})
    out = reward(prompts=["a", "b", "c"], completions=[GOOD, GOOD, CHAT_BAD], kind=["think", "code", "both"])
    assert out == [1.0, None, 0.0]


def test_breakdown_and_reasons_are_logged_through_trl_hooks():
    metrics, extra = {}, {}
    reward = RewardFunc(Composite({"format": (ThinkFormat(), 1.0), "tags": (TagCount(), 0.5)}), name="fmt")
    out = reward(prompts=["q"] * 2, completions=[TAGGED, "no tags at all"],
                 log_metric=metrics.__setitem__, log_extra=extra.__setitem__)
    assert out == [1.5, 0.0]
    assert metrics["fmt/format"] == 0.5
    assert metrics["fmt/reason/format"] == 0.5
    assert extra["fmt_reason"] == [None, "format"]
    # A reason seen once keeps being logged (as 0), so its running mean is not biased upwards.
    reward(prompts=["q"], completions=[TAGGED], log_metric=metrics.__setitem__)
    assert metrics["fmt/reason/format"] == 0.0


def test_mistakes_are_reported_when_building_or_calling():
    with pytest.raises(LookupError, match="unknown verifier"):
        RewardFunc("no_such_verifier")
    with pytest.raises(ValueError, match="unexpected keyword argument 'bogus'"):
        RewardFunc("think_format", bogus=1)
    with pytest.raises(KeyError, match="no column 'answer'"):
        RewardFunc("think_format", reference="answer")(prompts=["q"], completions=[GOOD])


def test_reward_funcs_pickle_and_score_the_same_after():
    reward = RewardFunc("tag_count", reference=None, when={"kind": "x"})
    clone = pickle.loads(pickle.dumps(reward))
    args = dict(prompts=["q"] * 3, completions=[GOOD, "plain", TAGGED],
                kind=["x", "y", "x"])
    assert clone(**args) == reward(**args)
    assert reward(**args)[1] is None and reward(**args)[2] == 1.0 > reward(**args)[0]
    assert clone.__name__ == "tag_count"


ARITHMETIC = {"digits": 1, "ops": "+-"}


def arithmetic_answer(prompt):
    """The reference answer, worked out from the prompt text ("Compute 2 + 4. Give ...")."""
    expression = prompt[-1]["content"].split("Compute ", 1)[1].split(".", 1)[0]
    assert set(expression) <= set("0123456789+- ()"), expression
    return str(eval(expression))


def test_env_dataset_and_env_reward_agree_with_the_arithmetic():
    data = env_dataset("rlvr/Arithmetic-v0", 6, seed=10, **ARITHMETIC)
    assert data.column_names == ["prompt", "rlvr_seed", "task_id", "family", "difficulty"]
    prompts, seeds = list(data["prompt"]), list(data["rlvr_seed"])
    assert seeds == list(range(10, 16))
    assert prompts[0][-1]["role"] == "user"
    answers = [arithmetic_answer(p) for p in prompts]
    right = [f"The result is \\boxed{{{a}}}." for a in answers]
    wrong = [f"\\boxed{{{int(a) + 1}}}" for a in answers]
    reward = EnvReward("rlvr/Arithmetic-v0", **ARITHMETIC)
    assert reward.__name__ == "Arithmetic-v0"
    metrics = {}
    assert reward(prompts=prompts, completions=right, rlvr_seed=seeds) == [1.0] * 6
    out = reward(prompts=prompts * 2, completions=wrong + ["no answer"] * 6, rlvr_seed=seeds * 2,
                 log_metric=metrics.__setitem__)
    assert out == [0.0] * 12
    assert metrics["Arithmetic-v0/reason/wrong"] == 0.5 and metrics["Arithmetic-v0/reason/no_answer"] == 0.5
    # The same answers, scored by the math verifier against the worked-out references.
    math_reward = RewardFunc("math", reference="answer")
    assert math_reward(prompts=prompts, completions=right, answer=answers) == [1.0] * 6
    clone = pickle.loads(pickle.dumps(reward))
    assert clone(prompts=prompts[:1], completions=right[:1], rlvr_seed=seeds[:1]) == [1.0]


def _load_bench():
    if not TRL_BENCH.exists():
        needs.skip(f"{TRL_BENCH} is missing")
    spec = importlib.util.spec_from_file_location("trl_grpo_step", TRL_BENCH)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_a_real_grpo_trainer_step_uses_rlvr_rewards(tmp_path):
    trl = needs.module("trl")
    import torch
    from datasets import Dataset

    bench = _load_bench()
    torch.manual_seed(0)
    model, tokenizer = bench.build_model_and_tokenizer("tiny", seed=0, tiny_hidden=64)
    rows = env_dataset("rlvr/Arithmetic-v0", 4, **ARITHMETIC).to_list()
    for i, row in enumerate(rows):
        row["answer"] = arithmetic_answer(row["prompt"])
        row["kind"] = "math" if i % 2 == 0 else "other"
    rewards = [
        EnvReward("rlvr/Arithmetic-v0", **ARITHMETIC),
        RewardFunc("math", reference="answer", when={"kind": "math"}),
        RewardFunc("think_format"),
        RewardFunc("overlong", max_length=60, buffer=55),  # varies with length: non-zero advantages
    ]
    config = trl.GRPOConfig(
        output_dir=str(tmp_path), use_cpu=True, bf16=False, fp16=False, report_to="none", save_strategy="no",
        logging_steps=1, disable_tqdm=True, dataloader_num_workers=0, gradient_checkpointing=False, max_steps=1,
        per_device_train_batch_size=4, gradient_accumulation_steps=1, num_generations=2,
        max_completion_length=8, learning_rate=1e-3, beta=0.0, num_iterations=1, seed=0, shuffle_dataset=False,
    )
    trainer = trl.GRPOTrainer(model=model, reward_funcs=rewards, args=config,
                              train_dataset=Dataset.from_list(rows), processing_class=tokenizer)
    before = [p.detach().clone() for p in model.parameters()]
    trainer.train()
    log = next(h for h in trainer.state.log_history if "reward" in h)
    # A randomly initialised model writes no think tags: every completion fails the format check.
    assert log["rewards/think_format/mean"] == 0.0
    assert log["think_format/reason/format"] == 1.0
    assert log["rewards/Arithmetic-v0/mean"] == 0.0 and log["rewards/math/mean"] == 0.0
    assert log["Arithmetic-v0/reason/no_answer"] + log.get("Arithmetic-v0/reason/wrong", 0.0) == 1.0
    assert log["rewards/overlong/mean"] < 0 and log["overlong/reason/overlong"] > 0
    assert math.isfinite(log["loss"])
    assert trainer.state.global_step == 1
    assert any(not torch.equal(a, b.detach()) for a, b in zip(before, model.parameters()))
