"""Multi-turn rollouts: the ids trained are the ids sampled, env tokens carry no gradient,
`error` episodes are no training signal, and the whole episode is run through the env."""

import gymnasium as gym
import pytest
import torch
from padded import padded

from rlvr.envs import ListTasks
from rlvr.envs.multiturn import SELF_CHECK, MathSelfCheckEnv
from rlvr.trainer.config import TrainConfig
from rlvr.trainer.logprobs import group_logprobs
from rlvr.trainer.loss import grpo_loss
from rlvr.trainer.models import load_model
from rlvr.trainer.rollout.chat import env_tokens
from rlvr.trainer.rollout.envs import call_ended, end_marker
from rlvr.trainer.rollout.groups import drop_errors, is_error
from rlvr.trainer.rollout.loop import local_rollout
from rlvr.verifiers.core import Score

TASKS = [{"prompt": f"What is {a} + {b}?", "answer": str(a + b)} for a in range(3) for b in range(3)]


class FlakyCheck(MathSelfCheckEnv):
    """The self-check env, whose second turn's scoring 'fails' (an infrastructure error) for odd-length turns
    and otherwise gives (its length mod 10) / 10: a tiny random model's episodes get different rewards."""

    def step(self, action):
        obs, reward, term, trunc, info = super().step(action)
        if term and len(action) % 2:
            score = Score(0.0, "error", info={"sandbox": "down"})
            info = {**self.outcome(score), "final_reward": 0.0}
            reward = 0.0
        elif term:
            reward = len(action) % 10 / 10
            info = {**info, "final_reward": reward}
        return obs, reward, term, trunc, info


gym.register("test_episodes/SelfCheck-v0", entry_point=lambda **kw: MathSelfCheckEnv(ListTasks(TASKS), **kw))
gym.register("test_episodes/Flaky-v0", entry_point=lambda **kw: FlakyCheck(ListTasks(TASKS), **kw))


@pytest.fixture(scope="module")
def tiny():
    torch.manual_seed(0)
    return load_model("tiny", seed=0)


def episodes(tiny, env_id="test_episodes/SelfCheck-v0", prompts=2, g=3, **kw):
    model, tok = tiny
    envs = [gym.make(env_id) for _ in range(prompts * g)]
    groups = local_rollout(model, tok, envs, list(range(prompts)), seed=0, group_size=g, max_new_tokens=6,
                           budget=kw.pop("max_episode_tokens", 200), **kw)
    assert [len(group.completion_ids) for group in groups] == [g] * prompts  # the tests loop over every episode
    return groups


def test_every_turn_is_played_and_the_env_reply_is_the_template_rendering(tiny):
    model, tok = tiny
    for g in episodes(tiny):
        for ids, weights, info in zip(g.completion_ids, g.weights, g.infos):
            assert info["turns"] == 2 and len(info["turn_rewards"]) == 2 and len(info["step_rewards"]) == 2
            # the env's part: zero weight, exactly the template's text after the first turn
            start = weights.index(0)
            end = weights.index(1, start)
            closed = ids[start - 1] == tok.eos_token_id  # the model ended its turn itself, or was cut
            assert tok.decode(ids[start:end]) == ("" if closed else "<|im_end|>") + \
                f"\n<|im_start|>user\n{SELF_CHECK}<|im_end|>\n<|im_start|>assistant\n"
            assert set(weights[:start]) == {1} and set(weights[end:]) == {1}


def test_trained_ids_are_the_sampled_ids(tiny):
    """The sampler's log-prob of every sampled token, computed through a cache carried across turns,
    equals the training forward's on the stored ids: same ids, same context, no re-encoding drift."""
    model, tok = tiny
    for g in episodes(tiny):
        ids, mask = padded(g.completion_ids, g.weights)
        with torch.no_grad():
            logp, _ = group_logprobs(model, torch.tensor(g.prompt_ids), ids, mask)
        for i, (w, sampled) in enumerate(zip(g.weights, g.sample_logps)):
            for t, (wt, lp) in enumerate(zip(w, sampled)):
                if wt:
                    assert abs(float(logp[i, t]) - lp) < 1e-4, (i, t)


def test_no_gradient_flows_from_env_tokens(tiny):
    model, tok = tiny
    g = episodes(tiny, prompts=1, g=2)[0]
    ids, mask = padded(g.completion_ids, g.weights)
    width = ids.shape[1]
    logp, _ = group_logprobs(model, torch.tensor(g.prompt_ids), ids, mask)
    logp.retain_grad()
    loss, _ = grpo_loss(logp, logp.detach(), torch.tensor([1.0, -1.0]), mask, n_seqs=2,
                        n_tokens=int(mask.sum()), max_tokens=width)
    loss.backward()
    env_positions = (mask == 0) & (torch.arange(width) < torch.tensor([len(c) for c in g.completion_ids])[:, None])
    assert env_positions.any() and (mask == 1).any()
    assert torch.all(logp.grad[env_positions] == 0)
    assert torch.all(logp.grad[mask == 1] != 0)


def test_token_budget_cuts_an_episode_with_return_zero(tiny):
    for g in episodes(tiny, max_episode_tokens=10):
        for ids, info, reward, cut in zip(g.completion_ids, g.infos, g.rewards, g.truncated):
            assert len(ids) <= 10 and cut and info["ended_by"] == "token_budget" and reward == 0.0


def test_error_episodes_are_left_out_of_advantages_and_counted(tiny):
    from rlvr.trainer.grpo import GRPOTrainer
    from rlvr.trainer.loss import group_advantages

    model, tok = tiny
    cfg = TrainConfig(model="tiny", env="test_episodes/Flaky-v0", prompts_per_step=3, group_size=4,
                      max_new_tokens=6, steps=1, progress=False, skip_zero_variance=False)
    import tempfile

    with tempfile.TemporaryDirectory() as run_dir:
        trainer = GRPOTrainer(cfg, run_dir, model=model, tokenizer=tok)
        groups, kept = trainer.sample_step()
    errors = sum(g.errors for g in groups)
    assert errors > 0, "the flaky env should fail some episodes"
    assert sum(len(g.infos) for g in groups) == 3 * 4 - errors
    assert not any(is_error(i) for g in groups for i in g.infos)
    # the case at stake: a group that lost episodes and still has different rewards
    assert any(g.errors and max(g.rewards) != min(g.rewards) for g, _ in kept), [(g.errors, g.rewards) for g in groups]
    for g, adv in kept:  # the statistics of each group are those of its remaining episodes only
        assert len(adv) == len(g.rewards) >= 2
        expected = group_advantages(torch.tensor([g.rewards]), "group", "sample", 1e-4)[0]
        assert torch.allclose(adv, expected), (g.rewards, adv)  # all 0 for equal rewards
    record = trainer._record(groups, kept, {"clipped": 0, "kl": 0, "tokens": 0, "entropy": 0, "entropy_tokens": 0,
                                            "grad_norm": 0, "updates": 0, "sampler_kl": 0}, 0.0, 1.0, 1.0, cfg)
    assert record["errors"] == errors and record["turns_mean"] == 2.0


def test_drop_errors_keeps_single_turn_groups_whole():
    from rlvr.trainer.rollout.groups import Group

    g = Group(0, [1], [[2], [3]], [False, False], ["a", "b"], [1.0, 0.0],
              [{"score": {"reason": None}}, {"score": {"reason": "error"}}], [[0.0], [0.0]])
    out = drop_errors(g)
    assert out.rewards == [1.0] and out.errors == 1 and out.texts == ["a"] and drop_errors(out) is out


def test_env_tokens_strip_the_sampled_end_of_turn():
    from rlvr.trainer.models import load_tokenizer

    tok = load_tokenizer("smollm2")
    messages = [{"role": "user", "content": "q"}, {"role": "assistant", "content": "a"},
                {"role": "tool", "content": "42"}]
    assert tok.decode(env_tokens(tok, messages, None, sampled_eos=True)) == \
        "\n<|im_start|>tool\n42<|im_end|>\n<|im_start|>assistant\n"
    assert tok.decode(env_tokens(tok, messages, None, sampled_eos=False)).startswith("<|im_end|>\n<|im_start|>tool")


def test_a_turn_stops_where_the_env_parser_says_a_call_ended():
    from rlvr.envs.tool_calls import CodeBlockParser
    from rlvr.envs.tool_env import ToolEnv

    def add(a: int, b: int) -> int:
        """Add."""
        return a + b

    hermes = ToolEnv(ListTasks(TASKS), tools=[add])
    code = ToolEnv(ListTasks(TASKS), tools=[add], parser=CodeBlockParser("add", "a"))
    fence, tagged = "Run:\n```python\nprint(1)\n```", '<tool_call>{"name": "add"}</tool_call>'
    assert call_ended(code)(fence) and not call_ended(code)(tagged)
    assert call_ended(hermes)(tagged) and not call_ended(hermes)(fence)
    assert call_ended(gym.make("test_episodes/SelfCheck-v0"))(tagged)  # no parser: the Hermes default
    # the cheap test on a turn's last tokens, before the whole turn is decoded
    assert fence.endswith(end_marker(code)) and tagged.endswith(end_marker(hermes))
