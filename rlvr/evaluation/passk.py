"""pass@1 and pass@k of a model, a served model or a policy on an env's tasks, by the loop's rules.

For each task, `n` episodes are played by the trainer's episode loop (trainer/rollout/loop.py) and
scored through the env API; an episode counts as correct when its env says so (`info["correct"]`).
pass@k is the unbiased estimator of Chen et al. (2021), `1 - C(n - c, k) / C(n, k)` averaged over
tasks, with `c` correct out of `n`.

Dataset envs are evaluated over their whole split (or the first `limit` items); generated envs
over items 0..limit-1 (default 100). Multi-turn envs (`max_turns > 1`: CodeFeedback,
MathSelfCheck, ToolMath, any `ToolEnv`) run whole episodes under the same token budget as
training (`max_episode_tokens`), the env's tools shown to the model; pass@k counts an episode as
correct when its final step says so, and the result adds the mean turns and tool calls per episode.
The generators: rlvr/evaluation/policy.py (a text policy), rlvr/evaluation/endpoint.py (a served
model) and the trainer's registry (trainer/rollout/registry.py: `--model`).
"""

from __future__ import annotations

import sys
from collections import Counter
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from rlvr.evaluation.policy import PolicyGenerator

DEFAULT_GENERATED_ITEMS = 100
DEFAULT_EPISODE_TOKENS = 512  # as a training config's max_episode_tokens


def pass_at_k(n: int, c: int, k: int) -> float:
    """Unbiased pass@k for one task with `c` of `n` samples correct (product form, no big binomials)."""
    if not 0 <= c <= n or not 1 <= k <= n:
        raise ValueError(f"pass@k needs 0 <= c <= n and 1 <= k <= n, got n={n}, c={c}, k={k}")
    if n - c < k:
        return 1.0
    miss = 1.0
    for i in range(n - c + 1, n + 1):
        miss *= 1.0 - k / i
    return 1.0 - miss


@dataclass
class EvalResult:
    env: str
    items: int
    n: int
    pass_at: dict[int, float]
    mean_reward: float
    reasons: dict[str, int] = field(default_factory=dict)  # headline reasons of the non-best scores
    samples: list[dict[str, Any]] = field(default_factory=list)
    turns_mean: float | None = None  # multi-turn envs: assistant turns per episode
    tool_calls_mean: float | None = None  # multi-turn envs: tool calls per episode

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["pass_at"] = {f"pass@{k}": v for k, v in self.pass_at.items()}
        del out["samples"]
        return out


def evaluate_pass_at_k(env_id: str, policy: Any, *, n: int = 1, ks: Sequence[int] = (1,), limit: int | None = None,
             batch_size: int = 8, env_kwargs: dict[str, Any] | None = None, keep_samples: bool = False,
             progress: bool = True, tokenizer: Any = None, max_new_tokens: int = 256, temperature: float | None = None,
             top_p: float = 1.0, seed: int = 0, stop_token_ids: Sequence[int] = (),
                        max_episode_tokens: int | None = DEFAULT_EPISODE_TOKENS,
                        eval_seed: int | None = None) -> EvalResult:
    """pass@k for each k in `ks` of `n` episodes per task. `policy`: a text policy, or a generator
    (trainer/generator.py; a token generator with its `tokenizer` and end-of-turn `stop_token_ids`).
    Sampling is greedy when `temperature` is None and n == 1, else at `temperature` (default 1.0).
    `max_episode_tokens`: a multi-turn episode's token budget after the prompt, as in training (counted
    with the tokenizer of a token generator; None: no budget). `eval_seed`: the tasks are the env's
    `reset(seed=eval_seed + i)`, the prompts training's held-out evaluation plays (its config's `eval_seed`),
    instead of the items `0..limit-1`."""
    from tqdm import tqdm

    from rlvr.envs import make
    from rlvr.trainer.rollout.envs import is_multiturn
    from rlvr.trainer.rollout.loop import rollout
    from rlvr.trainer.rollout.sessions import SamplingSettings
    from rlvr.trainer.rollout.tally import tally

    for name, value in (("n", n), ("batch_size", batch_size), ("limit", 1 if limit is None else limit)):
        if not isinstance(value, int) or value < 1:
            raise ValueError(f"{name} must be a positive int, got {value!r}")
    bad = [k for k in ks if not isinstance(k, int) or not 1 <= k <= n]
    if bad:
        raise ValueError(f"every k must be in 1..n (n={n}), got {bad}")
    generator = policy if hasattr(policy, "start") or hasattr(policy, "sample") else PolicyGenerator(policy)
    if hasattr(generator, "sample") and tokenizer is None:
        raise ValueError("a token generator (one with `sample`) needs its tokenizer")
    envs = [make(env_id, **(env_kwargs or {})) for _ in range(batch_size)]
    multiturn = is_multiturn(envs[0])
    if multiturn:  # one env per episode: n episodes of each task of a batch
        envs += [make(env_id, **(env_kwargs or {})) for _ in range(batch_size * (n - 1))]
    size = envs[0].unwrapped.source.size
    total = DEFAULT_GENERATED_ITEMS if size is None else size
    total = total if limit is None else min(total, limit)
    settings = SamplingSettings(n=n, max_new_tokens=max_new_tokens, temperature=1.0 if temperature is None else temperature,
                                top_p=top_p, greedy=temperature is None and n == 1, stop_token_ids=tuple(stop_token_ids))
    sums, totals, samples = dict.fromkeys(ks, 0.0), Counter(), []
    try:
        with tqdm(total=total, desc=f"eval {env_id}", unit="task", disable=not progress, file=sys.stderr) as bar:
            for start in range(0, total, batch_size):
                indices = list(range(start, min(start + batch_size, total)))
                resets = [{"options": {"index": i}} if eval_seed is None else {"seed": eval_seed + i} for i in indices]
                groups = rollout(generator, envs, resets,
                                 [seed * 1_000_003 + i * n for i in indices], settings, indices=indices,
                                 tokenizer=tokenizer, budget=max_episode_tokens)
                tally(groups, totals)
                for g in groups:
                    for k in ks:
                        sums[k] += pass_at_k(n, sum(g.correct), k)
                    if keep_samples:  # with the log-probs of the sampled tokens (env tokens have weight 0)
                        logps = g.sample_logps if g.weights is None else [
                            [lp for lp, w in zip(lps, ws) if w] for lps, ws in zip(g.sample_logps, g.weights)]
                        samples += [_sample(*episode, multiturn) for episode in zip(g.texts, g.rewards, g.infos, logps)]
                bar.update(len(indices))
    finally:
        for env in envs:
            env.close()
    episodes = total * n if multiturn else 0
    reasons = Counter({k[7:]: v for k, v in totals.items() if k.startswith("reason/") and k != "reason/"})
    return EvalResult(env_id, total, n, {k: sums[k] / total for k in ks}, totals["reward"] / (total * n),
                      dict(reasons.most_common()), samples, totals["turns"] / episodes if episodes else None,
                      totals["tool_calls"] / episodes if episodes else None)


def _sample(text: str, reward: float, info: dict[str, Any], logps: list[float], multiturn: bool) -> dict[str, Any]:
    out = {"task_id": info.get("task_id"), "completion": text, "reward": reward, "correct": bool(info.get("correct")),
           "reason": info.get("score", {}).get("reason")}
    if logps:
        out["logprobs"] = logps
    if multiturn:
        out.update(turns=info.get("turns", 1), replies=info.get("replies", []), tool_calls=info.get("tool_calls", 0),
                   ended_by=info.get("ended_by"))
    if "error" in info:
        out["error"] = info["error"]
    return out
