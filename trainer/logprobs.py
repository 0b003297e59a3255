"""Log-probabilities of completion tokens, without ever building the full logits tensor.

A (sequences x length x vocabulary) logits tensor is the largest object in a naive GRPO
step: 32 completions of 100 tokens over SmolLM2's 49152-token vocabulary is 630 MB in
fp32, and autograd keeps a second copy for the softmax. Here the decoder runs once for the
prompt (its KV cache is then shared by the G completions of the group), the hidden states
of the real completion tokens are gathered (padding is never projected), and the output
projection + log-softmax run over chunks of `chunk_tokens` rows under activation
checkpointing: only one chunk's logits exist at a time, forward or backward.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch.utils.checkpoint import checkpoint

from rlvr.trainer.kvcache import cache_kwarg, returned_cache


def _chunk(hidden, weight, bias, targets, temperature: float, with_entropy: bool):
    logits = F.linear(hidden, weight, bias).float()
    if temperature != 1.0:
        logits = logits / temperature
    lse = torch.logsumexp(logits, dim=-1)
    logp = logits.gather(-1, targets.unsqueeze(-1)).squeeze(-1) - lse
    if not with_entropy:
        return logp, None
    with torch.no_grad():
        entropy = lse - (torch.softmax(logits, dim=-1) * logits).sum(-1)
    return logp, entropy


def token_logprobs(hidden: torch.Tensor, head: torch.nn.Module, targets: torch.Tensor, temperature: float = 1.0,
                   chunk_tokens: int = 256, with_entropy: bool = False):
    """log p(targets[i] | hidden[i]) for rows of `hidden` (N x H), computed `chunk_tokens` rows at a time.

    Returns (logp, entropy) of shape (N,); entropy is None unless asked for (it carries no gradient).
    """
    weight, bias = head.weight, getattr(head, "bias", None)
    logps, entropies = [], []
    for start in range(0, hidden.shape[0], chunk_tokens):
        h, t = hidden[start:start + chunk_tokens], targets[start:start + chunk_tokens]
        if torch.is_grad_enabled() and hidden.requires_grad:
            lp, ent = checkpoint(_chunk, h, weight, bias, t, temperature, with_entropy, use_reentrant=False)
        else:
            lp, ent = _chunk(h, weight, bias, t, temperature, with_entropy)
        logps.append(lp)
        entropies.append(ent)
    logp = torch.cat(logps) if logps else hidden.new_zeros(0)
    entropy = torch.cat(entropies) if with_entropy and entropies else None
    return logp, entropy


def group_logprobs(model, prompt_ids: torch.Tensor, completion_ids: torch.Tensor, mask: torch.Tensor,
                   temperature: float = 1.0, chunk_tokens: int = 256, with_entropy: bool = False):
    """Per-token log-probs (G x Lc, 0 at padding) of G right-padded completions of one prompt.

    The prompt (1-D ids, no padding) is encoded once; its KV cache is repeated for the G
    completions. Returns (logp, entropy), entropy None unless asked for.
    """
    decoder, head = model.get_decoder(), model.get_output_embeddings()
    groups, length = completion_ids.shape
    prompt_len = prompt_ids.shape[0]
    out = decoder(input_ids=prompt_ids.unsqueeze(0), use_cache=length > 1)
    last = out.last_hidden_state[:, -1:].expand(groups, 1, -1)
    if length > 1:
        cache = returned_cache(out)
        cache.batch_repeat_interleave(groups)
        positions = torch.arange(prompt_len, prompt_len + length - 1, device=prompt_ids.device)
        rest = decoder(input_ids=completion_ids[:, :-1], position_ids=positions.expand(groups, -1),
                       use_cache=False, **cache_kwarg(decoder, cache)).last_hidden_state
        hidden = torch.cat([last, rest], dim=1)
    else:
        hidden = last
    sel = mask.bool()
    logp, entropy = token_logprobs(hidden[sel], head, completion_ids[sel], temperature, chunk_tokens, with_entropy)
    full = hidden.new_zeros((groups, length), dtype=torch.float32).masked_scatter(sel, logp)
    if entropy is not None:
        entropy = full.new_zeros((groups, length)).masked_scatter(sel, entropy)
    return full, entropy
