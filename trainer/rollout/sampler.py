"""The local sampler: a KV cache on the trainer's own model, carried across the turns of an episode.

The prompts of a batch are left-padded and run through the model once; the cache is then
repeated G times, so G completions of a prompt share one prefill. Finished rows (EOS) are
dropped from the batch, so long completions do not keep paying for short ones; an env's reply is
run through the cache as one prefill of every row that got one (`kvcache.feed_rows`).

Randomness is per prompt: each prompt has its own `torch.Generator` (seeded by the
caller), and a token is drawn by inverting the cumulative distribution with one uniform
number per row. A prompt's completions therefore do not depend on which other prompts
share its batch, which is what makes a sharded (multi-process) run sample the same
completions as a single process, and a resumed run the same as an uninterrupted one.
"""

from __future__ import annotations

import torch

from rlvr.trainer.kvcache import cache_kwarg, feed_rows, returned_cache
from rlvr.trainer.rollout.sessions import Batch, Sampled, SamplingSettings, Turn


def pick_tokens(logits: torch.Tensor, uniforms: torch.Tensor, temperature: float, top_p: float):
    """One token per row from softmax(logits / T), restricted to the top-p nucleus, and its log-probability."""
    probs = torch.softmax(logits.float() / temperature, dim=-1)
    if top_p < 1.0:
        probs, order = probs.sort(dim=-1, descending=True)
        cum = probs.cumsum(-1)
        probs = probs.masked_fill(cum - probs > top_p, 0.0)  # keep the smallest prefix reaching top_p
    else:
        order = None
    cum = probs.cumsum(-1)
    target = uniforms.unsqueeze(-1) * cum[:, -1:]
    idx = torch.searchsorted(cum, target).clamp_(max=probs.shape[-1] - 1)
    logp = (probs.gather(-1, idx) / cum[:, -1:]).log().squeeze(-1)
    idx = idx.squeeze(-1)
    return (idx if order is None else order.gather(-1, idx.unsqueeze(-1)).squeeze(-1)), logp


def prefill_prompts(model, prompt_ids: list[list[int]], n: int, pad_token_id: int, device):
    """Encode each prompt once (left-padded) and repeat its cache `n` times: the KV cache, the
    next-token logits, the attention mask and the next position of every one of the n * P rows."""
    width = max(map(len, prompt_ids))
    ids = torch.full((len(prompt_ids), width), pad_token_id, dtype=torch.long)
    mask = torch.zeros((len(prompt_ids), width), dtype=torch.long)
    for i, p in enumerate(prompt_ids):
        ids[i, width - len(p):] = torch.tensor(p)
        mask[i, width - len(p):] = 1
    ids, mask = ids.to(device), mask.to(device)
    positions = (mask.cumsum(-1) - 1).clamp(min=0)
    out = model(input_ids=ids, attention_mask=mask, position_ids=positions, use_cache=True, logits_to_keep=1)
    cache = returned_cache(out)
    cache.batch_repeat_interleave(n)
    logits = out.logits[:, -1].repeat_interleave(n, dim=0)
    return cache, logits, mask.repeat_interleave(n, dim=0), positions[:, -1:].repeat_interleave(n, dim=0) + 1


@torch.no_grad()
def sample(model, prompt_ids: list[list[int]], settings: SamplingSettings, seeds: list[int] | None = None,
           pad_token_id: int = 0) -> list[Sampled]:
    """`settings.n` completions per prompt (token ids), stopping at any of `settings.stop_token_ids` or the
    limit: the first turn of every row of a `CarriedSession` (one decoding loop for single turns and whole
    episodes). Prompt i draws from a torch generator seeded `seeds[i]` (default: i)."""
    n = settings.n
    seeds = list(range(len(prompt_ids))) if seeds is None else list(seeds)
    batch = Batch(prompt_ids, seeds, [], False, tokens=[[] for _ in range(len(prompt_ids) * n)])
    session = CarriedSession(model, batch, settings, pad_token_id)
    turns = {}
    try:
        while len(turns) < len(prompt_ids) * n:
            for turn in session.turns():
                turns[turn.row] = turn
                session.finish(turn.row)
    finally:
        session.close()
    rows = [turns[r] for r in range(len(turns))]
    return [Sampled(list(prompt), [t.ids for t in rows[p * n:(p + 1) * n]], [t.truncated for t in rows[p * n:(p + 1) * n]],
                    [t.logps for t in rows[p * n:(p + 1) * n]]) for p, prompt in enumerate(prompt_ids)]


class CarriedSession:
    """Episodes with one KV cache carried across turns (a `sessions.Session`); `sample` is its first turn.

    Every live row takes one decoding step at a time. A turn ends at an end-of-turn id
    (`settings.stop_token_ids`), at `max_new_tokens`, at the row's token budget, or when its ids
    reach a stop (`batch.ends_turn`: a closed tool call, an env's stop string); it is then handed to
    the loop, which answers with the env's tokens (`extend`: run through the cache as one prefill of
    every row that got a reply, `kvcache.feed_rows`) or ends the row (`finish`: dropped from the
    batch). Nothing is encoded twice.
    The k-th token of an episode is drawn with the k-th uniform number of its prompt's generator (env
    tokens count), so sampling does not depend on how the env's tokens are fed.
    """

    def __init__(self, model, batch, settings, pad_token_id: int):
        if settings.n < 1 or settings.max_new_tokens < 1:
            raise ValueError("n and max_new_tokens must be at least 1")
        if not settings.greedy and (settings.temperature <= 0 or not 0 < settings.top_p <= 1):
            raise ValueError("sampling needs temperature > 0 and 0 < top_p <= 1")
        self.batch, self.settings, self.n = batch, settings, settings.n
        self.model, self.pad, self.was_training = model, pad_token_id, model.training
        model.eval()
        self.device = next(model.parameters()).device
        self.generators = [torch.Generator().manual_seed(s) for s in batch.seeds]
        with torch.no_grad():
            self.cache, self.logits, self.mask, self.next_pos = prefill_prompts(
                model, batch.prompts, self.n, pad_token_id, self.device)
        rows = len(batch.prompts) * self.n
        self.turn_ids: list[list[int]] = [[] for _ in range(rows)]  # each row's turn so far (the loop has the rest)
        self.turn_logps: list[list[float]] = [[] for _ in range(rows)]
        self.draws: list[list[torch.Tensor]] = [[] for _ in batch.prompts]  # each prompt's uniforms, n per draw
        self.active = torch.arange(rows)  # the original row of each row of the batch
        self.chosen = None  # the last tokens picked, not yet run through the model
        self.ended: set[int] = set()
        self.replies: dict[int, list[int]] = {}

    def _uniform(self, row: int) -> float:
        """The uniform number of the row's next token: its prompt's draw number k, the episode's length so far."""
        p, k = row // self.n, len(self.batch.tokens[row]) + len(self.turn_ids[row])
        while len(self.draws[p]) <= k:
            self.draws[p].append(torch.rand(self.n, generator=self.generators[p]))
        return float(self.draws[p][k][row % self.n])

    def _turn_over(self, row: int, token: int) -> bool:
        turn, budget = self.turn_ids[row], self.batch.budget
        if token in self.settings.stop_token_ids or len(turn) >= self.settings.max_new_tokens or (
                budget is not None and len(self.batch.tokens[row]) + len(turn) >= budget):
            return True
        return self.batch.ends_turn is not None and self.batch.ends_turn(row, turn)

    def _advance(self) -> None:
        """Drop the ended rows, run the picked tokens through the model, then the env replies as one prefill."""
        keep = [j for j, row in enumerate(self.active.tolist()) if row not in self.ended]
        if not keep:
            self.active = self.active[:0]
            return
        chosen = self.chosen
        if len(keep) < len(self.active):
            index = torch.tensor(keep, dtype=torch.long, device=self.device)
            self.cache.batch_select_indices(index)
            self.active, self.mask, self.next_pos, chosen = (
                self.active[index.cpu()], self.mask[index], self.next_pos[index], chosen[index])
        self.mask = torch.cat([self.mask, self.mask.new_ones((len(self.active), 1))], dim=1)
        out = self.model(input_ids=chosen.unsqueeze(-1), attention_mask=self.mask, position_ids=self.next_pos,
                         use_cache=True, **cache_kwarg(self.model, self.cache))
        self.logits = out.logits[:, -1]
        self.next_pos = self.next_pos + 1
        replying = [j for j, row in enumerate(self.active.tolist()) if row in self.replies]
        if replying:
            rows = self.active[replying].tolist()
            fed, self.mask, self.next_pos = feed_rows(self.model, self.cache, self.mask, self.next_pos, replying,
                                                      [self.replies.pop(row) for row in rows], self.pad)
            self.logits[replying] = fed

    @torch.no_grad()
    def turns(self) -> list[Turn]:
        settings = self.settings
        while True:
            if self.chosen is not None:
                self._advance()
            if not len(self.active):
                return []
            if settings.greedy:
                chosen = self.logits.argmax(-1)
                logp = torch.log_softmax(self.logits.float(), -1).gather(-1, chosen.unsqueeze(-1)).squeeze(-1)
            else:
                uniforms = torch.tensor([self._uniform(row) for row in self.active.tolist()], dtype=torch.float32)
                chosen, logp = pick_tokens(self.logits, uniforms.to(self.device), settings.temperature, settings.top_p)
            self.chosen = chosen
            ending = []
            for row, tok, lp in zip(self.active.tolist(), chosen.tolist(), logp.tolist()):
                self.turn_ids[row].append(tok)
                self.turn_logps[row].append(lp)
                if self._turn_over(row, tok):
                    ending.append(row)
            if ending:
                self.ended.update(ending)  # until the loop extends them
                return [self._turn(row) for row in ending]

    def _turn(self, row: int) -> Turn:
        ids = self.turn_ids[row]
        cut = len(ids) >= self.settings.max_new_tokens and ids[-1] not in self.settings.stop_token_ids
        return Turn(row, ids, self.turn_logps[row], truncated=cut)

    def extend(self, row: int, messages, reply_ids) -> None:
        self.ended.discard(row)
        self.replies[row] = list(reply_ids)
        self.turn_ids[row], self.turn_logps[row] = [], []

    def finish(self, row: int) -> None:
        self.ended.add(row)

    def close(self) -> None:
        self.model.train(self.was_training)
        self.cache = None
