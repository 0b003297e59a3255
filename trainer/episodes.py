"""Multi-turn rollouts: G whole episodes per prompt, with tools, as one rollout each.

An env is multi-turn when `env.unwrapped.max_turns > 1` (`MultiTurnEnv`, `ToolEnv`). Each
prompt gets G copies of its env, reset to the same task. The episodes are sampled together,
with one KV cache that is carried across turns:

- An assistant turn is sampled until an end-of-turn token (EOS), the end of a tool call
  (`</tool_call>`, or what the env's parser says in `call_ended`), or `max_new_tokens` tokens;
  its text goes to `env.step`.
- The env's reply (tool results, test feedback, a user message) is appended exactly as the chat
  template renders it after that turn: the template is applied to the conversation with the
  assistant turn replaced by a sentinel, and what follows the sentinel is the env's part
  (the end-of-turn token the model already sampled is not repeated). Those tokens are run
  through the cache as one prefill: a single forward pass over the replies of every episode
  that got one at that step (`kvcache.feed_rows`), while the others keep sampling. Nothing is
  encoded twice, and episodes of different lengths share every decoding step.
- Sampling does not depend on how the env's tokens are fed: the k-th token of an episode is
  drawn with the k-th uniform number of its prompt's generator (env tokens count), as when
  they took one decoding step each.
- The episode ends when the env says so (terminated or truncated) or when it has used
  `max_episode_tokens` tokens after the prompt (then it is truncated with return 0).

The trained sequence of an episode is every token after the prompt: the ids the policy sampled
(weight 1, never decoded and re-encoded) and the env's tokens (weight 0: context only, no loss
and no gradient). The episode's return is its final reward (`episode_return: final`) or the
sum of its turn rewards (`sum`); `info["step_rewards"]` holds each turn's reward at the end of
that turn, which `advantage: process` turns into per-token advantages (trainer/steps.py).

An episode whose score is `error` (a tool's sandbox or another service failed, not the model)
is dropped from its group before advantages (`drop_errors`): it is no training signal, and the
trainer counts it in the `errors` metric.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import torch

from rlvr.trainer.generation import _pick, eos_ids, prefill_prompts
from rlvr.trainer.groups import Group, make_envs, prompt_generator
from rlvr.trainer.kvcache import cache_kwarg, feed_rows

SENTINEL = "\u2063rlvr-turn\u2063"


def is_multiturn(env) -> bool:
    return getattr(env.unwrapped, "max_turns", 1) > 1


def render(tokenizer, messages: list[dict], env, add_generation_prompt: bool = True) -> str:
    """`messages` as the model reads them, with `env`'s tools described as its parser wants."""
    from rlvr.envs.tools import render_chat

    unwrapped = getattr(env, "unwrapped", None)
    return render_chat(tokenizer, messages, getattr(unwrapped, "tool_schemas", None) or None,
                       add_generation_prompt=add_generation_prompt, tool_prompt=getattr(unwrapped, "tool_prompt", None))


def _parser_attr(env, name: str, default):
    """An attribute of the env's tool-call parser; the Hermes `default` when the env has no parser."""
    return getattr(getattr(env.unwrapped, "parser", None), name, default)


def call_ended(env):
    """The env parser's test for a turn that has just closed a tool call (Hermes `</tool_call>` by default)."""
    from rlvr.envs.tool_calls import ends_with_call

    return _parser_attr(env, "call_ended", ends_with_call)


def _end_marker(env) -> str:
    from rlvr.envs.tool_calls import CLOSE

    return _parser_attr(env, "end_marker", CLOSE)


def env_tokens(tokenizer, messages: list[dict], env, sampled_eos: bool) -> list[int]:
    """Token ids the chat template puts after the last assistant turn of `messages` (the env's reply
    and the next assistant header), without the end-of-turn token when the model sampled it."""
    last = max(i for i, m in enumerate(messages) if m["role"] == "assistant")
    marked = [*messages[:last], {"role": "assistant", "content": SENTINEL}, *messages[last + 1:]]
    text = render(tokenizer, marked, env)
    if text.count(SENTINEL) != 1:
        raise ValueError("the chat template does not render an assistant turn's content verbatim")
    tail = text.split(SENTINEL, 1)[1]
    eos_text = tokenizer.eos_token or ""
    if sampled_eos and eos_text and tail.startswith(eos_text):
        tail = tail[len(eos_text):]
    return tokenizer(tail, add_special_tokens=False)["input_ids"]


@dataclass
class _Episode:
    env: Any
    prompt: int  # index of its prompt in the batch
    tokens: list[int] = field(default_factory=list)
    weights: list[int] = field(default_factory=list)
    logps: list[float] = field(default_factory=list)
    turn_start: int = 0
    turn_ends: list[int] = field(default_factory=list)  # index of each turn's last sampled token
    turn_rewards: list[float] = field(default_factory=list)
    reply: list[int] = field(default_factory=list)  # the env's tokens, to be fed
    info: dict = field(default_factory=dict)
    done: bool = False
    cut: bool = False  # stopped by the token budget


def _turn_over(tokenizer, ep: _Episode, token: int, eos: set[int], max_new_tokens: int) -> bool:
    turn = ep.tokens[ep.turn_start:]
    if token in eos or len(turn) >= max_new_tokens:
        return True
    # the whole turn is decoded only when its last tokens end like a call (once per call, not per token)
    if not tokenizer.decode(turn[-8:], skip_special_tokens=False).rstrip().endswith(_end_marker(ep.env)):
        return False
    return call_ended(ep.env)(tokenizer.decode(turn, skip_special_tokens=False))


def _step(tokenizer, ep: _Episode, eos: set[int], budget: int) -> None:
    """Step the env with the turn just sampled; set its reply's tokens or end the episode."""
    turn = ep.tokens[ep.turn_start:]
    text = tokenizer.decode(turn, skip_special_tokens=True)
    messages, reward, terminated, truncated, info = ep.env.step(text)
    ep.turn_ends.append(len(ep.tokens) - 1)
    ep.turn_rewards.append(float(reward))
    ep.info = dict(info)
    if terminated or truncated:
        ep.done = True
        return
    reply = env_tokens(tokenizer, messages, ep.env, sampled_eos=turn[-1] in eos)
    if len(ep.tokens) + len(reply) >= budget:
        ep.done = ep.cut = True
        return
    ep.reply = reply


@torch.no_grad()
def sample_episodes(model, tokenizer, envs: list, prompt_ids: list[list[int]], n: int, *, max_new_tokens: int,
                    max_episode_tokens: int, temperature: float = 1.0, top_p: float = 1.0, greedy: bool = False,
                    generators: list[torch.Generator] | None = None, threads: int = 8) -> list[_Episode]:
    """Run `n` episodes of each prompt (`envs[p * n + j]` is episode j of prompt p, already reset)."""
    n_prompts = len(prompt_ids)
    if len(envs) != n_prompts * n:
        raise ValueError(f"{n_prompts} prompts x {n} episodes need {n_prompts * n} envs, got {len(envs)}")
    if generators is None:
        generators = [torch.Generator().manual_seed(i) for i in range(n_prompts)]
    device = next(model.parameters()).device
    eos = set(eos_ids(tokenizer, model))
    pad = tokenizer.pad_token_id
    cache, logits, mask, next_pos = prefill_prompts(model, prompt_ids, n, pad, device)

    rows = n_prompts * n
    episodes = [_Episode(env, r // n) for r, env in enumerate(envs)]
    draws: list[list[torch.Tensor]] = [[] for _ in range(n_prompts)]  # each prompt's uniforms, n per draw

    def uniform(row: int) -> float:
        """The uniform number of the row's next token: its prompt's draw number len(tokens)."""
        p, k = row // n, len(episodes[row].tokens)
        while len(draws[p]) <= k:
            draws[p].append(torch.rand(n, generator=generators[p]))
        return float(draws[p][k][row % n])

    active = torch.arange(rows)
    pool = ThreadPoolExecutor(max_workers=max(1, min(threads, rows)))
    try:
        while len(active):
            if greedy:
                chosen = logits.argmax(-1)
                logp = torch.log_softmax(logits.float(), -1).gather(-1, chosen.unsqueeze(-1)).squeeze(-1)
            else:
                uniforms = torch.tensor([uniform(row) for row in active.tolist()], dtype=torch.float32)
                chosen, logp = _pick(logits, uniforms.to(device), temperature, top_p)
            ending = []
            for row, tok, lp in zip(active.tolist(), chosen.tolist(), logp.tolist()):
                ep = episodes[row]
                ep.tokens.append(tok)
                ep.weights.append(1)
                ep.logps.append(lp)
                if len(ep.tokens) >= max_episode_tokens:
                    ep.done = ep.cut = True
                elif _turn_over(tokenizer, ep, tok, eos, max_new_tokens):
                    ending.append(ep)
            list(pool.map(lambda ep: _step(tokenizer, ep, eos, max_episode_tokens), ending))
            keep = [j for j, row in enumerate(active.tolist()) if not episodes[row].done]
            if not keep:
                break
            if len(keep) < len(active):
                index = torch.tensor(keep, dtype=torch.long, device=device)
                cache.batch_select_indices(index)
                active, mask, next_pos, chosen = active[index.cpu()], mask[index], next_pos[index], chosen[index]
            mask = torch.cat([mask, mask.new_ones((len(active), 1))], dim=1)
            out = model(input_ids=chosen.unsqueeze(-1), attention_mask=mask, position_ids=next_pos, use_cache=True,
                        **cache_kwarg(model, cache))
            logits = out.logits[:, -1]
            next_pos = next_pos + 1
            replying = [j for j, row in enumerate(active.tolist()) if episodes[row].reply]
            if replying:  # the env's replies, one prefill through the carried cache
                replies = [episodes[row].reply for row in active[replying].tolist()]
                fed, mask, next_pos = feed_rows(model, cache, mask, next_pos, replying, replies, pad)
                logits[replying] = fed
                for row in active[replying].tolist():
                    ep = episodes[row]
                    ep.tokens.extend(ep.reply)
                    ep.weights.extend([0] * len(ep.reply))
                    ep.logps.extend([0.0] * len(ep.reply))
                    ep.turn_start, ep.reply = len(ep.tokens), []
    finally:
        pool.shutdown()
    return episodes


def _outcome(tokenizer, ep: _Episode, episode_return: str) -> tuple[float, dict]:
    info = dict(ep.info)
    if ep.cut:  # the token budget ran out before the env ended the episode
        info.update(correct=False, ended_by="token_budget", truncated=True)
    final = 0.0 if ep.cut else float(ep.info.get("final_reward", ep.turn_rewards[-1] if ep.turn_rewards else 0.0))
    mid_turn = ep.cut and ep.weights[-1:] == [1] and ep.turn_ends[-1:] != [len(ep.tokens) - 1]
    info["turns"] = len(ep.turn_ends) + mid_turn
    info.setdefault("tool_calls", 0)
    info["step_rewards"] = [
        [len(tokenizer.decode(ep.tokens[:end + 1], skip_special_tokens=True)), r]
        for end, r in zip(ep.turn_ends, ep.turn_rewards)]
    info["turn_rewards"] = list(ep.turn_rewards)
    value = sum(ep.turn_rewards) if episode_return == "sum" else final
    return value, info


def encode_prompts(tokenizer, envs: list, chats: list[list[dict]]) -> list[list[int]]:
    return [tokenizer(render(tokenizer, chat, env), add_special_tokens=False)["input_ids"]
            for env, chat in zip(envs, chats)]


def bind_tokenizer(envs: list, tokenizer) -> None:
    """Let envs that count tokens (a ToolEnv's `max_tokens`) count them with the policy's tokenizer."""
    for env in envs:
        if hasattr(env.unwrapped, "count_tokens"):
            env.unwrapped.count_tokens = lambda text: len(tokenizer(text, add_special_tokens=False)["input_ids"])


def rollout_episodes(model, tokenizer, envs: list, indices: list[int], *, seed: int, group_size: int,
                     max_new_tokens: int, max_episode_tokens: int, temperature: float = 1.0, top_p: float = 1.0,
                     greedy: bool = False, episode_return: str = "final", draws: list[int] | None = None,
                     ) -> list[Group]:
    """Reset G env copies to each prompt index, run the episodes, and return one Group per prompt.

    `draws` are the prompts' draw numbers (0, the default, on a first asking; a replay gets new samples).
    `envs` holds `len(indices) * group_size` envs (copies of one env id), G consecutive ones per prompt.
    """
    need = len(indices) * group_size
    if len(envs) < need:
        raise ValueError(f"{len(indices)} prompts x {group_size} episodes need {need} envs, got {len(envs)}")
    envs = envs[:need]
    bind_tokenizer(envs, tokenizer)
    chats = [env.reset(seed=seed + indices[k // group_size])[0] for k, env in enumerate(envs)]
    encoded = encode_prompts(tokenizer, envs, chats)
    prompts = encoded[::group_size]
    was_training = model.training
    model.eval()
    try:
        episodes = sample_episodes(
            model, tokenizer, envs, prompts, group_size, max_new_tokens=max_new_tokens,
            max_episode_tokens=max_episode_tokens, temperature=temperature, top_p=top_p, greedy=greedy,
            generators=[prompt_generator(seed, i, d) for i, d in zip(indices, draws or [0] * len(indices))])
    finally:
        model.train(was_training)
    groups = []
    for p, index in enumerate(indices):
        eps = episodes[p * group_size:(p + 1) * group_size]
        outcomes = [_outcome(tokenizer, ep, episode_return) for ep in eps]
        groups.append(Group(
            index, prompts[p], [ep.tokens for ep in eps], [ep.cut for ep in eps],
            [tokenizer.decode(ep.tokens, skip_special_tokens=False) for ep in eps],
            [r for r, _ in outcomes], [i for _, i in outcomes], [ep.logps for ep in eps],
            weights=[ep.weights for ep in eps]))
    return groups


def is_error(info: dict) -> bool:
    score = info.get("score") if isinstance(info, dict) else None
    return isinstance(score, dict) and score.get("reason") == "error"


def drop_errors(group: Group) -> Group:
    """The group without its `error` completions (infrastructure failures), which it counts in `errors`."""
    keep = [i for i, info in enumerate(group.infos) if not is_error(info)]
    if len(keep) == len(group.infos):
        return group

    def pick(values):
        return [values[i] for i in keep] if values else values

    return Group(group.index, group.prompt_ids, pick(group.completion_ids), pick(group.truncated), pick(group.texts),
                 pick(group.rewards), pick(group.infos), pick(group.sample_logps), weights=pick(group.weights),
                 errors=group.errors + len(group.infos) - len(keep))


def episode_metrics(groups: list[Group]) -> dict[str, float]:
    """Mean turns, tool calls and the share of context tokens of multi-turn groups (empty for single-turn)."""
    infos = [i for g in groups if g.weights is not None for i in g.infos]
    if not infos:
        return {}
    weights = [w for g in groups if g.weights is not None for ws in g.weights for w in ws]
    return {"turns_mean": sum(i.get("turns", 1) for i in infos) / len(infos),
            "tool_calls_mean": sum(i.get("tool_calls", 0) for i in infos) / len(infos),
            "env_token_frac": 1.0 - sum(weights) / len(weights) if weights else 0.0}


def evaluate_episodes(model, tokenizer, env_id: str, env_kwargs: dict, n_prompts: int, *, seed: int,
                      max_new_tokens: int, max_episode_tokens: int, batch: int = 16) -> dict:
    """Greedy episodes on prompts seed, seed + 1, ...: accuracy, reward, mean turns and tool calls,
    and the share of correct episodes that called a tool."""
    envs = make_envs(env_id, env_kwargs, min(batch, n_prompts))
    totals = {"correct": 0, "reward": 0.0, "turns": 0, "tool_calls": 0, "tool_correct": 0, "errors": 0}
    try:
        for start in range(0, n_prompts, batch):
            indices = list(range(start, min(start + batch, n_prompts)))
            for g in rollout_episodes(model, tokenizer, envs, indices, seed=seed, group_size=1,
                                      max_new_tokens=max_new_tokens, max_episode_tokens=max_episode_tokens,
                                      greedy=True):
                info = g.infos[0]
                totals["correct"] += bool(info.get("correct"))
                totals["reward"] += g.rewards[0]
                totals["turns"] += info.get("turns", 1)
                totals["tool_calls"] += info.get("tool_calls", 0)
                totals["tool_correct"] += bool(info.get("correct")) and info.get("tool_calls", 0) > 0
                totals["errors"] += is_error(info)
    finally:
        for env in envs:
            env.close()
    n = max(n_prompts, 1)
    return {"accuracy": totals["correct"] / n, "reward": totals["reward"] / n, "n": n_prompts,
            "turns_mean": totals["turns"] / n, "tool_calls_mean": totals["tool_calls"] / n,
            "tool_use_among_correct": totals["tool_correct"] / totals["correct"] if totals["correct"] else None,
            "errors": totals["errors"]}
