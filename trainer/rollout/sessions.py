"""Sessions: what the episode loop (rollout/loop.py) asks of whatever samples its turns.

A generator opens a session for a batch of episodes (`start`): `settings.n` episodes of each
prompt. The loop asks the session for finished assistant turns (`turns()`), and answers each
with `extend` (the env's reply, as messages and as tokens) or `finish`. The loop alone records
each episode's tokens (`Batch.tokens`); a session reads them there.

Token generators return, for each turn, the sampled ids with the log-probability of each token
under the sampling policy (after temperature and top-p). The loss compares those log-probabilities
with the trainer's own (`tis_cap`, `sampler_kl`), so a generator whose numerics differ from the
trainer's (another precision, another engine) is corrected rather than trusted. Message generators
(an endpoint, a text policy) get the env's messages and give text.

Most sessions ask for the turns of every waiting row at once: they derive from `BatchSession` and
write `first()` (the batch's first turns) and `next(rows)` (the next turns of those rows). A
generator that only samples (`sample`, no `start`) gets `TurnByTurn`. This module does not import
torch: `rlvr eval --endpoint` runs without it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any, Protocol

from rlvr.trainer.rollout.groups import prompt_seed


@dataclass(frozen=True)
class SamplingSettings:
    """How to sample: `n` completions per prompt of at most `max_new_tokens` tokens, each stopped by
    any of `stop_token_ids` (kept as its last token) or by one of the `stop` strings (kept at the end
    of the text)."""

    n: int = 1
    max_new_tokens: int = 256
    temperature: float = 1.0
    top_p: float = 1.0
    greedy: bool = False
    stop_token_ids: tuple[int, ...] = ()
    stop: tuple[str, ...] = ()


@dataclass
class Sampled:
    """Completions of one prompt: token ids (EOS included when emitted), whether each hit the limit,
    and the log-probability the sampler gave each token (under temperature and top-p)."""

    prompt_ids: list[int]
    completion_ids: list[list[int]]
    truncated: list[bool]
    logprobs: list[list[float]]


@dataclass
class Batch:
    """The episodes a session runs: `settings.n` of each prompt, row r playing episode r % n of prompt r // n.

    `prompts` are token ids (token generators) or first messages (message generators). `envs[r]` is
    row r's env. `ends_turn(r, ids)` says whether a turn's ids just reached a stop: closed a tool call (the env
    parser's test) or wrote one of the env's stop strings. `budget` bounds each row's tokens after the prompt (None: no bound). `tokens[r]`:
    row r's ids after its prompt so far (sampled and env tokens), the loop's own record of the episode.
    """

    prompts: list
    seeds: list[int]
    envs: list
    multiturn: bool
    ends_turn: Callable[[int, list[int]], bool] | None = None
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


class Session(Protocol):
    """What the loop asks of a generator for a batch."""

    def turns(self) -> list[Turn]:
        """Finished turns of some live rows: at least one while any row waits for one."""

    def extend(self, row: int, messages: list[dict], reply_ids: list[int] | None) -> None:
        """The env's answer to row's last turn: the whole conversation, and the reply's tokens (token
        generators; None for message generators). The row then waits for its next turn."""

    def finish(self, row: int) -> None:
        """Row's episode is over."""

    def close(self) -> None:
        """The batch is over: free what the session holds."""


class Generator(Protocol):
    """A token generator: `sample` (and optionally `start`, its own session); `sync_weights(model)` is
    called after every optimizer step (a generator holding its own copy of the weights takes the new ones)."""

    def sample(self, prompt_ids: list[list[int]], settings: SamplingSettings, seeds: list[int]) -> list[Sampled]:
        """`settings.n` completions of each prompt; prompt i draws from `seeds[i]` alone, so its
        completions do not depend on which other prompts share the call."""

    def sync_weights(self, model) -> None:
        """Take the trainer's current weights (after an optimizer step)."""


class BatchSession:
    """A session that asks for the turns of every waiting row at once: `first()` for the batch's first
    turns, then `next(rows)` for the rows the loop extended since."""

    def __init__(self, batch: Batch, settings: SamplingSettings):
        self.batch, self.settings, self.n = batch, settings, settings.n
        self.waiting: list[int] | None = None  # rows that need a turn; None before the first

    def first(self) -> list[Turn]:
        """The first turn of every row (each subclass writes it)."""
        raise NotImplementedError

    def next(self, rows: list[int]) -> list[Turn]:
        """The next turn of each of `rows`, the rows the loop extended (each subclass writes it)."""
        raise NotImplementedError

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


def start(generator: Any, batch: Batch, settings: SamplingSettings) -> Session:
    """The generator's own session for `batch`, or a turn-by-turn one over its `sample`."""
    own = getattr(generator, "start", None)
    session = own(batch, settings) if own is not None else None
    return session if session is not None else TurnByTurn(generator, batch, settings)


class TurnByTurn(BatchSession):
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
        """Count the rows' turns, and end each turn where its ids first reach a stop (`Batch.ends_turn`): what a stop string
        would have done, for a generator without them (the tokens after it are dropped, the ones kept are the
        ones sampled)."""
        ends_turn = self.batch.ends_turn
        for t in turns:
            self.turn[t.row] += 1
            cut = next((k for k in range(1, len(t.ids)) if ends_turn and ends_turn(t.row, t.ids[:k])), None)
            if cut is not None:
                t.ids, t.logps, t.truncated = t.ids[:cut], t.logps[:cut], False
        return turns
