"""Chunked completion log-probs (checked to never build the full logits tensor) and cached sampling."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from padded import padded
from torch.utils._python_dispatch import TorchDispatchMode

from rlvr.trainer.logprobs import _pack, group_logprobs, token_logprobs
from rlvr.trainer.models import load_model
from rlvr.trainer.rollout.sampler import pick_tokens, sample
from rlvr.trainer.rollout.sessions import SamplingSettings


@pytest.fixture(scope="module")
def tiny():
    model, tok = load_model("tiny", seed=0)
    return model, tok


class LargestVocabTensor(TorchDispatchMode):
    """Records the most rows of any vocabulary-wide tensor an op allocates (forward and backward).

    Views and in-place results share an input's storage and are not allocations (the transposed
    output projection weight, for one), so they are left out.
    """

    def __init__(self, vocab: int):
        super().__init__()
        self.vocab, self.rows = vocab, 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        inputs = [a for a in torch.utils._pytree.tree_leaves((args, kwargs))
                  if isinstance(a, torch.Tensor) and a.layout == torch.strided]  # sparse gradients have no storage
        shared = {a.untyped_storage().data_ptr() for a in inputs}
        for t in out if isinstance(out, (tuple, list)) else [out]:
            if (isinstance(t, torch.Tensor) and t.layout == torch.strided and t.dim() >= 1 and t.shape[-1] == self.vocab
                    and t.untyped_storage().data_ptr() not in shared):
                self.rows = max(self.rows, t.numel() // self.vocab)
        return out


def _batch(groups=4, length=12, lengths=(12, 7, 1, 10)):
    torch.manual_seed(1)
    prompt = torch.randint(0, 5000, (9,))
    completions = torch.randint(0, 5000, (groups, length))
    lengths = torch.tensor(lengths)[:groups]
    mask = (torch.arange(length) < lengths.unsqueeze(1)).float()
    return prompt, completions, mask


@pytest.fixture(params=["sdpa", "eager"])
def attention(request, tiny):
    model, _ = tiny
    before = model.config._attn_implementation
    model.config._attn_implementation = request.param
    yield request.param
    model.config._attn_implementation = before


# 1024: the group in one row behind one prompt; 15: two rows; 1: one row per completion
@pytest.mark.parametrize("row_tokens", [1024, 15, 1])
@pytest.mark.parametrize("lengths", [(12, 7, 1, 10), (12, 0, 3, 0)])
def test_group_logprobs_equal_a_plain_full_forward(tiny, attention, row_tokens, lengths):
    model, _ = tiny
    prompt, completions, mask = _batch(lengths=lengths)
    logp, entropy = group_logprobs(model, prompt, completions, mask, temperature=0.7, chunk_tokens=5,
                                   with_entropy=True, row_tokens=row_tokens)
    full = torch.cat([prompt.expand(4, -1), completions], dim=1)
    logits = model(full).logits[:, len(prompt) - 1:-1].float() / 0.7
    ref = torch.log_softmax(logits, -1).gather(-1, completions.unsqueeze(-1)).squeeze(-1) * mask
    ref_entropy = -(torch.softmax(logits, -1) * torch.log_softmax(logits, -1)).sum(-1) * mask
    assert torch.allclose(logp, ref, atol=1e-4)
    assert torch.allclose(entropy, ref_entropy, atol=1e-4)
    assert torch.all(logp[mask == 0] == 0)


@pytest.mark.parametrize("row_tokens", [1024, 15])
def test_gradients_equal_those_of_the_full_forward(tiny, row_tokens):
    model, _ = tiny
    prompt, completions, mask = _batch()
    model.zero_grad()
    group_logprobs(model, prompt, completions, mask, chunk_tokens=4, row_tokens=row_tokens)[0].sum().backward()
    chunked = [p.grad.to_dense().clone() for p in model.parameters()]  # the embedding's own gradient is sparse
    model.zero_grad()
    full = torch.cat([prompt.expand(4, -1), completions], dim=1)
    logits = model(full).logits[:, len(prompt) - 1:-1]
    (torch.log_softmax(logits, -1).gather(-1, completions.unsqueeze(-1)).squeeze(-1) * mask).sum().backward()
    for a, p in zip(chunked, model.parameters()):
        assert torch.allclose(a, p.grad, atol=1e-4)
    model.zero_grad()


def test_packing_fills_rows_up_to_the_budget_and_skips_empty_completions():
    # prompt of 4; a completion of n tokens adds n - 1 to its row (its last token predicts nothing)
    assert _pack(4, [5, 0, 3, 7], row_tokens=10) == [[0, 2], [3]]
    assert _pack(4, [5, 3, 7], row_tokens=100) == [[0, 1, 2]]
    assert _pack(4, [30, 2], row_tokens=10) == [[0], [1]]  # too long for the budget: a row of its own
    assert _pack(4, [0, 0], row_tokens=10) == []


def test_a_group_with_nothing_to_train_gives_zeros(tiny):
    model, _ = tiny
    prompt, completions, mask = _batch(lengths=(0, 0, 0, 0))
    logp, entropy = group_logprobs(model, prompt, completions, mask, with_entropy=True)
    assert logp.shape == entropy.shape == completions.shape
    assert not logp.any() and not entropy.any()


def test_packed_rows_cost_no_padding_and_one_decoder_call(tiny):
    model, _ = tiny
    prompt, completions, mask = _batch()
    calls = []
    hook = model.get_decoder().register_forward_hook(lambda m, a, kw, out: calls.append(kw["inputs_embeds"].shape),
                                                     with_kwargs=True)
    try:
        group_logprobs(model, prompt, completions, mask)
    finally:
        hook.remove()
    assert calls == [(1, 9 + 11 + 6 + 0 + 9, model.config.hidden_size)]  # prompt + each completion but its last token


def test_chunked_path_never_allocates_the_full_logits(tiny):
    model, _ = tiny
    vocab = model.config.vocab_size
    prompt, completions, mask = _batch()
    with LargestVocabTensor(vocab) as seen:
        group_logprobs(model, prompt, completions, mask, chunk_tokens=4)[0].sum().backward()
    assert 0 < seen.rows <= 4  # one chunk of rows at a time, forward and backward
    with LargestVocabTensor(vocab) as naive:  # the check does catch a full logits tensor
        model(torch.cat([prompt.expand(4, -1), completions], dim=1)).logits.sum().backward()
    assert naive.rows >= 4 * 12
    model.zero_grad()


def test_token_logprobs_do_not_depend_on_the_chunk_size():
    torch.manual_seed(0)
    head = torch.nn.Linear(8, 50)
    hidden, targets = torch.randn(11, 8), torch.randint(0, 50, (11,))
    ref = torch.log_softmax(head(hidden), -1).gather(-1, targets.unsqueeze(-1)).squeeze(-1)
    for chunk in (1, 3, 11, 100):
        assert torch.allclose(token_logprobs(hidden, head, targets, chunk_tokens=chunk)[0], ref, atol=1e-6)


def test_top_p_sampling_by_inverse_cdf():
    logits = torch.log(torch.tensor([[0.5, 0.3, 0.2], [0.5, 0.3, 0.2]]))
    # nucleus 0.6 keeps tokens 0 and 1 (0.5 + 0.3): u = 0.1 -> 0; u = 0.9 -> 0.72 of 0.8 -> token 1
    assert pick_tokens(logits, torch.tensor([0.1, 0.9]), 1.0, 0.6)[0].tolist() == [0, 1]
    # without the nucleus u = 0.9 falls in token 2's slice
    assert pick_tokens(logits, torch.tensor([0.1, 0.9]), 1.0, 1.0)[0].tolist() == [0, 2]


def test_sampler_reports_the_log_probability_of_each_token_under_its_nucleus():
    logits = torch.log(torch.tensor([[0.5, 0.3, 0.2], [0.5, 0.3, 0.2]]))
    _, logp = pick_tokens(logits, torch.tensor([0.1, 0.9]), 1.0, 0.6)  # renormalised over {0, 1}: 0.625, 0.375
    assert torch.allclose(logp.exp(), torch.tensor([0.625, 0.375]))
    _, logp = pick_tokens(logits, torch.tensor([0.1, 0.9]), 1.0, 1.0)
    assert torch.allclose(logp.exp(), torch.tensor([0.5, 0.2]))


def test_sampled_logprobs_equal_the_training_forward(tiny):
    model, _ = tiny
    prompt = [1, 500, 600, 700]
    out = sample(model, [prompt], SamplingSettings(n=3, max_new_tokens=6, temperature=0.8), [0])[0]
    ids, mask = padded(out.completion_ids)
    with torch.no_grad():
        logp = group_logprobs(model, torch.tensor(prompt), ids, mask, temperature=0.8)[0]
    for row, (lps, c) in enumerate(zip(out.logprobs, out.completion_ids)):
        assert len(lps) == len(c) and torch.allclose(torch.tensor(lps), logp[row, :len(c)], atol=1e-4)


def test_greedy_sampling_matches_transformers_generate(tiny):
    model, tok = tiny
    prompts = [[1, 500, 600, 700], [1, 42]]
    ours = sample(model, prompts, SamplingSettings(n=2, max_new_tokens=6, greedy=True), pad_token_id=tok.pad_token_id)
    for p, s in zip(prompts, ours):
        ref = model.generate(torch.tensor([p]), max_new_tokens=6, do_sample=False, eos_token_id=None)
        assert s.completion_ids == [ref[0, len(p):].tolist()] * 2 and s.truncated == [True, True]


def test_a_prompts_samples_do_not_depend_on_its_batch(tiny):
    model, tok = tiny
    alone = sample(model, [[1, 42]], SamplingSettings(n=3, max_new_tokens=5), [7])
    batched = sample(model, [[1, 500, 600, 700], [1, 42]], SamplingSettings(n=3, max_new_tokens=5), [3, 7])
    assert alone[0].completion_ids == batched[1].completion_ids
    assert len(set(map(tuple, alone[0].completion_ids))) > 1  # really sampled


def test_sampling_stops_at_eos(tiny):
    model, _ = tiny
    greedy = sample(model, [[1, 42]], SamplingSettings(max_new_tokens=5, greedy=True))[0].completion_ids[0]
    stop = greedy[2]
    stopped = sample(model, [[1, 42]], SamplingSettings(max_new_tokens=5, greedy=True, stop_token_ids=(stop,)))[0]
    assert stopped.completion_ids == [greedy[:greedy.index(stop) + 1]] and stopped.truncated == [False]


@pytest.mark.parametrize("keep", [True, False])  # the softmax kept for backward, or recomputed there
@pytest.mark.parametrize("leaf", [True, False])
def test_head_gradients_match_autograd_with_temperature_bias_and_existing_grads(leaf, keep, monkeypatch):
    import rlvr.trainer.logprobs as logprobs

    monkeypatch.setattr(logprobs, "KEEP_SOFTMAX_BYTES", 10**9 if keep else 0)
    torch.manual_seed(0)
    head = torch.nn.Linear(8, 50)
    hidden = torch.randn(11, 8, requires_grad=True)
    targets, weights = torch.randint(0, 50, (11,)), torch.randn(11)
    scale = torch.ones(1, requires_grad=True)  # a non-leaf weight (e.g. a scaled or merged one) still gets its gradient

    def run(fn):
        for p in (*head.parameters(), hidden, scale):
            p.grad = torch.full_like(p, 0.5)  # gradients already there are added to, not replaced
        w = head.weight if leaf else head.weight * scale
        (fn(w) * weights).sum().backward()
        return [p.grad.clone() for p in (*head.parameters(), hidden, scale)]

    ref = run(lambda w: torch.log_softmax(F.linear(hidden, w, head.bias) / 0.7, -1).gather(
        -1, targets.unsqueeze(-1)).squeeze(-1))
    ours = run(lambda w: token_logprobs(hidden, Head(w, head.bias), targets, temperature=0.7, chunk_tokens=4)[0])
    for a, b in zip(ours, ref):
        assert torch.allclose(a, b, atol=1e-5)


def test_kept_and_recomputed_softmax_give_the_same_gradients_to_the_bit(monkeypatch):
    """Whether a call keeps its softmax depends on its size (a rank's share of a batch can differ from the
    whole batch's): the two ways must not change a single bit of the gradient, or runs diverge."""
    import rlvr.trainer.logprobs as logprobs

    torch.manual_seed(0)
    head = torch.nn.Linear(16, 300)
    hidden = torch.randn(37, 16)
    targets, weights = torch.randint(0, 300, (37,)), torch.randn(37)

    def grads(budget):
        monkeypatch.setattr(logprobs, "KEEP_SOFTMAX_BYTES", budget)
        head.zero_grad(set_to_none=True)
        h = hidden.clone().requires_grad_(True)
        logp, entropy = token_logprobs(h, head, targets, temperature=0.9, chunk_tokens=8, with_entropy=True)
        (logp * weights).sum().backward()
        return [logp.detach(), entropy, h.grad, head.weight.grad.clone(), head.bias.grad.clone()]

    for kept, recomputed in zip(grads(10**9), grads(0)):
        assert torch.equal(kept, recomputed)


class Head(torch.nn.Module):
    def __init__(self, weight, bias):
        super().__init__()
        self.weight, self.bias = weight, bias
