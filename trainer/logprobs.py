"""Log-probabilities of completion tokens, without ever building the full logits tensor.

A (sequences x length x vocabulary) logits tensor is the largest object in a naive GRPO
step: 32 completions of 100 tokens over SmolLM2's 49152-token vocabulary is 630 MB in
fp32, and autograd keeps a second copy for the softmax. Here a group's completions are
packed behind one copy of their prompt (no padding, the prompt encoded once), the hidden
states of the real completion tokens are gathered, and the output projection + log-softmax
run over chunks of `chunk_tokens` rows, recomputed in backward: only one chunk's logits
exist at a time, forward or backward.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F


def _logits(hidden, weight, bias, temperature: float) -> torch.Tensor:
    logits = F.linear(hidden, weight, bias).float()
    return logits / temperature if temperature != 1.0 else logits


class _ProjectedLogprob(torch.autograd.Function):
    """log p(target | hidden) through the output projection, for one chunk of rows.

    With `keep`, the chunk's softmax is kept for backward, which saves a second projection (0.12 s
    of a SmolLM2 G=4 group's 1.6 s forward + backward) when the caller knows the batch's softmax
    fits its memory budget. Without it nothing vocabulary-wide is kept: the logits are recomputed in
    backward (under the forward's autocast state). Both ways compute the softmax by one formula
    (`_softmax`), so they give the same gradient to the bit. The weight's gradient is added in place into `weight.grad`
    rather than returned: a returned one is a fresh vocabulary x hidden matrix, and with tied
    embeddings autograd holds it until the embedding's gradient arrives at the end of the pass.
    The weight is held by reference, not saved for backward, so it must not change in between
    (the trainer steps the optimizer only after every backward of the batch).
    """

    @staticmethod
    def forward(ctx, hidden, weight, bias, targets, temperature, with_entropy, keep=False):
        logits = _logits(hidden, weight, bias, temperature)
        lse = logits.logsumexp(-1, keepdim=True)
        logp = (logits.gather(-1, targets.unsqueeze(-1)) - lse).squeeze(-1)
        entropy = probs = None
        if with_entropy or keep:
            probs = _softmax(logits, lse)
        if with_entropy:
            entropy = lse.squeeze(-1) - (probs * logits).sum(-1)
            ctx.mark_non_differentiable(entropy)
        ctx.probs = probs if keep else None
        ctx.save_for_backward(hidden, targets)
        ctx.weight, ctx.bias, ctx.temperature = weight, bias, temperature
        kind = hidden.device.type
        ctx.autocast = (torch.is_autocast_enabled(kind), torch.get_autocast_dtype(kind), kind)
        return logp, entropy

    @staticmethod
    def backward(ctx, grad_logp, _grad_entropy):
        hidden, targets = ctx.saved_tensors
        weight, bias, temperature = ctx.weight, ctx.bias, ctx.temperature
        probs, ctx.probs = ctx.probs, None
        if probs is None:
            enabled, dtype, kind = ctx.autocast
            with torch.autocast(kind, dtype=dtype, enabled=enabled):
                logits = _logits(hidden, weight, bias, temperature)
            probs = _softmax(logits, logits.logsumexp(-1, keepdim=True), out=logits)
        # d logp_i / d logits_ij = [j == t_i] - softmax_ij, then 1 / temperature through the scaling
        grad = probs.mul_(-grad_logp.unsqueeze(-1))
        grad.scatter_add_(-1, targets.unsqueeze(-1), grad_logp.unsqueeze(-1))
        if temperature != 1.0:
            grad.div_(temperature)
        grad_hidden = grad.to(weight.dtype) @ weight if ctx.needs_input_grad[0] else None
        grad_weight = _accumulate(weight, grad.t().to(hidden.dtype), hidden)
        grad_bias = None if bias is None else _accumulate(bias, grad.sum(0).to(bias.dtype))
        return grad_hidden, grad_weight, grad_bias, None, None, None, None


def _softmax(logits, lse, out=None) -> torch.Tensor:
    """exp(logits - lse), into `out` if given: one formula for forward and backward, so kept and recomputed agree."""
    return torch.sub(logits, lse, out=out).exp_()


def _accumulate(param, grad, hidden=None):
    """Add `grad` (or grad @ hidden) into a leaf's `.grad` in place; return it for anything else."""
    if not param.requires_grad:
        return None
    if not param.is_leaf:
        return grad if hidden is None else grad @ hidden
    if param.grad is None:
        param.grad = grad.to(param.dtype) if hidden is None else (grad @ hidden).to(param.dtype)
    elif hidden is None:
        param.grad.add_(grad)
    else:
        param.grad.addmm_(grad.to(param.dtype), hidden.to(param.dtype))
    return None


KEEP_SOFTMAX_BYTES = 128 * 2**20  # below this, a call keeps its softmax for backward instead of recomputing it


def token_logprobs(hidden: torch.Tensor, head: torch.nn.Module, targets: torch.Tensor, temperature: float = 1.0,
                   chunk_tokens: int = 256, with_entropy: bool = False):
    """log p(targets[i] | hidden[i]) for rows of `hidden` (N x H), computed `chunk_tokens` rows at a time.

    When all N rows' fp32 softmax fits in `KEEP_SOFTMAX_BYTES` and a gradient is wanted, it is kept
    for backward (short completions); otherwise each chunk's logits are recomputed there.

    Returns (logp, entropy) of shape (N,); entropy is None unless asked for (it carries no gradient).
    Under autograd the head's weight gradient goes straight into `head.weight.grad` (see
    `_ProjectedLogprob`), so gradient hooks on that weight do not see it.
    """
    weight, bias = head.weight, getattr(head, "bias", None)
    wanted = torch.is_grad_enabled() and (hidden.requires_grad or weight.requires_grad)
    keep = wanted and hidden.shape[0] * weight.shape[0] * 4 <= KEEP_SOFTMAX_BYTES
    logps, entropies = [], []
    for start in range(0, hidden.shape[0], chunk_tokens):
        h, t = hidden[start:start + chunk_tokens], targets[start:start + chunk_tokens]
        lp, ent = _ProjectedLogprob.apply(h, weight, bias, t, temperature, with_entropy, keep)
        logps.append(lp)
        entropies.append(ent)
    logp = torch.cat(logps) if logps else hidden.new_zeros(0)
    entropy = torch.cat(entropies) if with_entropy and entropies else None
    return logp, entropy


def _embed(model, ids: torch.Tensor, sparse: bool = True) -> torch.Tensor:
    """Input embeddings of `ids` whose gradient is sparse (only the rows of the tokens used).

    A dense embedding gradient is a whole vocabulary x hidden matrix (113 MB for SmolLM2), built
    and then added into `.grad`, for the few dozen rows a group uses. The module's own forward
    still runs (some models scale embeddings).
    """
    embedding = model.get_input_embeddings()
    if not sparse or not isinstance(embedding, torch.nn.Embedding) or embedding.sparse:
        return embedding(ids)
    embedding.sparse = True
    try:
        return embedding(ids)
    finally:
        embedding.sparse = False


def densify_gradients(params) -> None:
    """The sparse gradients `_embed` leaves, made dense (once per step) for clipping and AdamW."""
    for p in params:
        if p.grad is not None and p.grad.is_sparse:
            p.grad = p.grad.to_dense()


def _pack(prompt_len: int, lengths: list[int], row_tokens: int) -> list[list[int]]:
    """Completions (by index) placed in rows of at most `row_tokens` tokens, each row led by the prompt.

    A row feeds the prompt and then each of its completions but the last token (nothing is
    predicted after it). A completion longer than the budget gets a row of its own.
    """
    rows, used = [], 0
    for i, n in enumerate(lengths):
        if n == 0:
            continue
        if not rows or used + n - 1 > row_tokens:
            rows.append([])
            used = prompt_len
        rows[-1].append(i)
        used += n - 1
    return rows


def group_logprobs(model, prompt_ids: torch.Tensor, completion_ids: torch.Tensor, mask: torch.Tensor,
                   temperature: float = 1.0, chunk_tokens: int = 256, with_entropy: bool = False,
                   row_tokens: int = 1024, sparse_embedding: bool = True):
    """Per-token log-probs (G x Lc, 0 after each row's last real token) of G right-padded completions of one prompt.

    `mask` is nonzero on real tokens; a row's completion runs to its last nonzero entry (a multi-turn
    episode's env tokens inside it have mask 0: context whose log-probs the loss leaves out, so they
    are not 0 in the result). The completions are packed behind one copy of the
    prompt in rows of up to `row_tokens` tokens, with a 4-D attention mask that lets each
    completion see the prompt and its own earlier tokens only, and positions that restart
    after the prompt. So padding is never computed, the prompt is encoded once per row, and
    the whole group is one decoder call: every weight is used once in the autograd graph, so
    its gradient goes straight into `.grad` instead of waiting in a buffer for a second use.
    Returns (logp, entropy), entropy None unless asked for. `sparse_embedding=False` keeps the
    embedding's gradient dense (FSDP cannot reduce-scatter a sparse one).
    """
    attention = getattr(model.config, "_attn_implementation", "eager")
    if attention not in ("sdpa", "eager"):
        raise ValueError(f"packed completions need sdpa or eager attention, not {attention!r}")
    device = completion_ids.device
    groups, length = completion_ids.shape
    prompt = prompt_ids.tolist()
    prompt_len = len(prompt)
    lengths = ((mask != 0) * torch.arange(1, length + 1, device=mask.device)).amax(-1).tolist()
    completions = completion_ids.tolist()
    rows = _pack(prompt_len, lengths, row_tokens)
    full = torch.zeros((groups, length), dtype=torch.float32, device=device)
    if not rows:
        return full, (full.clone() if with_entropy else None)
    tokens, segments, positions, picks, targets = [], [], [], [], []
    for r, members in enumerate(rows):
        ids, seg, pos = list(prompt), [0] * prompt_len, list(range(prompt_len))
        for i in members:
            n = lengths[i]
            starts = len(ids)
            ids += completions[i][:n - 1]
            seg += [i + 1] * (n - 1)
            pos += range(prompt_len, prompt_len + n - 1)
            picks.append((r, [prompt_len - 1, *range(starts, starts + n - 1)]))
            targets += completions[i][:n]
        tokens.append(ids)
        segments.append(seg)
        positions.append(pos)
    width = max(map(len, tokens))

    def padded(lists, value):  # rows right-padded to the widest; padding is segment -1, seen by no completion
        return torch.tensor([x + [value] * (width - len(x)) for x in lists], device=device)

    ids, seg, pos = padded(tokens, 0), padded(segments, -1), padded(positions, 0)
    causal = torch.ones((width, width), dtype=torch.bool, device=device).tril()
    same = (seg.unsqueeze(2) == seg.unsqueeze(1)) | (seg == 0).unsqueeze(1)
    allowed = (causal & same).unsqueeze(1)
    if attention == "eager":  # eager attention adds the mask to the scores
        dtype = next(model.parameters()).dtype
        allowed = torch.zeros(allowed.shape, dtype=dtype, device=device).masked_fill(~allowed, torch.finfo(dtype).min)
    hidden = model.get_decoder()(inputs_embeds=_embed(model, ids, sparse_embedding), attention_mask=allowed, position_ids=pos,
                                 use_cache=False).last_hidden_state
    flat = torch.tensor([r * width + j for r, js in picks for j in js], device=device)
    target = torch.tensor(targets, device=device)
    head = model.get_output_embeddings()
    logp, entropy = token_logprobs(hidden.reshape(-1, hidden.shape[-1])[flat], head, target, temperature,
                                   chunk_tokens, with_entropy)
    sel = torch.arange(length, device=device) < torch.tensor(lengths, device=device).unsqueeze(1)
    full = full.masked_scatter(sel, logp)
    if entropy is not None:
        entropy = torch.zeros_like(full).masked_scatter(sel, entropy)
    return full, entropy
