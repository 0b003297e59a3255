"""rlvr/Arithmetic-v0: the env contract the trainer builds on (reset, step, groups, checker)."""

from __future__ import annotations

import re

import gymnasium as gym
import pytest
import sympy
from gymnasium.utils.env_checker import check_env

import rlvr.envs
from rlvr.envs import score_groups
from rlvr.registry import RegistryError, list_envs


def make(**kwargs):
    return gym.make("rlvr/Arithmetic-v0", **kwargs)


def expression(env) -> str:
    return re.search(r"Compute (.+?)\. Give", env.unwrapped.task.prompt).group(1)


@pytest.mark.parametrize("kwargs", [{}, {"digits": 4, "ops": "+-*/", "terms": 3}, {"think": True}])
def test_check_env_passes(kwargs):
    env = make(**kwargs)
    check_env(env.unwrapped)
    env.close()


def test_reset_returns_chat_messages_and_info_without_answer():
    env = make(digits=3, ops="+-")
    obs, info = env.reset(seed=7)
    assert [m["role"] for m in obs] == ["system", "user"]
    assert "\\boxed{}" in obs[0]["content"]
    assert set(info) >= {"task_id", "family", "difficulty", "prompt_text"}
    assert info["family"] == "arithmetic" and info["difficulty"] == 3
    assert obs[1]["content"] in info["prompt_text"]
    answer = env.unwrapped.task.reference
    assert answer not in [str(v) for v in info.values()]


def test_items_are_deterministic_by_seed_and_index():
    a, b = make(digits=3, ops="+-*"), make(digits=3, ops="+-*")
    assert a.reset(seed=11) == b.reset(seed=11)
    assert a.reset(seed=11)[0] != a.reset(seed=12)[0]
    first = a.reset(options={"index": 5})[0]
    assert b.reset(seed=999, options={"index": 5})[0] == first
    assert make(digits=3, ops="+-*", seed=1).reset(options={"index": 5})[0] != first  # the source seed matters


@pytest.mark.parametrize("digits,ops,terms", [(1, "+", 2), (3, "-", 2), (2, "*", 3), (2, "+-*/", 4), (5, "/", 2)])
def test_operands_digits_ops_and_gold_answer(digits, ops, terms):
    env = make(digits=digits, ops=ops, terms=terms)
    for seed in range(15):
        env.reset(seed=seed)
        expr = expression(env)
        tokens = expr.split()
        numbers, used_ops = tokens[::2], tokens[1::2]
        assert len(numbers) == terms and set(used_ops) <= set(ops)
        if "/" not in ops:  # division scales the dividend, so only then may a number grow
            assert all(len(n) == digits for n in numbers)
        value = sympy.sympify(expr)
        assert value.is_integer and str(value) == env.unwrapped.task.reference


def test_step_scores_a_scripted_policy():
    env = make(digits=2, ops="+")
    env.reset(seed=3)
    gold = env.unwrapped.task.reference
    obs, reward, terminated, truncated, info = env.step(f"12 + 30 = {gold}, so \\boxed{{{gold}}}")
    assert (reward, terminated, truncated, info["correct"]) == (1.0, True, False, True)
    assert obs[-1] == {"role": "assistant", "content": f"12 + 30 = {gold}, so \\boxed{{{gold}}}"}
    assert info["score"]["components"] == {"correct": 1.0}
    env.reset(seed=3)
    _, reward, _, _, info = env.step(f"\\boxed{{{int(gold) + 1}}}")
    assert reward == 0.0 and not info["correct"] and info["score"]["reason"] == "wrong"
    env.reset(seed=3)
    _, reward, _, _, info = env.step(f"The answer is {gold}.")  # not boxed, as the prompt asked
    assert reward == 0.0 and info["score"]["reason"] == "no_answer"


def test_an_unevaluated_expression_is_no_answer():
    # The prompt asks for the integer. A tool-learning run found that `(724*913)` earned full
    # credit (the verifier evaluated it): the question's product, bracketed or rearranged, scores 0.
    env = make(digits=3, ops="*", require_boxed=False)
    env.reset(seed=4)
    gold, (a, b) = env.unwrapped.task.reference, expression(env).split(" * ")
    completions = [gold, f"\\boxed{{{gold}}}", f"({a}*{b})", f"\\boxed{{{b} \\times {a}}}",
                   f"({int(a) - 1} + 1) * {b}", f"{int(gold) * 2}/2"]
    assert [r for r, _ in env.unwrapped.score_group(completions)] == [1.0, 1.0, 0.0, 0.0, 0.0, 0.0]


def test_require_boxed_off_accepts_an_unboxed_final_answer():
    strict, lenient = make(digits=2), make(digits=2, require_boxed=False)
    strict.reset(seed=2)
    lenient.reset(seed=2)
    gold = strict.unwrapped.task.reference
    completions = [f"The answer is {gold}.", f"\\boxed{{{gold}}}", "The answer is 0.5."]
    assert [r for r, _ in strict.unwrapped.score_group(completions)] == [0.0, 1.0, 0.0]
    assert [r for r, _ in lenient.unwrapped.score_group(completions)] == [1.0, 1.0, 0.0]
    assert strict.unwrapped.reward is not lenient.unwrapped.reward
    with pytest.raises(TypeError, match="require_boxed"):
        make(require_boxed="no")


def test_think_format_and_weights():
    env = make(digits=2, think=True, weights={"correct": 1.0, "format": 0.5})
    env.reset(seed=0)
    gold = env.unwrapped.task.reference
    _, reward, _, _, info = env.step(f"<think>adding</think> \\boxed{{{gold}}}")
    assert reward == 1.5 and info["score"]["components"] == {"correct": 1.0, "format": 1.0}
    env.reset(seed=0)
    _, reward, _, _, info = env.step(f"\\boxed{{{gold}}}")  # right answer, no think block
    assert reward == 1.0 and info["correct"] and info["score"]["reasons"] == {"format": "format"}
    assert "<think>" in env.reset(seed=0)[0][0]["content"]


def test_score_group_leaves_the_episode_alone():
    env = make(digits=2, ops="+-")
    obs, _ = env.reset(seed=5)
    gold = env.unwrapped.task.reference
    group = [f"\\boxed{{{gold}}}", "\\boxed{0.5}", "no idea", f"<think>x</think>\\boxed{{{gold}}}"]
    results = env.unwrapped.score_group(group)
    assert [r for r, _ in results] == [1.0, 0.0, 0.0, 1.0]
    assert [i["correct"] for _, i in results] == [True, False, False, True]
    assert results[2][1]["score"]["reason"] == "no_answer"
    # Same as stepping each completion, and the episode can still be stepped.
    _, reward, terminated, _, info = env.step(group[0])
    assert reward == 1.0 and terminated and info == results[0][1]


def test_score_groups_batch_of_prompts_by_completions():
    envs = [make(digits=2, ops="+-*") for _ in range(4)] + [gym.make("rlvr/Countdown-v0")]
    for b, env in enumerate(envs):
        env.reset(seed=100 + b)
    completions = []
    for env in envs[:4]:
        gold = env.unwrapped.task.reference
        completions.append([f"\\boxed{{{gold}}}", f"\\boxed{{{int(gold) - 1}}}", gold])
    completions.append(["\\boxed{0}", "\\boxed{(}"])
    results = score_groups(envs, completions)
    assert [[r for r, _ in row] for row in results[:4]] == [[1.0, 0.0, 0.0]] * 4
    assert [info["task_id"] for _, info in results[1]] == [envs[1].unwrapped.task.task_id] * 3
    assert [i["score"]["reason"] for _, i in results[4]] == ["wrong", "parse_error"]
    with pytest.raises(ValueError, match="2 envs but 1"):
        score_groups(envs[:2], completions[:1])


def test_works_with_gymnasium_vector():
    vec = gym.vector.SyncVectorEnv([lambda: make(digits=1) for _ in range(3)])
    obs, info = vec.reset(seed=0)
    assert len(obs) == 3 and all(o[1]["role"] == "user" for o in obs)
    golds = [env.unwrapped.task.reference for env in vec.envs]
    _, rewards, terminated, _, _ = vec.step((f"\\boxed{{{golds[0]}}}", "\\boxed{-1}", f"\\boxed{{{golds[2]}}}"))
    assert rewards.tolist() == [1.0, 0.0, 1.0] and terminated.all()
    vec.close()


def test_works_with_async_vector_envs_without_shared_memory():
    vec = gym.vector.AsyncVectorEnv([lambda: make(digits=1) for _ in range(2)], shared_memory=False)
    obs, _ = vec.reset(seed=0)
    golds = [str(sympy.sympify(re.search(r"Compute (.+?)\. Give", o[1]["content"]).group(1))) for o in obs]
    _, rewards, _, _, _ = vec.step((f"\\boxed{{{golds[0]}}}", "\\boxed{-1}"))
    assert rewards.tolist() == [1.0, 0.0]
    vec.close()


def test_bad_arguments_give_one_clear_error():
    with pytest.raises(ValueError, match="digits|difficulty"):
        make(digits=0)
    with pytest.raises(ValueError, match="ops"):
        make(ops="+x")
    with pytest.raises(ValueError, match="unknown reward component|registered|format"):
        make(weights={"format": 1.0})
    with pytest.raises(TypeError, match="unexpected keyword"):
        make(digts=3)
    with pytest.raises(RegistryError, match="unknown env 'rlvr/Nope-v0'"):
        rlvr.envs.make("rlvr/Nope-v0")
    env = make()
    with pytest.raises(gym.error.ResetNeeded):
        env.unwrapped.step("\\boxed{1}")
    with pytest.raises(ValueError, match="unknown reset option"):
        env.reset(options={"level": 3})
    env.reset(seed=0)
    env.unwrapped.step("\\boxed{1}")
    with pytest.raises(gym.error.ResetNeeded):
        env.unwrapped.step("\\boxed{1}")


def test_listed_for_rlvr_list():
    assert "rlvr/Arithmetic-v0" in list_envs()
