"""Evaluation plays by training's rules (#53): on one tool env with SmolLM2, held-out evaluation in
`rlvr train`, `rlvr eval --model` and `rlvr eval --endpoint` (the real llama.cpp server, greedy) play
the same episodes.

A spy on the episode loop (`rollout/loop.rollout`, which every path calls) records each episode the
paths play: its task, every turn's text, the turn count, the turn rewards, the return and how it ended.

- Held-out evaluation and `rlvr eval --model --eval-seed` (the same prompts, env seeds eval_seed + i)
  play identical episodes, turn for turn, under the same token budget (`max_episode_tokens` in the
  config, `--max-episode-tokens` on the command line): on ToolMath with SmolLM2, and on a self-check
  env with the tiny model where the budget cuts every episode.
- A served model cannot be made token-identical: llama.cpp multiplies the Q4_1 GGUF weights with
  activations it quantizes to 8 bits (its Q8_1 dot products), while the local model runs the same
  weights de-quantized in fp32, so greedy decoding takes another token wherever the top two logits are
  closer than that error. Everything up to that point is the same and is tested: the same tasks and
  prompts, sent with the loop's stop string (`</tool_call>`), greedily, with the turn limit; each turn
  ends where a local turn would (at the end of a call, the marker the server leaves out put back,
  nothing after it reaching `env.step`); and a turn that the served model wrote like the local one
  gets the same reward and the same next observation. The token budget counts the model's tokens, which
  only the local paths have: an endpoint's episode is bounded by its turns and each turn's limit.
"""

from __future__ import annotations

import json

import pytest
from conftest import require_docker
from llama_server import Relay

from rlvr.cli import main
from rlvr.envs import make
from rlvr.envs.python_tool import PythonTool
from rlvr.envs.tool_calls import CLOSE, OPEN
from rlvr.trainer.config import TrainConfig
from rlvr.trainer.grpo import GRPOTrainer
from rlvr.trainer.rollout import loop
from rlvr.trainer.rollout.chat import tool_messages

ENV = "rlvr/ToolMath-v0"
KWARGS = {"tasks": "arithmetic", "digits": 3, "ops": "*", "require_boxed": False, "demos": 2, "max_turns": 3}
PROMPTS, EVAL_SEED, MAX_NEW, BUDGET = 4, 1_000_000, 40, 90


def record(groups, into: list[dict]) -> None:
    for g in groups:
        into += [{"task": info.get("task_id"), "replies": info["replies"], "turns": info["turns"],
                  "turn_rewards": info["turn_rewards"], "reward": reward, "correct": info.get("correct"),
                  "tool_calls": info.get("tool_calls"), "ended_by": info.get("ended_by")}
                 for reward, info in zip(g.rewards, g.infos)]


def spy(patch, into: list[dict]) -> None:
    """Record every episode the loop plays into `into`."""
    real = loop.rollout

    def rollout(*args, **kwargs):
        groups = real(*args, **kwargs)
        record(groups, into)
        return groups

    patch.setattr(loop, "rollout", rollout)


@pytest.fixture
def played(monkeypatch) -> list[dict]:
    """Every episode the loop plays while the test runs."""
    episodes = []
    spy(monkeypatch, episodes)
    return episodes


def eval_args(model: str) -> list[str]:
    return ["eval", "--env", ENV, *[f"--env-arg={k}={json.dumps(v)}" for k, v in KWARGS.items()], "--model", model,
            "--eval-seed", str(EVAL_SEED), "--limit", str(PROMPTS), "--batch-size", str(PROMPTS),
            "--max-new-tokens", str(MAX_NEW), "--max-episode-tokens", str(BUDGET), "--json", "--no-progress"]


@pytest.fixture(scope="module")
def held_out(tmp_path_factory) -> tuple[list[dict], dict]:
    """The episodes of `rlvr train`'s held-out evaluation (at step 0) and what it logged."""
    require_docker(lambda: PythonTool().pool())
    episodes, patch = [], pytest.MonkeyPatch()
    spy(patch, episodes)
    run = tmp_path_factory.mktemp("run")
    try:
        config = TrainConfig(model="smollm2", env=ENV, env_kwargs=KWARGS, steps=0, prompts_per_step=1, group_size=2,
                             eval_prompts=PROMPTS, eval_seed=EVAL_SEED, eval_batch_size=PROMPTS,
                             max_new_tokens=MAX_NEW, max_episode_tokens=BUDGET, progress=False)
        GRPOTrainer(config, run).train()
    finally:
        patch.undo()
    return episodes, json.loads((run / "eval.jsonl").read_text().splitlines()[0])


def test_held_out_evaluation_and_rlvr_eval_model_play_the_same_episodes(held_out, played, capsys):
    trained, logged = held_out
    assert main(eval_args("smollm2")) == 0
    result = json.loads(capsys.readouterr().out)
    assert played == trained  # the same tasks, turns, texts, rewards and endings, episode for episode
    assert len(trained) == PROMPTS and len({e["task"] for e in trained}) == PROMPTS
    assert any(e["tool_calls"] for e in trained)  # turns that ended at the end of a call
    assert (result["pass_at"]["pass@1"], result["mean_reward"]) == (logged["accuracy"], logged["reward"])
    assert (result["turns_mean"], result["tool_calls_mean"]) == (logged["turns_mean"], logged["tool_calls_mean"])


def test_the_episode_token_budget_cuts_alike(played, tmp_path, capsys):
    env, kwargs, budget = "rlvr/MathSelfCheck-v0", {"tasks": "arithmetic", "digits": 2}, 12
    config = TrainConfig(model="tiny", env=env, env_kwargs=kwargs, steps=0, prompts_per_step=1, group_size=2,
                         eval_prompts=3, eval_seed=EVAL_SEED, eval_batch_size=3, max_new_tokens=8,
                         max_episode_tokens=budget, threads=1, progress=False)
    GRPOTrainer(config, tmp_path).train()
    trained = list(played)
    played.clear()
    assert main(["eval", "--env", env, *[f"--env-arg={k}={json.dumps(v)}" for k, v in kwargs.items()], "--model",
                 "tiny", "--eval-seed", str(EVAL_SEED), "--limit", "3", "--batch-size", "3", "--max-new-tokens", "8",
                 "--max-episode-tokens", str(budget), "--no-progress"]) == 0
    assert played == trained and len(played) == 3
    assert all(e["ended_by"] == "token_budget" and e["reward"] == 0.0 for e in played)


def test_rlvr_eval_endpoint_plays_by_the_same_rules(held_out, played, llama_server, capsys):
    local, _ = held_out
    relay = Relay(llama_server.port)
    try:
        assert main([*eval_args(llama_server.model), "--endpoint", relay.url, "--concurrency", "1"]) == 0
    finally:
        relay.close()
    served = played
    assert [e["task"] for e in served] == [e["task"] for e in local]  # the same tasks
    requests, replies = relay.requests[1:], relay.replies[1:]  # after the request that checks the server answers
    for request in requests:  # greedy, the turn limit, the loop's stop string
        assert (request["temperature"], request["max_tokens"], request["stop"]) == (0.0, MAX_NEW, [CLOSE])
    # the same prompts: for each task, a request holds the conversation the local paths render, tools
    # described in the system message
    sent = [[m["content"] for m in request["messages"]] for request in requests]
    for i in range(PROMPTS):
        env = make(ENV, **KWARGS)
        observation, _ = env.reset(seed=EVAL_SEED + i)
        assert [m["content"] for m in tool_messages(observation, env)] in sent
        env.close()
    # a turn ends where a local turn would: the server stops at the end of a call and leaves the marker out,
    # the turn gets it back, and nothing after a call reaches env.step
    texts = [t for e in served for t in e["replies"]]
    choices = [(r["choices"][0]["finish_reason"], r["choices"][0]["message"].get("content") or "") for r in replies]
    called = [content for finish, content in choices if finish == "stop" and OPEN in content]
    assert called, [e["replies"] for e in served]  # the served model called the tool
    for content in called:
        assert CLOSE not in content and (content + CLOSE in texts or content in texts)
    assert any(content + CLOSE in texts for content in called)  # a call that reads got its marker back
    for text in texts:
        assert CLOSE not in text or (text.count(CLOSE) == 1 and text.rstrip().endswith(CLOSE))
    # where a served turn is the local one, the env answers alike: the same reward, then the same next turn
    same = 0
    for mine, theirs in zip(local, served):
        for k, (a, b) in enumerate(zip(mine["replies"], theirs["replies"])):
            if a != b or k >= min(len(mine["turn_rewards"]), len(theirs["turn_rewards"])):
                break
            assert mine["turn_rewards"][k] == theirs["turn_rewards"][k]
            same += 1
    print(f"turns the served model wrote as the local one did: {same} of {len(texts)}")
