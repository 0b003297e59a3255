"""The one episode loop: G episodes per prompt, for training, `rlvr eval` and `rlvr eval --endpoint`.

The loop resets the envs, renders each prompt's chat with the env's tools, and opens a session
of a generator (rollout/sessions.py) for the batch. It then asks the session for finished
assistant turns and answers each:

- single-turn envs: every turn is a completion; the batch is scored at the end through the env
  API (`envs.score`, batched where the env allows);
- multi-turn envs (`max_turns > 1`): the turn's text goes to `env.step`; the episode ends when the
  env says so (terminated or truncated), when it has used `budget` tokens after the prompt (then
  it is cut, with return 0), or after `MAX_TURNS` turns; otherwise the env's reply is appended
  and the session continues the row.

Token generators (a `tokenizer` is given) are token-exact: the trained sequence of an episode is
every token after the prompt, the ids the generator sampled (weight 1, decoded for the env, never
re-encoded) and the env's reply appended as tokens (weight 0: context only), exactly as the chat
template renders it after the turn (`chat.env_tokens`). Message generators (an endpoint, a
text policy) get the env's messages and give text. A turn the generator failed (an outage) ends
its episode as `error`: an infrastructure failure, never a wrong answer.

An episode's return is its final reward (`episode_return: final`) or the sum of its turn rewards
(`sum`); `info["step_rewards"]` holds each turn's reward at the end of that turn (token mode), which
`advantage: process` turns into per-token advantages. This module does not import torch.
"""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from typing import Any

from rlvr.trainer.rollout.chat import env_tokens, eos_ids, render
from rlvr.trainer.rollout.envs import (
    bind_tokenizer,
    call_ended,
    end_marker,
    is_multiturn,
    score,
    stop_strings,
)
from rlvr.trainer.rollout.groups import Group, prompt_seed
from rlvr.trainer.rollout.local import LocalGenerator
from rlvr.trainer.rollout.sessions import Batch, SamplingSettings, Turn, start

MAX_TURNS = 32  # a safety bound on envs that never end an episode


@dataclass
class _Episode:
    env: Any
    tokens: list[int] = field(default_factory=list)
    weights: list[int] = field(default_factory=list)
    logps: list[float] = field(default_factory=list)
    replies: list[str] = field(default_factory=list)  # each assistant turn's text
    turn_ends: list[int] = field(default_factory=list)  # index of each stepped turn's last sampled token
    turn_rewards: list[float] = field(default_factory=list)
    info: dict = field(default_factory=dict)
    truncated: bool = False  # the last turn hit the token limit
    cut: bool = False  # stopped by the token budget
    error: str | None = None

    def add(self, ids: list[int], logps: list[float], weight: int) -> None:
        self.tokens += ids
        self.weights += [weight] * len(ids)
        self.logps += logps


def _take(ep: _Episode, turn: Turn, tokenizer, eos: tuple, budget: int | None, multiturn: bool):
    """Record the turn; for multi-turn envs, step the env. Returns the env's answer to continue the episode
    with (its conversation, and its reply as tokens for a token generator), or None when the episode is over."""
    if turn.error is not None:
        task = getattr(ep.env.unwrapped, "task", None)
        ep.error = turn.error
        ep.info = {"correct": False, "task_id": getattr(task, "task_id", None), "error": turn.error,
                   "score": {"value": 0.0, "reason": "error", "info": {"error": turn.error}}}
        return None
    text = turn.text
    if tokenizer is not None:
        text = tokenizer.decode(turn.ids, skip_special_tokens=True)
        ep.add(turn.ids, turn.logps, 1)
    elif turn.logps:  # a message generator's tokens: their log-probs only, where it gives them
        ep.logps += turn.logps
    ep.replies.append(text)
    ep.truncated = turn.truncated
    if not multiturn or (budget is not None and len(ep.tokens) >= budget):
        ep.cut = multiturn
        return None
    messages, reward, terminated, truncated, info = ep.env.step(text)
    ep.turn_ends.append(len(ep.tokens) - 1)
    ep.turn_rewards.append(float(reward))
    ep.info = dict(info)
    if terminated or truncated or len(ep.replies) >= MAX_TURNS:
        return None
    if tokenizer is None:
        return messages, None
    reply = env_tokens(tokenizer, messages, ep.env, sampled_eos=turn.ids[-1] in eos)
    if budget is not None and len(ep.tokens) + len(reply) >= budget:
        ep.cut = True
        return None
    ep.add(reply, [0.0] * len(reply), 0)
    return messages, reply


def _outcome(tokenizer, ep: _Episode, episode_return: str) -> tuple[float, dict]:
    info = dict(ep.info)
    if ep.cut:  # the token budget ran out before the env ended the episode
        info.update(correct=False, ended_by="token_budget", truncated=True)
    mid_turn = ep.cut and ep.weights[-1:] == [1] and ep.turn_ends[-1:] != [len(ep.tokens) - 1]
    info.update(turns=len(ep.turn_ends) + mid_turn, turn_rewards=list(ep.turn_rewards), replies=list(ep.replies))
    info.setdefault("tool_calls", 0)
    if tokenizer is not None:
        info["step_rewards"] = [
            [len(tokenizer.decode(ep.tokens[:end + 1], skip_special_tokens=True)), r]
            for end, r in zip(ep.turn_ends, ep.turn_rewards)]
    if ep.error is not None:  # an infrastructure failure: no reward, whatever the turns before it earned
        return 0.0, info
    final = 0.0 if ep.cut else float(ep.info.get("final_reward", ep.turn_rewards[-1] if ep.turn_rewards else 0.0))
    return (sum(ep.turn_rewards) if episode_return == "sum" else final), info


def rollout(generator, envs: list, resets: list[dict], seeds: list[int], settings: SamplingSettings, *,
            indices: list[int] | None = None, tokenizer=None, budget: int | None = None,
            episode_return: str = "final", threads: int = 8) -> list[Group]:
    """`settings.n` episodes of each prompt; prompt p is `env.reset(**resets[p])`, sampled from `seeds[p]`.

    `envs` holds one env per prompt (single-turn) or `settings.n` consecutive ones per prompt
    (multi-turn). `tokenizer`: the generator's, for a token generator; None for a message generator.
    `indices` label the groups (default 0, 1, ...). Returns one Group per prompt.
    """
    n, prompts = settings.n, len(resets)
    multiturn = bool(envs) and is_multiturn(envs[0])
    per = n if multiturn else 1  # envs per prompt: multi-turn episodes each have their own
    if len(envs) < prompts * per:
        raise ValueError(f"{prompts} prompts{f' x {n} episodes' if multiturn else ''} need {prompts * per} envs, "
                         f"got {len(envs)}")
    envs = envs[:prompts * per]
    firsts = [env.reset(**resets[k // per])[0] for k, env in enumerate(envs)][::per]
    per_prompt, rows = envs[::per], envs if multiturn else [env for env in envs for _ in range(n)]
    own = stop_strings(envs[0])
    stops = [*settings.stop, *([end_marker(envs[0])] if multiturn else []), *own]
    settings = replace(settings, stop=tuple(dict.fromkeys(stops)))
    if tokenizer is not None:
        bind_tokenizer(envs, tokenizer)
        firsts = [tokenizer(render(tokenizer, chat, env), add_special_tokens=False)["input_ids"]
                  for chat, env in zip(firsts, per_prompt)]
    ends_turn = _turn_test(tokenizer, rows, multiturn, own) if tokenizer is not None else None
    episodes = [_Episode(env) for env in rows]
    batch = Batch(firsts, list(seeds), rows, multiturn, ends_turn, budget if multiturn else None,
                  [ep.tokens for ep in episodes])
    session = start(generator, batch, settings)
    pool = ThreadPoolExecutor(max_workers=max(1, min(threads, len(rows))))
    env_s = 0.0  # seconds in the envs' steps (tools, multi-turn scoring), the sampler waiting
    try:
        live = len(rows)
        while live:
            turns = session.turns()
            if not turns:
                raise RuntimeError(f"the generator gave no turn while {live} episodes wait for one")
            t0 = time.perf_counter()
            answers = list(pool.map(lambda t: _take(episodes[t.row], t, tokenizer, settings.stop_token_ids, budget,
                                                    multiturn), turns))
            env_s += time.perf_counter() - t0
            for t, answer in zip(turns, answers):
                if answer is None:
                    session.finish(t.row)
                    live -= 1
                else:
                    session.extend(t.row, *answer)
    finally:
        session.close()
        pool.shutdown()
    return _groups(episodes, per_prompt, firsts, indices or list(range(prompts)), n, tokenizer, multiturn,
                   episode_return, env_s)


def _turn_test(tokenizer, rows: list, multiturn: bool, stop: tuple[str, ...]):
    """`ends_turn(row, ids)`, or None when nothing but the limits ends a turn: the turn's last tokens
    write one of the env's `stop` strings, or (multi-turn) the row's env parser says its ids close a
    call. Only the tail is decoded each token; a whole turn only when it ends like a call."""
    if not multiturn and not stop:
        return None
    markers = [end_marker(env) for env in rows] if multiturn else []
    tests = [call_ended(env) for env in rows] if multiturn else []
    span = max(map(len, stop), default=0) + 2  # tokens enough to hold a stop string (each is at least a char)

    def ends_turn(row: int, ids: list[int]) -> bool:
        if stop:
            tail = tokenizer.decode(ids[-span:], skip_special_tokens=False)
            if any(s in tail for s in stop):
                return True
        if not multiturn:
            return False
        tail = tokenizer.decode(ids[-8:], skip_special_tokens=False).rstrip()
        return tail.endswith(markers[row]) and tests[row](tokenizer.decode(ids, skip_special_tokens=False))

    return ends_turn


def _groups(episodes, per_prompt, prompts, indices, n, tokenizer, multiturn, episode_return,
            env_s: float) -> list[Group]:
    """One Group per prompt: multi-turn episodes have their outcome from the env's steps, single-turn
    completions are scored in one batch (an `error` turn keeps its error info and 0). `env_s`: the
    seconds spent in the envs so far, shared evenly between the groups with the scoring's."""
    groups = [episodes[p * n:(p + 1) * n] for p in range(len(prompts))]
    if multiturn:
        outcomes = [[_outcome(tokenizer, ep, episode_return) for ep in eps] for eps in groups]
        texts = [[tokenizer.decode(ep.tokens, skip_special_tokens=False) if tokenizer is not None
                  else "\n\n".join(ep.replies) for ep in eps] for eps in groups]
    else:
        texts = [[ep.replies[0] if ep.replies else "" for ep in eps] for eps in groups]
        t0 = time.perf_counter()
        scores = score(per_prompt, texts)
        env_s += time.perf_counter() - t0
        outcomes = [[(float(r), info) if ep.error is None else (0.0, ep.info) for (r, info), ep in zip(scored, eps)]
                    for scored, eps in zip(scores, groups)]
    weighted = multiturn and tokenizer is not None
    return [Group(index, prompt if tokenizer is not None else [], [ep.tokens for ep in eps],
                  [ep.cut if multiturn else ep.truncated for ep in eps], text, [r for r, _ in out], [i for _, i in out],
                  [ep.logps for ep in eps], weights=[ep.weights for ep in eps] if weighted else None,
                  env_s=env_s / len(groups))
            for index, prompt, eps, text, out in zip(indices, prompts, groups, texts, outcomes)]


def local_rollout(model, tokenizer, envs: list, indices: list[int], *, seed: int, group_size: int,
                  max_new_tokens: int, temperature: float = 1.0, top_p: float = 1.0, greedy: bool = False,
                  draws: list[int] | None = None, budget: int | None = None, episode_return: str = "final",
                  generator=None) -> list[Group]:
    """`rollout` of the trainer's prompts: prompt i is env seed `seed + i`, sampled from `prompt_seed(seed, i,
    draw)` by `generator` (default: the local sampler on `model`)."""
    settings = SamplingSettings(n=group_size, max_new_tokens=max_new_tokens, temperature=temperature, top_p=top_p,
                                greedy=greedy, stop_token_ids=tuple(eos_ids(tokenizer, model)))
    return rollout(generator or LocalGenerator(model, tokenizer.pad_token_id), envs,
                   [{"seed": seed + i} for i in indices],
                   [prompt_seed(seed, i, d) for i, d in zip(indices, draws or [0] * len(indices))], settings,
                   indices=indices, tokenizer=tokenizer, budget=budget, episode_return=episode_return)
