"""TRL environments: rlvr envs as `GRPOTrainer(environment_factory=...)`, down to a real trainer step."""

import math
import os

import gymnasium
import needs
import pytest
from conftest import require_docker

from rlvr.envs import ListTasks
from rlvr.envs.tool_calls import HermesParser
from rlvr.envs.tool_env import ToolEnv
from rlvr.envs.tools import ToolUnavailable
from rlvr.integrations.trl_environment import environment_dataset, environment_factory
from rlvr.registry import register_verifier
from rlvr.verifiers import OverlongPenalty

TOOLMATH = {"tasks": "arithmetic", "digits": 1, "ops": "+", "require_boxed": False}
# A length penalty in characters (0 only under 5) makes every completion's reward its own, right or wrong.
register_verifier("trl_env_test_length", lambda: OverlongPenalty(max_length=200, buffer=195), replace=True)
TOOLMATH_TRAIN = {**TOOLMATH, "weights": {"trl_env_test_length": 1.0}}


def multiply(a: int, b: int) -> int:
    """Multiply two integers exactly.

    Args:
        a: the first factor
        b: the second factor
    """
    return a * b


def broken_sandbox(code: str) -> str:
    """Run code (its infrastructure is down)."""
    raise ToolUnavailable("the sandbox is down")


def _multiply_env(**kwargs):
    tasks = ListTasks([{"prompt": "What is 123 * 456?", "answer": "56088"}, {"prompt": "What is 7 * 8?", "answer": "56"}])
    return ToolEnv(tasks, tools=[multiply, broken_sandbox], max_tool_calls=2, **kwargs)


gymnasium.register(id="rlvr-test/Multiply-v0", entry_point=_multiply_env)


def _row(data, i):
    return {k: data[k][i] for k in data.column_names}


def test_tool_methods_carry_the_schema_trl_reads():
    from transformers.utils import get_json_schema

    factory = environment_factory("rlvr-test/Multiply-v0")
    env = factory()
    assert type(env).__name__ == "Multiply-v0"
    schemas = {s["function"]["name"]: s for s in env.env.unwrapped.tool_schemas}
    read = get_json_schema(env.multiply)  # what TRL's chat template call reads from the bound method
    assert read["function"].pop("return") == {"type": "string"}  # the method returns the tool's reply
    assert read == schemas["multiply"]
    # transformers refuses a parameter without a description: an undocumented one is described by its type.
    read = get_json_schema(env.broken_sandbox)["function"]
    assert schemas["broken_sandbox"]["function"]["parameters"]["properties"]["code"] == {"type": "string"}
    assert read["parameters"]["properties"]["code"] == {"type": "string", "description": "string"}


def test_reset_returns_the_task_and_tools_run_through_the_env():
    factory = environment_factory("rlvr-test/Multiply-v0")
    data = environment_dataset("rlvr-test/Multiply-v0", 3, seed=5)
    assert [m["content"] for m in data[0]["prompt"]][-1] == ""
    env = factory()
    expected, _ = gymnasium.make("rlvr-test/Multiply-v0").reset(seed=data[0]["rlvr_seed"])
    assert env.reset(**_row(data, 0)) == expected[-1]["content"]
    assert env.multiply(a=123, b=456) == "56088"
    assert env.multiply(a=1).startswith("Error: bad arguments for multiply")
    assert env.multiply(a=2, b=3).startswith("Error: no more tool calls, the episode has ended (max_tool_calls)")
    with pytest.raises(ValueError, match="rlvr_seed"):
        env.reset(prompt=data[0]["prompt"])


def test_answers_hand_over_the_final_message_and_get_reward_returns_the_score():
    factory = environment_factory("rlvr-test/Multiply-v0")
    data = environment_dataset("rlvr-test/Multiply-v0", 4, seed=0)
    envs = [factory() for _ in range(4)]
    tasks = [env.reset(**_row(data, i)) for i, env in enumerate(envs)]
    answers = ["56088" if "123" in t else "56" for t in tasks]
    with pytest.raises(RuntimeError, match="factory.answers"):
        envs[0].get_reward()
    envs[0].multiply(a=123, b=456)
    assert envs[3].broken_sandbox(code="1") == "Error: no more tool calls, the episode has ended (error)."
    call = HermesParser.format_call("multiply", {"a": 1, "b": 2})
    completions = [
        [{"role": "assistant", "content": "", "tool_calls": []}, {"role": "tool", "content": "x"},
         {"role": "assistant", "content": f"So it is \\boxed{{{answers[0]}}}."}],
        [{"role": "assistant", "content": "\\boxed{1}"}],
        [{"role": "assistant", "content": call}],  # a call TRL did not run is not an answer
        [{"role": "assistant", "content": f"\\boxed{{{answers[3]}}}"}],
    ]
    metrics, extra = {}, {}
    out = factory.answers(prompts=[None] * 4, completions=completions, environments=envs,
                          log_metric=metrics.__setitem__, log_extra=extra.__setitem__)
    assert out == [0.0, 0.0, 0.0, None]
    assert [env.get_reward() for env in envs] == [1.0, 0.0, 0.0, None]
    assert extra["Multiply-v0_reason"] == [None, "wrong", "no_answer", "error"]
    assert metrics["Multiply-v0/correct"] == 0.5  # over the two episodes the composite scored
    assert metrics["Multiply-v0/reason/error"] == 0.25 and metrics["Multiply-v0/tool_calls"] == 0.5
    # Handed over once: a second call keeps the first outcome.
    factory.answers(completions=[[{"role": "assistant", "content": "\\boxed{0}"}]], environments=envs[:1])
    assert envs[0].get_reward() == 1.0


def test_mistakes_fail_when_the_factory_is_made():
    with pytest.raises(gymnasium.error.Error):
        environment_factory("rlvr/NoSuchEnv-v0")
    with pytest.raises(TypeError):
        environment_factory("rlvr/ToolMath-v0", bogus=1)


def test_the_python_tool_runs_in_the_sandbox():
    factory = environment_factory("rlvr/ToolMath-v0", **TOOLMATH)
    env = factory()
    require_docker(env.env.unwrapped.tools["python"][0].pool)  # skips without Docker, fails under CI
    env.reset(rlvr_seed=3)
    assert env.python(code="x = 6 * 7\nprint(x)") == "42"
    assert env.python(code="x + 1") == "43"  # the notebook keeps state across calls


def _smollm2_with_tool_template():
    import trl

    from rlvr.trainer.models import load_model

    try:
        model, tokenizer = load_model("smollm2")
    except LookupError as exc:
        needs.skip(str(exc))
    # SmolLM2's own template has no tools; Qwen2.5's is ChatML with <tool_call> (SmolLM2's tokens), and TRL
    # knows how to read its tool calls back.
    tokenizer.chat_template = open(os.path.join(os.path.dirname(trl.__file__), "chat_templates",
                                                "qwen2_5.jinja")).read()
    return model, tokenizer


def test_a_real_grpo_trainer_step_on_toolmath_logs_rlvr_rewards(tmp_path, monkeypatch):
    trl = needs.module("trl")
    import torch

    monkeypatch.setenv("TRL_EXPERIMENTAL_SILENCE", "1")
    require_docker(environment_factory("rlvr/ToolMath-v0", **TOOLMATH_TRAIN)().env.unwrapped.tools["python"][0].pool)
    torch.manual_seed(0)
    model, tokenizer = _smollm2_with_tool_template()
    factory = environment_factory("rlvr/ToolMath-v0", **TOOLMATH_TRAIN)
    data = environment_dataset("rlvr/ToolMath-v0", 4, seed=100, **TOOLMATH_TRAIN)
    config = trl.GRPOConfig(
        output_dir=str(tmp_path), use_cpu=True, bf16=False, fp16=False, report_to="none", save_strategy="no",
        logging_steps=1, disable_tqdm=True, dataloader_num_workers=0, gradient_checkpointing=False, max_steps=1,
        per_device_train_batch_size=4, gradient_accumulation_steps=1, num_generations=2,
        max_completion_length=24, learning_rate=1e-5, beta=0.0, num_iterations=1, seed=0, shuffle_dataset=False,
    )
    trainer = trl.GRPOTrainer(model=model, processing_class=tokenizer, args=config, train_dataset=data,
                              environment_factory=factory, reward_funcs=[factory.answers])
    assert [t.__name__ for t in trainer.tools] == ["python"]
    trainer.train()
    log = next(h for h in trainer.state.log_history if "reward" in h)

    # The same completions, scored by rlvr directly: the env's composite on the final assistant message.
    envs = {}
    for seed in data["rlvr_seed"]:
        env = gymnasium.make("rlvr/ToolMath-v0", **TOOLMATH_TRAIN)
        messages, _ = env.reset(seed=seed)
        envs[messages[-1]["content"]] = env.unwrapped
    expected, lengths = [], []
    for prompt, completion in zip(trainer._logs["prompt"], trainer._logs["completion"]):
        env = envs[prompt[-1]["content"]]
        final = [m for m in completion if m["role"] == "assistant"][-1]
        if final.get("tool_calls") or HermesParser()(final["content"]).attempted:
            expected.append(0.0)
            continue
        reward, reference, fields = env.scoring_inputs()
        score = reward.score(final["content"], reference, **fields)
        expected.append(score.value)
        lengths.append(score.components["trl_env_test_length"])
    logged = list(trainer._logs["rewards"]["ToolMath-v0"])
    assert len(logged) == 4
    assert logged == pytest.approx(expected)
    assert log["rewards/ToolMath-v0/mean"] == pytest.approx(sum(expected) / 4)
    if lengths:  # completions the composite scored (not ones that ended on a tool call)
        assert log["ToolMath-v0/trl_env_test_length"] == pytest.approx(sum(lengths) / len(lengths))
    # Every call TRL made reached the rlvr env (its own count of calls per rollout).
    assert log["ToolMath-v0/tool_calls"] == pytest.approx(log["tools/call_frequency"])
    assert log["rewards/ToolMath-v0/answers/mean"] == 0.0
    assert math.isfinite(log["loss"]) and trainer.state.global_step == 1
    print("TRL completions:", [c[-1]["content"][:60] for c in trainer._logs["completion"]], "rewards:", logged,
          "tool calls/rollout:", log.get("ToolMath-v0/tool_calls"))
