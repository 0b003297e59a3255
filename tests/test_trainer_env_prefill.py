"""The env's tokens go through the carried KV cache as one prefill (`kvcache.feed_rows`): the logits
after it are those of feeding the same tokens one at a time and of encoding the whole conversation
again, for a ragged batch, and episodes sample what they sampled when env tokens took a step each."""

import gymnasium as gym
import pytest
import torch

from rlvr.envs import ListTasks
from rlvr.envs.multiturn import MultiTurnEnv
from rlvr.trainer.kvcache import cache_kwarg, feed_rows, returned_cache
from rlvr.trainer.models import load_model
from rlvr.trainer.rollout.groups import prompt_seed
from rlvr.trainer.rollout.loop import local_rollout
from rlvr.trainer.rollout.sampler import prefill_prompts

TOL = 1e-4  # fp32 on CPU: the three ways of computing a log-prob agree to ~1e-6; a wrong position or mask is >1e-2
TASKS = [{"prompt": f"What is {a} + {b}?", "answer": str(a + b)} for a in range(3) for b in range(3)]


class RaggedReplies(MultiTurnEnv):
    """Three turns; the env's reply has 1 to 12 words, depending on the turn it answers."""

    def next_message(self, score, info):
        return " ".join(["again"] * (1 + len(self._messages[-1]["content"]) % 12))


gym.register("test_prefill/Ragged-v0", entry_point=lambda **kw: RaggedReplies(ListTasks(TASKS), max_turns=3, **kw))


@pytest.fixture(scope="module", params=["sdpa", "eager"])
def tiny(request):
    model, tok = load_model("tiny", seed=0)
    model.config._attn_implementation = request.param
    return model.eval(), tok


def _step(model, cache, mask, next_pos, tokens):
    """One decoding step of every row, as the episode loop takes it."""
    mask = torch.cat([mask, mask.new_ones((len(mask), 1))], dim=1)
    out = model(input_ids=torch.tensor(tokens).unsqueeze(-1), attention_mask=mask, position_ids=next_pos,
                use_cache=True, **cache_kwarg(model, cache))
    return out.logits[:, -1], mask, next_pos + 1


@torch.no_grad()
def test_a_ragged_prefill_equals_token_by_token_and_a_full_re_encode(tiny):
    model, tok = tiny
    gen = torch.Generator().manual_seed(0)
    prompts = [torch.randint(10, 5000, (k,), generator=gen).tolist() for k in (3, 9, 5, 12)]
    first = [11, 12, 13, 14]  # each row's last sampled token, before the env's reply
    chunks = {0: torch.randint(10, 5000, (5,), generator=gen).tolist(), 2: [77],
              3: torch.randint(10, 5000, (9,), generator=gen).tolist()}  # row 1 gets no reply
    after = [21, 22, 23, 24]  # one more sampled token per row, through the merged cache

    cache, _, mask, next_pos = prefill_prompts(model, prompts, 1, tok.pad_token_id, "cpu")
    logits, mask, next_pos = _step(model, cache, mask, next_pos, first)
    fed, mask, next_pos = feed_rows(model, cache, mask, next_pos, list(chunks), list(chunks.values()),
                                    tok.pad_token_id)
    logits[list(chunks)] = fed
    final, _, _ = _step(model, cache, mask, next_pos, after)

    for row, prompt in enumerate(prompts):
        reply = chunks.get(row, [])
        conversation = prompt + [first[row]] + reply + [after[row]]
        whole = model(input_ids=torch.tensor([conversation])).logits[0]
        # one at a time through a cache of this row alone
        one = model(input_ids=torch.tensor([prompt]), use_cache=True)
        for t in [first[row], *reply]:
            one = model(input_ids=torch.tensor([[t]]), use_cache=True, **cache_kwarg(model, returned_cache(one)))
        one_final = model(input_ids=torch.tensor([[after[row]]]), **cache_kwarg(model, returned_cache(one)))
        for got, full, single in ((logits[row], whole[-2], one.logits[0, -1]),
                                  (final[row], whole[-1], one_final.logits[0, -1])):
            got, full, single = (torch.log_softmax(x, -1) for x in (got, full, single))
            assert (got - full).abs().max() < TOL, (row, float((got - full).abs().max()))
            assert (got - single).abs().max() < TOL, (row, float((got - single).abs().max()))
    assert next_pos.squeeze(-1).tolist() == [len(p) + 1 + len(chunks.get(r, [])) for r, p in enumerate(prompts)]


@torch.no_grad()
def test_replies_fed_at_different_steps_keep_the_cache_as_long_as_its_longest_row(tiny):
    """Rows answered one after another each widen the whole batch by their reply; the masked columns are
    dropped, so the cache spans the longest row, not the sum of the replies, and the logits are unchanged."""
    model, tok = tiny
    gen = torch.Generator().manual_seed(1)
    prompts = [torch.randint(10, 5000, (k,), generator=gen).tolist() for k in (4, 7, 6)]
    replies = [torch.randint(10, 5000, (k,), generator=gen).tolist() for k in (20, 30, 25)]
    cache, _, mask, next_pos = prefill_prompts(model, prompts, 1, tok.pad_token_id, "cpu")
    logits, mask, next_pos = _step(model, cache, mask, next_pos, [11, 12, 13])
    history = [list(p) + [t] for p, t in zip(prompts, [11, 12, 13])]
    for row in range(3):  # one reply a step, each to another row
        fed, mask, next_pos = feed_rows(model, cache, mask, next_pos, [row], [replies[row]], tok.pad_token_id)
        history[row] += replies[row]
        logits[row] = fed[0]
        chosen = [30 + row, 40 + row, 50 + row]
        for r in range(3):
            history[r].append(chosen[r])
        logits, mask, next_pos = _step(model, cache, mask, next_pos, chosen)
        lengths = [len(h) for h in history]
        assert mask.sum(-1).tolist() == lengths
        assert mask.shape[1] == cache.get_seq_length() == max(lengths), (mask.shape, lengths)
    for row, conversation in enumerate(history):
        whole = torch.log_softmax(model(input_ids=torch.tensor([conversation])).logits[0, -1], -1)
        assert (torch.log_softmax(logits[row], -1) - whole).abs().max() < TOL, row


@torch.no_grad()
def test_each_sampled_token_is_drawn_with_its_own_uniform_under_the_full_conversation(tiny):
    """Token k of episode j of a prompt is the inverse-CDF pick of the k-th uniform draw of that prompt's
    generator (env tokens count, as when each took a decoding step), under the distribution of the whole
    conversation encoded afresh; its reported log-prob is that distribution's."""
    model, tok = tiny
    seed, group = 5, 3
    envs = [gym.make("test_prefill/Ragged-v0") for _ in range(2 * group)]
    groups = local_rollout(model, tok, envs, [0, 1], seed=seed, group_size=group, max_new_tokens=5, budget=200)
    lengths = set()
    checked = 0
    for g in groups:
        draws = torch.Generator().manual_seed(prompt_seed(seed, g.index))
        uniforms = torch.stack([torch.rand(group, generator=draws) for _ in range(max(map(len, g.completion_ids)))])
        for j, (ids, weights, logps, info) in enumerate(zip(g.completion_ids, g.weights, g.sample_logps, g.infos)):
            assert info["turns"] == 3
            runs = "".join(map(str, weights)).split("1")
            lengths.update(len(r) for r in runs if r)
            probs = torch.softmax(model(input_ids=torch.tensor([g.prompt_ids + ids])).logits[0].float(), -1)
            for k, (t, w, lp) in enumerate(zip(ids, weights, logps)):
                if not w:
                    continue
                p = probs[len(g.prompt_ids) + k - 1]
                cum = p.cumsum(-1)
                u = float(uniforms[k, j]) * float(cum[-1])
                low = float(cum[t - 1]) if t else 0.0
                assert low - 1e-5 <= u <= float(cum[t]) + 1e-5, (g.index, j, k)
                assert abs(float(p[t].log()) - lp) < TOL
                checked += 1
    assert checked > 50 and len(lengths) > 2, (checked, lengths)  # replies of several lengths were fed


def test_a_peft_model_gets_the_cache_under_its_base_models_name():
    """peft's forward takes any keyword and passes it on: the cache goes under the name the base model's
    forward takes, so sampling a LoRA model does not use the name transformers deprecates (`past_key_values`,
    a FutureWarning made an error here)."""
    import warnings

    from peft import LoraConfig, get_peft_model

    from rlvr.trainer.rollout.sampler import sample
    from rlvr.trainer.rollout.sessions import SamplingSettings

    base, _ = load_model("tiny", seed=0)
    peft_model = get_peft_model(base, LoraConfig(r=4, target_modules=["q_proj"]))
    assert cache_kwarg(peft_model, None).keys() == cache_kwarg(base, None).keys()
    assert "cache" in cache_kwarg(base, None)  # this transformers takes `cache`: the check above can tell
    with warnings.catch_warnings():
        warnings.filterwarnings("error", message=".*past_key_values.*")
        (out,) = sample(peft_model, [[5, 6, 7]], SamplingSettings(n=2, max_new_tokens=4), [0])
    assert [len(ids) for ids in out.completion_ids] == [4, 4]
