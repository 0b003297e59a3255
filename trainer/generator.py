"""The generator interface: what the episode loop (trainer/rollout.py) asks of whatever samples its turns.

A generator takes token ids (one list per prompt), the sampling settings and one seed per prompt,
and returns, for each prompt, `settings.n` completions as token ids with the log-probability of
each sampled token under the sampling policy (after temperature and top-p): the
`generation.Sampled` the local sampler has always returned. The loss compares those
log-probabilities with the trainer's own (`tis_cap`, `sampler_kl`), so a generator whose numerics
differ from the trainer's (another precision, another engine) is corrected rather than trusted.

The loop runs whole episodes through a session: `start(batch, settings)` opens one for the G
episodes of each prompt; `turns()` gives finished assistant turns, and the loop answers each with
`extend` (the env's reply, as messages and as tokens) or `finish`. The loop alone records each
episode's tokens (`Batch.tokens`); a session reads them there. A generator without `start` (or whose
`start` returns None) gets `TurnByTurn`: each turn re-submits the episode's ids to `sample`.

`sync_weights(model)` is called after every optimizer step: a generator that holds its own copy
of the weights (vLLM) takes the new ones; one that samples with the trainer's model does nothing.

Implementations: `LocalGenerator` here (the KV-cache sampler of trainer/generation.py, seeded per
prompt exactly as before, with a KV cache carried across turns), `VLLMGenerator` in
trainer/vllm_generator.py, and the message generators of `rlvr eval` (rlvr/evaluate.py,
rlvr/endpoint.py). This module does not import torch: `rlvr eval --endpoint` runs without it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Protocol

from rlvr.trainer.groups import prompt_seed

if TYPE_CHECKING:
    from rlvr.trainer.generation import Sampled


@dataclass(frozen=True)
class SamplingSettings:
    """How to sample: `n` completions per prompt of at most `max_new_tokens` tokens, each stopped by
    any of `stop_token_ids` (kept as its last token) or, for a generator that supports them, by
    one of the `stop` strings (kept at the end of the text)."""

    n: int = 1
    max_new_tokens: int = 256
    temperature: float = 1.0
    top_p: float = 1.0
    greedy: bool = False
    stop_token_ids: tuple[int, ...] = ()
    stop: tuple[str, ...] = ()


@dataclass
class Batch:
    """The episodes a session runs: `settings.n` of each prompt, row r playing episode r % n of prompt r // n.

    `prompts` are token ids (token generators) or first messages (message generators). `envs[r]` is
    row r's env. `ends_call(r, ids)` says whether a turn's ids just closed a tool call (the env
    parser's test). `budget` bounds each row's tokens after the prompt (None: no bound). `tokens[r]`:
    row r's ids after its prompt so far (sampled and env tokens), the loop's own record of the episode.
    """

    prompts: list
    seeds: list[int]
    envs: list
    multiturn: bool
    ends_call: Callable[[int, list[int]], bool] | None = None
    budget: int | None = None
    tokens: list[list[int]] = field(default_factory=list)


@dataclass
class Turn:
    """One finished assistant turn of row `row`: its ids and their log-probs (token generators), or its
    text (message generators); `truncated` when it hit the token limit; `error` when the generator failed
    (an infrastructure failure: the episode ends as `error`, not as a wrong answer)."""

    row: int
    ids: list[int] | None = None
    logps: list[float] | None = None
    text: str = ""
    truncated: bool = False
    error: str | None = None


class Session:
    """What the loop asks of a generator for a batch: `turns()` gives finished turns of some live rows (at
    least one while any row waits), `extend(row, messages, reply_ids)` hands it the env's answer to row's last
    turn (the whole conversation, and the reply's tokens for token generators), `finish(row)` ends row's
    episode. This base asks for the turns of every waiting row at once: `first()`, then `next(rows)`."""

    def __init__(self, batch: Batch, settings: SamplingSettings):
        self.batch, self.settings, self.n = batch, settings, settings.n
        self.waiting: list[int] | None = None  # rows that need a turn; None before the first

    def turns(self) -> list[Turn]:
        if self.waiting is None:
            self.waiting = []
            return self.first()
        rows, self.waiting = self.waiting, []
        return self.next(rows)

    def extend(self, row: int, messages: list[dict], reply_ids: list[int] | None) -> None:
        self.waiting.append(row)

    def finish(self, row: int) -> None:
        pass

    def close(self) -> None:
        pass


class Generator(Protocol):
    def sample(self, prompt_ids: list[list[int]], settings: SamplingSettings, seeds: list[int]) -> list[Sampled]:
        """`settings.n` completions of each prompt; prompt i draws from `seeds[i]` alone, so its
        completions do not depend on which other prompts share the call."""

    def sync_weights(self, model) -> None:
        """Take the trainer's current weights (after an optimizer step)."""


def start(generator: Any, batch: Batch, settings: SamplingSettings) -> Session:
    """The generator's own session for `batch`, or a turn-by-turn one over its `sample`."""
    own = getattr(generator, "start", None)
    session = own(batch, settings) if own is not None else None
    return session if session is not None else TurnByTurn(generator, batch, settings)


class TurnByTurn(Session):
    """A session for a generator that only samples: the first turns of a prompt's n episodes are one
    `sample` call (n completions, the prompt's seed), each later turn re-submits the episode's whole ids
    as the loop recorded them (`batch.tokens`; prefix caching makes that cheap in vLLM) with the seed
    `groups.prompt_seed(prompt seed, episode, turn)`, a 32-bit hash of the three (turn >= 1). The ids
    re-submitted are the ids sampled and the env's tokens: nothing is re-tokenized."""

    def __init__(self, generator, batch: Batch, settings: SamplingSettings):
        super().__init__(batch, settings)
        self.generator = generator
        self.turn = [0] * (len(batch.prompts) * settings.n)  # each row's turns so far

    def _limit(self, used: int) -> int:
        """The turn's token limit, after `used` tokens of the episode."""
        budget = self.batch.budget
        return self.settings.max_new_tokens if budget is None else min(self.settings.max_new_tokens, budget - used)

    def first(self) -> list[Turn]:
        sampled = self.generator.sample(self.batch.prompts, replace(self.settings, max_new_tokens=self._limit(0)),
                                        self.batch.seeds)
        return self._took([Turn(p * self.n + j, ids, lps, truncated=cut) for p, s in enumerate(sampled)
                           for j, (ids, lps, cut) in enumerate(zip(s.completion_ids, s.logprobs, s.truncated))])

    def next(self, rows: list[int]) -> list[Turn]:
        out, by_limit, n, tokens = [], {}, self.n, self.batch.tokens
        for row in rows:
            by_limit.setdefault(self._limit(len(tokens[row])), []).append(row)
        for limit, group in sorted(by_limit.items()):
            sampled = self.generator.sample(
                [self.batch.prompts[r // n] + tokens[r] for r in group], replace(self.settings, n=1, max_new_tokens=limit),
                [prompt_seed(self.batch.seeds[r // n], r % n, self.turn[r]) for r in group])
            out += [Turn(r, s.completion_ids[0], s.logprobs[0], truncated=s.truncated[0]) for r, s in zip(group, sampled)]
        return self._took(out)

    def _took(self, turns: list[Turn]) -> list[Turn]:
        """Count the rows' turns, and end each turn where its ids first close a tool call: what a stop string
        would have done, for a generator without them (the tokens after it are dropped, the ones kept are the
        ones sampled)."""
        ends_call = self.batch.ends_call
        for t in turns:
            self.turn[t.row] += 1
            cut = next((k for k in range(1, len(t.ids)) if ends_call and ends_call(t.row, t.ids[:k])), None)
            if cut is not None:
                t.ids, t.logps, t.truncated = t.ids[:cut], t.logps[:cut], False
        return turns


class LocalGenerator:
    """The KV-cache sampler (trainer/generation.py) on the trainer's own model: nothing to sync.

    The loop's batches run in `generation.CarriedSession`, one KV cache carried across turns (a
    single-turn group is its first turn: what `sample` gives, as it always did). `sample` stops on token
    ids only (stop strings are ignored; `TurnByTurn` cuts a turn where the env parser says a call ended)."""

    def __init__(self, model, pad_token_id: int):
        self.model, self.pad_token_id = model, pad_token_id

    def sample(self, prompt_ids: list[list[int]], settings: SamplingSettings, seeds: list[int]) -> list[Sampled]:
        from rlvr.trainer.generation import sample

        return sample(self.model, prompt_ids, settings, seeds, self.pad_token_id)

    def start(self, batch: Batch, settings: SamplingSettings):
        from rlvr.trainer.generation import CarriedSession

        return CarriedSession(self.model, batch, settings, self.pad_token_id)

    def sync_weights(self, model) -> None:
        self.model = model
