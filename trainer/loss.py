"""The whole GRPO objective: advantages, the clipped surrogate, the KL penalty and the aggregation.

Shapes: a group is the G completions of one prompt. Token tensors are (sequences x length)
with a 0/1 `mask` marking real completion tokens.

Advantages (outcome supervision), for rewards r of one group:
    A_i = (r_i - mean(r)) / (std(r) + eps)
`scale_rewards`: "group" divides by the group's std, "batch" by the std of all rewards of
the batch (centred per group), "none" does not divide (Dr. GRPO: dividing by a small std
over-weights nearly solved or nearly failed prompts). `std="sample"` (n - 1 denominator, as
TRL does) or `std="population"` (n denominator); they differ by sqrt(G / (G - 1)).

Process supervision (DeepSeekMath): each completion has per-step rewards, each step ending
at a token index. All step rewards of the group are normalised together; a token's
advantage is the sum of the normalised rewards of the steps that end at or after it.

Surrogate, with ratio rho = exp(logp - old_logp) per token, or GSPO's per-sequence
rho_i = exp(mean over the sequence of (logp - old_logp)) given to every token:
    loss_t = -min(rho_t A_t, clip(rho_t, 1 - epsilon_low, 1 + epsilon_high) A_t)
A larger `epsilon_high` (clip-higher, DAPO) lets unlikely tokens with A > 0 grow faster.
When tokens were sampled by a behaviour policy mu other than the policy pi_old the ratio starts
from (bf16 sampling with fp32 training, another engine, or an older policy version in an
asynchronous run), each token's surrogate is weighted by a constant built from
w_t = exp(old_logp_t - sampler_logp_t) = pi_old / mu and a bound C (`tis_cap`):
    "tis" (truncated, Yao et al., 2025):   min(w_t, C)
    "mis" (masked):                        w_t if 1/C <= w_t <= C, else 0 (the token is left out)
Truncation keeps every token with a biased weight; masking keeps the unbiased weight where it is
trustworthy and drops tokens whose behaviour probability is far off.
KL (k3 estimator) to a frozen reference, added as beta * kl_t:
    kl_t = exp(ref_t - logp_t) - (ref_t - logp_t) - 1

Aggregation over the batch (all processes, all gradient-accumulation slices):
    "seq-mean-token-mean"     sum_i mean_t loss_it / n_seqs           (GRPO paper)
    "token-mean"              sum_it loss_it / n_tokens                (DAPO)
    "seq-mean-token-sum-norm" sum_it loss_it / (n_seqs * max_tokens)   (Dr. GRPO)
The denominators are batch-wide totals passed in, so a slice's loss is its exact share of the
batch loss: summing the gradients of any split (or all-reducing them across processes) gives
the gradient of the whole batch.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

AGGREGATIONS = ("seq-mean-token-mean", "token-mean", "seq-mean-token-sum-norm")
SCALES = ("group", "batch", "none")


def _std(x: torch.Tensor, kind: str, dim=None) -> torch.Tensor:
    if kind not in ("sample", "population"):
        raise ValueError(f"std must be 'sample' or 'population', not {kind!r}")
    return x.std(dim=dim, correction=1 if kind == "sample" else 0)


def group_advantages(rewards: torch.Tensor, scale_rewards: str = "group", std: str = "sample",
                     eps: float = 1e-4) -> torch.Tensor:
    """Advantages (B x G) of rewards (B prompts x G completions)."""
    if scale_rewards not in SCALES:
        raise ValueError(f"scale_rewards must be one of {SCALES}, not {scale_rewards!r}")
    centred = rewards - rewards.mean(dim=1, keepdim=True)
    if scale_rewards == "group":
        return centred / (_std(rewards, std, dim=1).unsqueeze(1) + eps)
    if scale_rewards == "batch":
        return centred / (_std(rewards, std) + eps)
    return centred


def process_advantages(step_rewards: Sequence[Sequence[float]], step_ends: Sequence[Sequence[int]],
                       lengths: Sequence[int], std: str = "sample", eps: float = 1e-4) -> list[torch.Tensor]:
    """Token advantages of one group from per-step rewards; step j of completion i ends at token step_ends[i][j]."""
    flat = torch.tensor([r for steps in step_rewards for r in steps], dtype=torch.float32)
    if flat.numel() == 0:
        return [torch.zeros(n) for n in lengths]
    spread = _std(flat, std) if flat.numel() > 1 else torch.tensor(0.0)
    mean, spread = flat.mean(), spread + eps
    out = []
    for rewards, ends, n in zip(step_rewards, step_ends, lengths):
        adv = torch.zeros(n)
        for r, end in zip(rewards, ends):
            adv[: min(end, n - 1) + 1] += (r - mean) / spread  # tokens 0..end belong to steps ending at/after them
        out.append(adv)
    return out


def kl_k3(logp: torch.Tensor, ref_logp: torch.Tensor) -> torch.Tensor:
    """Per-token k3 estimate of KL(policy || reference): exp(d) - d - 1 with d = ref - logp (>= 0)."""
    d = ref_logp - logp
    return torch.exp(d) - d - 1


def importance_ratio(logp: torch.Tensor, old_logp: torch.Tensor, mask: torch.Tensor,
                     level: str = "token") -> torch.Tensor:
    """Per-token ratio (S x L): token-level, or GSPO's sequence-level geometric mean repeated on each token."""
    log_ratio = logp - old_logp
    if level == "token":
        return torch.exp(log_ratio)
    if level == "sequence":
        seq = (log_ratio * mask).sum(-1) / mask.sum(-1).clamp(min=1)
        return torch.exp(seq).unsqueeze(-1).expand_as(logp)
    raise ValueError(f"ratio level must be 'token' or 'sequence', not {level!r}")


CORRECTIONS = ("tis", "mis")


def behaviour_weight(old_logp: torch.Tensor, sampler_logp: torch.Tensor, cap: float,
                     mode: str = "tis") -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(weight, ratio, corrected) per token, without gradient: the off-policy weight of tokens drawn by
    a behaviour policy, the raw ratio pi_old / mu, and which tokens were truncated or masked."""
    ratio = torch.exp(old_logp.detach() - sampler_logp)
    if mode == "tis":
        corrected = ratio > cap
        return ratio.clamp(max=cap), ratio, corrected
    if mode == "mis":
        corrected = (ratio > cap) | (ratio < 1.0 / cap)
        return ratio.masked_fill(corrected, 0.0), ratio, corrected
    raise ValueError(f"off-policy correction must be one of {CORRECTIONS}, not {mode!r}")


def aggregate(per_token: torch.Tensor, mask: torch.Tensor, mode: str, n_seqs: int, n_tokens: int,
              max_tokens: int) -> torch.Tensor:
    """This slice's share of the batch loss; n_seqs / n_tokens are the whole batch's totals."""
    per_token = per_token * mask
    if mode == "seq-mean-token-mean":
        return (per_token.sum(-1) / mask.sum(-1).clamp(min=1)).sum() / n_seqs
    if mode == "token-mean":
        return per_token.sum() / n_tokens
    if mode == "seq-mean-token-sum-norm":
        return per_token.sum() / (n_seqs * max_tokens)
    raise ValueError(f"loss aggregation must be one of {AGGREGATIONS}, not {mode!r}")


def grpo_loss(logp, old_logp, advantages, mask, *, n_seqs: int, n_tokens: int, max_tokens: int,
              aggregation: str = "token-mean", epsilon_low: float = 0.2, epsilon_high: float = 0.2,
              ratio_level: str = "token", ref_logp=None, beta: float = 0.0, sampler_logp=None,
              tis_cap: float = 2.0, correction: str = "tis"):
    """(loss, stats) for a slice of the batch. `advantages` is per sequence (S,) or per token (S x L).

    stats (detached, summed over the slice's real tokens): clipped tokens, KL sum, token count; with
    `sampler_logp` also the behaviour ratios' sum and maximum and the tokens truncated or masked.
    """
    adv = advantages.unsqueeze(-1) if advantages.dim() == 1 else advantages
    ratio = importance_ratio(logp, old_logp, mask, ratio_level)
    clipped_ratio = ratio.clamp(1 - epsilon_low, 1 + epsilon_high)
    per_token = -torch.minimum(ratio * adv, clipped_ratio * adv)
    behaviour = None
    if sampler_logp is not None:
        behaviour = behaviour_weight(old_logp, sampler_logp, tis_cap, correction)
        per_token = per_token * behaviour[0]
    kl = None
    if beta != 0.0:
        if ref_logp is None:
            raise ValueError("beta > 0 needs reference log-probs")
        kl = kl_k3(logp, ref_logp)
        per_token = per_token + beta * kl
    loss = aggregate(per_token, mask, aggregation, n_seqs, n_tokens, max_tokens)
    with torch.no_grad():
        was_clipped = ((ratio < 1 - epsilon_low) & (adv < 0)) | ((ratio > 1 + epsilon_high) & (adv > 0))
        stats = {
            "clipped": float((was_clipped * mask).sum()),
            "kl": float((kl * mask).sum()) if kl is not None else 0.0,
            "tokens": float(mask.sum()),
        }
        if behaviour is not None:
            _, ratio_b, corrected = behaviour
            real = mask.bool()
            stats.update(is_ratio_sum=float(ratio_b[real].sum()),
                         is_ratio_max=float(ratio_b[real].max()) if real.any() else 0.0,
                         is_corrected=float(corrected[real].sum()))
    return loss, stats
