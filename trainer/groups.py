"""Groups: a prompt from an env, G completions sampled for it, their rewards from the env API.

The trainer knows a task only through the env contract: `env.reset(seed=...)` gives chat
messages, `env.unwrapped.score_group(texts)` (or `rlvr.envs.score_groups` for a batch of rlvr
envs) gives `(reward, info)` pairs with `info["correct"]` and `info["score"]`. Prompt k of a
run uses env seed `seed + k` and its own sampling generator, so the same prompt index always
yields the same prompt and the same completions, whichever process or batch it lands in.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field

import gymnasium as gym
import torch

from rlvr.trainer.generation import encode_chats, eos_ids, sample


@dataclass
class Group:
    """One prompt and its G scored completions."""

    index: int  # the prompt's position in the run's stream of prompts
    prompt_ids: list[int]
    completion_ids: list[list[int]]
    truncated: list[bool]
    texts: list[str]
    rewards: list[float]
    infos: list[dict] = field(default_factory=list)
    sample_logps: list[list[float]] = field(default_factory=list)  # the sampler's log-prob of each token
    weights: list[list[int]] | None = None  # multi-turn: 1 on sampled tokens, 0 on env tokens (trainer/episodes.py)
    errors: int = 0  # completions scored `error` (infrastructure) left out of the group

    @property
    def correct(self) -> list[bool]:
        return [bool(i.get("correct", False)) for i in self.infos]


def make_envs(env_id: str, kwargs: dict, count: int) -> list:
    """`count` instances of an env (rlvr envs register on import of rlvr.envs)."""
    if env_id.startswith(("rlvr/", "rg/")):
        import rlvr.envs  # noqa: F401  (registers the rlvr/ and reasoning-gym rg/ ids)
    return [gym.make(env_id, **kwargs) for _ in range(count)]


def score(envs: list, texts: list[list[str]]) -> list[list[tuple[float, dict]]]:
    """(reward, info) for every completion of every env's current prompt, as one batch where possible."""
    if envs and all(type(e.unwrapped).__module__.startswith("rlvr.envs") for e in envs):
        from rlvr.envs import score_groups

        return score_groups(envs, texts)
    return [e.unwrapped.score_group(t) for e, t in zip(envs, texts)]


def prompt_generator(seed: int, index: int, draw: int = 0) -> torch.Generator:
    """The sampling generator of prompt `index`, asked for the `draw`-th time after the first (trainer/replay.py).

    torch seeds its CPU generator from the low 32 bits only, so a replay's key is hashed into them
    rather than put above them.
    """
    key = (seed & 0xFFFF_FFFF) << 20 ^ index
    if draw:
        key = int.from_bytes(hashlib.blake2b(f"{seed}:{index}:{draw}".encode(), digest_size=4).digest(), "little")
    return torch.Generator().manual_seed(key)


def rollout(model, tokenizer, envs: list, indices: list[int], *, seed: int, group_size: int,
            max_new_tokens: int, temperature: float = 1.0, top_p: float = 1.0, greedy: bool = False,
            draws: list[int] | None = None) -> list[Group]:
    """Reset env i to prompt indices[i], sample `group_size` completions of each, and score them.

    `draws` are the prompts' draw numbers (0, the default, on a first asking; a replay gets new samples).
    """
    if len(envs) < len(indices):
        raise ValueError(f"{len(indices)} prompts but only {len(envs)} envs")
    envs = envs[: len(indices)]
    chats = [env.reset(seed=seed + index)[0] for env, index in zip(envs, indices)]
    was_training = model.training
    model.eval()
    try:
        sampled = sample(
            model, encode_chats(tokenizer, chats), n=group_size, max_new_tokens=max_new_tokens,
            temperature=temperature, top_p=top_p, greedy=greedy,
            generators=[prompt_generator(seed, i, d) for i, d in zip(indices, draws or [0] * len(indices))],
            eos_token_ids=eos_ids(tokenizer, model), pad_token_id=tokenizer.pad_token_id,
        )
    finally:
        model.train(was_training)
    texts = [[tokenizer.decode(c, skip_special_tokens=True) for c in s.completion_ids] for s in sampled]
    scored = score(envs, texts)
    return [
        Group(index, s.prompt_ids, s.completion_ids, s.truncated, t,
              [float(r) for r, _ in results], [info for _, info in results], s.logprobs)
        for index, s, t, results in zip(indices, sampled, texts, scored)
    ]


def evaluate(model, tokenizer, env_id: str, env_kwargs: dict, n_prompts: int, *, seed: int,
             max_new_tokens: int, batch: int = 16, max_episode_tokens: int = 512) -> dict:
    """Greedy accuracy and mean reward on prompts seed, seed + 1, ... (the held-out seeds)."""
    envs = make_envs(env_id, env_kwargs, min(batch, n_prompts))
    from rlvr.trainer.episodes import evaluate_episodes, is_multiturn

    if envs and is_multiturn(envs[0]):  # whole episodes (mean turns and tool calls too)
        for env in envs:
            env.close()
        return evaluate_episodes(model, tokenizer, env_id, env_kwargs, n_prompts, seed=seed,
                                 max_new_tokens=max_new_tokens, max_episode_tokens=max_episode_tokens, batch=batch)
    correct, reward, parts = 0, 0.0, {}
    try:
        for start in range(0, n_prompts, batch):
            indices = list(range(start, min(start + batch, n_prompts)))
            for g in rollout(model, tokenizer, envs, indices, seed=seed, group_size=1,
                             max_new_tokens=max_new_tokens, greedy=True):
                correct += g.correct[0]
                reward += g.rewards[0]
                for name, value in g.infos[0].get("score", {}).get("components", {}).items():
                    parts[name] = parts.get(name, 0.0) + float(value)
    finally:
        for env in envs:
            env.close()
    n = max(n_prompts, 1)
    return {"accuracy": correct / n, "reward": reward / n, "n": n_prompts,
            **{f"reward/{name}": value / n for name, value in sorted(parts.items())}}
