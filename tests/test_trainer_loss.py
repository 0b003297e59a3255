"""Every GRPO formula against a hand computation, and the aggregation's invariance to how a batch is split."""

from __future__ import annotations

import math

import pytest
import torch

from rlvr.trainer.loss import (
    AGGREGATIONS,
    aggregate,
    group_advantages,
    grpo_loss,
    importance_ratio,
    kl_k3,
    process_advantages,
)


def test_group_advantages_sample_and_population_std():
    rewards = torch.tensor([[1.0, 0.0, 0.0, 1.0]])
    # mean 0.5; sample std sqrt(4 * 0.25 / 3) = 0.57735; population std 0.5
    sample = group_advantages(rewards, "group", "sample", eps=0.0)
    assert torch.allclose(sample, torch.tensor([[1, -1, -1, 1]]) * 0.5 / math.sqrt(1 / 3))
    population = group_advantages(rewards, "group", "population", eps=0.0)
    assert torch.allclose(population, torch.tensor([[1.0, -1.0, -1.0, 1.0]]))
    eps = group_advantages(rewards, "group", "population", eps=0.5)
    assert torch.allclose(eps, torch.tensor([[0.5, -0.5, -0.5, 0.5]]))


def test_group_advantages_batch_and_none_scaling():
    rewards = torch.tensor([[1.0, 0.0], [1.0, 1.0]])
    # centred per group: [[0.5, -0.5], [0, 0]]; population std of all four rewards: sqrt(3/16)
    batch = group_advantages(rewards, "batch", "population", eps=0.0)
    assert torch.allclose(batch, torch.tensor([[0.5, -0.5], [0.0, 0.0]]) / math.sqrt(3 / 16))
    none = group_advantages(rewards, "none")
    assert torch.equal(none, torch.tensor([[0.5, -0.5], [0.0, 0.0]]))
    with pytest.raises(ValueError, match="scale_rewards"):
        group_advantages(rewards, "groups")
    with pytest.raises(ValueError, match="std"):
        group_advantages(rewards, "group", "unbiased")


def test_process_advantages_sum_the_steps_ending_at_or_after_each_token():
    # completion 1: steps rewarded 1 (ends at token 1) and 0 (ends at token 3); completion 2: one step 0 (token 2)
    adv = process_advantages([[1.0, 0.0], [0.0]], [[1, 3], [2]], lengths=[4, 3], std="sample", eps=0.0)
    # all step rewards [1, 0, 0]: mean 1/3, sample std sqrt(1/3); normalised: 1 -> 1.1547, 0 -> -0.57735
    hi, lo = (2 / 3) / math.sqrt(1 / 3), (-1 / 3) / math.sqrt(1 / 3)
    assert torch.allclose(adv[0], torch.tensor([hi + lo, hi + lo, lo, lo]))
    assert torch.allclose(adv[1], torch.tensor([lo, lo, lo]))


def test_process_advantages_leave_tokens_after_the_last_step_at_zero():
    adv = process_advantages([[1.0], [0.0]], [[0], [0]], lengths=[3, 2], std="population", eps=0.0)
    assert torch.allclose(adv[0], torch.tensor([1.0, 0.0, 0.0]))
    assert torch.allclose(adv[1], torch.tensor([-1.0, 0.0]))


def test_k3_kl_matches_the_formula_and_vanishes_at_equality():
    logp, ref = torch.tensor([math.log(0.5), -1.0]), torch.tensor([math.log(0.25), -1.0])
    # d = ref - logp = log(0.5): exp(d) - d - 1 = 0.5 + log 2 - 1
    assert torch.allclose(kl_k3(logp, ref), torch.tensor([0.5 + math.log(2) - 1, 0.0]))


def test_importance_ratio_token_and_sequence_level():
    logp, old = torch.tensor([[0.1, 0.3, 5.0]]), torch.zeros(1, 3)
    mask = torch.tensor([[1.0, 1.0, 0.0]])
    assert torch.allclose(importance_ratio(logp, old, mask, "token"), torch.exp(logp))
    # GSPO: exp(mean of the real tokens' log-ratios) = exp(0.2) on every token; the padded 5.0 is ignored
    assert torch.allclose(importance_ratio(logp, old, mask, "sequence"), torch.full((1, 3), math.exp(0.2)))


def test_clipped_surrogate_and_its_gradient():
    old = torch.zeros(1, 3)
    logp = torch.log(torch.tensor([[1.5, 0.5, 1.1]])).requires_grad_()
    adv = torch.tensor([[1.0, -1.0, 1.0]])
    mask = torch.ones(1, 3)
    loss, stats = grpo_loss(logp, old, adv, mask, n_seqs=1, n_tokens=3, max_tokens=3, aggregation="token-mean",
                            epsilon_low=0.2, epsilon_high=0.28)
    # token 1: min(1.5, 1.28) = 1.28; token 2: min(-0.5, -0.8) = -0.8; token 3: 1.1 (inside the clip range)
    assert loss.item() == pytest.approx((-1.28 + 0.8 - 1.1) / 3)
    assert stats["clipped"] == 2 and stats["tokens"] == 3
    loss.backward()
    # clipped tokens pass no gradient; d(-ratio * A)/d logp = -ratio * A / 3 for the third
    assert torch.allclose(logp.grad, torch.tensor([[0.0, 0.0, -1.1 / 3]]))


def test_clip_higher_lets_positive_tokens_grow_further():
    logp, old, adv, mask = torch.log(torch.tensor([[1.25]])), torch.zeros(1, 1), torch.ones(1, 1), torch.ones(1, 1)
    kw = dict(n_seqs=1, n_tokens=1, max_tokens=1, epsilon_low=0.2)
    assert grpo_loss(logp, old, adv, mask, epsilon_high=0.2, **kw)[0].item() == pytest.approx(-1.2)
    assert grpo_loss(logp, old, adv, mask, epsilon_high=0.28, **kw)[0].item() == pytest.approx(-1.25)


def test_tokens_from_another_sampler_are_weighted_by_the_truncated_importance_weight():
    old = torch.log(torch.tensor([[0.5, 0.5, 0.9]]))
    sampler = torch.log(torch.tensor([[0.5, 0.4, 0.3]]))  # weights 1, 1.25 and 3 -> capped at 2
    logp = old.clone().requires_grad_()
    adv, mask = torch.ones(1), torch.ones(1, 3)
    loss, _ = grpo_loss(logp, old, adv, mask, n_seqs=1, n_tokens=3, max_tokens=3, sampler_logp=sampler, tis_cap=2.0)
    assert loss.item() == pytest.approx(-(1 + 1.25 + 2) / 3)
    loss.backward()  # the weight is a constant: d(-w * ratio)/d logp = -w / 3 at ratio 1
    assert torch.allclose(logp.grad, torch.tensor([[-1 / 3, -1.25 / 3, -2 / 3]]))


def test_masked_correction_drops_tokens_outside_the_bound_and_keeps_the_others_unbiased():
    old = torch.log(torch.tensor([[0.5, 0.5, 0.9, 0.1]]))
    sampler = torch.log(torch.tensor([[0.5, 0.4, 0.3, 0.5]]))  # ratios 1, 1.25, 3 (> 2) and 0.2 (< 1/2)
    logp = old.clone().requires_grad_()
    adv, mask = torch.ones(1), torch.ones(1, 4)
    loss, stats = grpo_loss(logp, old, adv, mask, n_seqs=1, n_tokens=4, max_tokens=4, sampler_logp=sampler,
                            tis_cap=2.0, correction="mis")
    assert loss.item() == pytest.approx(-(1 + 1.25) / 4)
    loss.backward()
    assert torch.allclose(logp.grad, torch.tensor([[-1 / 4, -1.25 / 4, 0.0, 0.0]]))
    assert stats["is_corrected"] == 2 and stats["is_ratio_max"] == pytest.approx(3.0)
    assert stats["is_ratio_sum"] == pytest.approx(1 + 1.25 + 3 + 0.2)
    truncated = grpo_loss(old, old, adv, mask, n_seqs=1, n_tokens=4, max_tokens=4, sampler_logp=sampler,
                          tis_cap=2.0)
    assert truncated[1]["is_corrected"] == 1  # truncation only caps the ratio above the bound
    assert truncated[0].item() == pytest.approx(-(1 + 1.25 + 2 + 0.2) / 4)
    padded = grpo_loss(old, old, adv, torch.tensor([[1.0, 1.0, 0.0, 0.0]]), n_seqs=1, n_tokens=2, max_tokens=4,
                       sampler_logp=sampler, tis_cap=2.0, correction="mis")[1]
    assert padded["is_corrected"] == 0 and padded["is_ratio_max"] == pytest.approx(1.25)  # padding is not counted
    with pytest.raises(ValueError, match="correction"):
        grpo_loss(old, old, adv, mask, n_seqs=1, n_tokens=4, max_tokens=4, sampler_logp=sampler, correction="x")


def test_kl_term_is_weighted_by_beta():
    logp, ref = torch.full((1, 2), math.log(0.5)), torch.full((1, 2), math.log(0.25))
    adv, mask = torch.zeros(1), torch.ones(1, 2)
    loss, stats = grpo_loss(logp, logp, adv, mask, n_seqs=1, n_tokens=2, max_tokens=2, beta=0.1, ref_logp=ref)
    kl = 0.5 + math.log(2) - 1
    assert loss.item() == pytest.approx(0.1 * kl) and stats["kl"] == pytest.approx(2 * kl)
    with pytest.raises(ValueError, match="reference"):
        grpo_loss(logp, logp, adv, mask, n_seqs=1, n_tokens=2, max_tokens=2, beta=0.1)


def test_the_three_aggregations():
    per_token = torch.tensor([[1.0, 2.0, 3.0], [4.0, 9.0, 9.0]])
    mask = torch.tensor([[1.0, 1.0, 1.0], [1.0, 0.0, 0.0]])
    assert aggregate(per_token, mask, "seq-mean-token-mean", 2, 4, 5).item() == pytest.approx((2 + 4) / 2)
    assert aggregate(per_token, mask, "token-mean", 2, 4, 5).item() == pytest.approx(10 / 4)
    assert aggregate(per_token, mask, "seq-mean-token-sum-norm", 2, 4, 5).item() == pytest.approx(10 / (2 * 5))
    with pytest.raises(ValueError, match="aggregation"):
        aggregate(per_token, mask, "mean", 2, 4, 5)


@pytest.mark.parametrize("aggregation", AGGREGATIONS)
@pytest.mark.parametrize("ratio_level", ["token", "sequence"])
def test_gradient_is_the_same_however_the_batch_is_split(aggregation, ratio_level):
    """Summed gradients of any split (accumulation steps, processes) equal the whole batch's gradient."""
    torch.manual_seed(0)
    n, length = 6, 5
    features = torch.randn(n, length, 4)
    weight = torch.randn(4, requires_grad=True)
    old = -torch.rand(n, length)
    ref = -torch.rand(n, length)
    adv = torch.randn(n)
    lengths = torch.tensor([5, 3, 1, 4, 2, 5])
    mask = (torch.arange(length) < lengths.unsqueeze(1)).float()
    totals = dict(n_seqs=n, n_tokens=int(mask.sum()), max_tokens=length)
    kw = dict(aggregation=aggregation, ratio_level=ratio_level, beta=0.05, epsilon_low=0.1, epsilon_high=0.15)

    def loss_of(rows):
        logp = -torch.nn.functional.softplus(features[rows] @ weight)
        return grpo_loss(logp, old[rows], adv[rows], mask[rows], ref_logp=ref[rows], **totals, **kw)[0]

    whole = torch.autograd.grad(loss_of(list(range(n))), weight)[0]
    for split in ([[0, 1, 2], [3, 4, 5]], [[0], [1, 2, 3, 4], [5]], [[i] for i in range(n)]):
        summed = sum(torch.autograd.grad(loss_of(rows), weight)[0] for rows in split)
        assert torch.allclose(summed, whole, atol=1e-6), split
