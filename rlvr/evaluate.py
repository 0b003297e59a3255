"""`rlvr eval`: pass@1 and pass@k of a model or a policy on an env's tasks.

For each task, `n` completions are sampled and scored through the env's batched
interface (`rlvr.envs.score_groups`); a completion counts as correct when its env says
so (`info["correct"]`). pass@k is the unbiased estimator of Chen et al. (2021),
`1 - C(n - c, k) / C(n, k)` averaged over tasks, with `c` correct out of `n`.

Dataset envs are evaluated over their whole split (or the first `--limit` items);
generated envs over items 0..limit-1 (default 100). Multi-turn envs (`max_turns > 1`:
CodeFeedback, MathSelfCheck, ToolMath, any `ToolEnv`) run whole episodes: the policy is asked
for each turn with the conversation so far (tools described in the system message), the env
steps, and pass@k counts an episode as correct when its final step says so; the result adds
the mean turns and tool calls per episode. A policy is any callable
`policy(prompts, n) -> list[list[str]]` taking chat prompts; `--model` builds one from the
trainer's model loading and generation code.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

Policy = Callable[[list[list[dict[str, str]]], int], list[list[str]]]
DEFAULT_GENERATED_ITEMS = 100


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


def evaluate(env_id: str, policy: Policy, *, n: int = 1, ks: Sequence[int] = (1,), limit: int | None = None,
             batch_size: int = 8, env_kwargs: dict[str, Any] | None = None, keep_samples: bool = False,
             progress: bool = True) -> EvalResult:
    """Sample `n` completions per task from `policy` and compute pass@k for each k in `ks`."""
    from tqdm import tqdm

    from rlvr.envs import make, score_groups

    if not isinstance(n, int) or n < 1:
        raise ValueError(f"n must be a positive int, got {n!r}")
    bad = [k for k in ks if not isinstance(k, int) or not 1 <= k <= n]
    if bad:
        raise ValueError(f"every k must be in 1..n (n={n}), got {bad}")
    if not isinstance(batch_size, int) or batch_size < 1:
        raise ValueError(f"batch_size must be a positive int, got {batch_size!r}")
    envs = [make(env_id, **(env_kwargs or {})) for _ in range(batch_size)]
    multiturn = getattr(envs[0].unwrapped, "max_turns", 1) > 1
    if multiturn:  # one env per episode: n episodes of each task of a batch
        envs += [make(env_id, **(env_kwargs or {})) for _ in range(batch_size * (n - 1))]
    size = envs[0].unwrapped.source.size
    total = size if size is not None else DEFAULT_GENERATED_ITEMS
    if limit is not None:
        if not isinstance(limit, int) or limit < 1:
            raise ValueError(f"limit must be a positive int, got {limit!r}")
        total = min(total, limit)
    sums = dict.fromkeys(ks, 0.0)
    reward_sum, reasons, samples = 0.0, Counter(), []
    turns, calls = 0, 0
    with tqdm(total=total, desc=f"eval {env_id}", unit="task", disable=not progress, file=sys.stderr) as bar:
        for start in range(0, total, batch_size):
            batch = envs[: min(batch_size, total - start)]
            if multiturn:
                completions, results = run_episodes(envs, policy, n, start, len(batch))
                turns += sum(info.get("turn", 1) for group in results for _, info in group)
                calls += sum(info.get("tool_calls", 0) for group in results for _, info in group)
            else:
                prompts = [env.reset(options={"index": start + b})[0] for b, env in enumerate(batch)]
                completions = policy(prompts, n)
                if len(completions) != len(batch) or any(len(c) != n for c in completions):
                    raise ValueError(f"the policy must return {n} completions for each of the {len(batch)} prompts")
                results = score_groups(batch, completions)
            for b, scored in enumerate(results):
                correct = sum(info["correct"] for _, info in scored)
                for k in ks:
                    sums[k] += pass_at_k(n, correct, k)
                for (reward, info), text in zip(scored, completions[b]):
                    reward_sum += reward
                    if info["score"]["reason"]:
                        reasons[info["score"]["reason"]] += 1
                    if keep_samples:
                        samples.append({"task_id": info["task_id"], "completion": text, "reward": reward,
                                        "correct": info["correct"], "reason": info["score"]["reason"]})
            bar.update(len(batch))
    for env in envs:
        env.close()
    episodes = total * n if multiturn else 0
    return EvalResult(env_id, total, n, {k: sums[k] / total for k in ks}, reward_sum / (total * n),
                      dict(reasons.most_common()), samples, turns / episodes if episodes else None,
                      calls / episodes if episodes else None)


def run_episodes(envs: list, policy: Policy, n: int, start: int, tasks: int):
    """n whole episodes of tasks start..start + tasks - 1 (envs[t * n + j] plays episode j of task t).

    Returns (transcripts, results): per task, the n episodes' assistant turns joined as text, and
    their (final reward, final info). Each round asks the policy for one turn of every live episode.
    """
    from rlvr.envs.tools import with_tool_prompt

    playing = envs[: tasks * n]
    observations = [env.reset(options={"index": start + k // n})[0] for k, env in enumerate(playing)]
    turns: list[list[str]] = [[] for _ in playing]
    ended: list[tuple[float, dict] | None] = [None] * len(playing)
    live = list(range(len(playing)))
    while live:
        prompts = [with_tool_prompt(observations[k], getattr(playing[k].unwrapped, "tool_schemas", None) or [],
                                    getattr(playing[k].unwrapped, "tool_prompt", None)) for k in live]
        replies = policy(prompts, 1)
        if len(replies) != len(live) or any(len(r) != 1 for r in replies):
            raise ValueError(f"the policy must return 1 completion for each of the {len(live)} conversations")
        for k, (text,) in zip(live, replies):
            observations[k], reward, terminated, truncated, info = playing[k].step(text)
            turns[k].append(text)
            if terminated or truncated:
                ended[k] = (float(info.get("final_reward", reward)), info)
        live = [k for k in live if ended[k] is None]
    transcripts = [["\n\n".join(turns[t * n + j]) for j in range(n)] for t in range(tasks)]
    results = [[ended[t * n + j] for j in range(n)] for t in range(tasks)]
    return transcripts, results


def model_policy(model: Any, tokenizer: Any, *, max_new_tokens: int = 256, temperature: float | None = None,
                 top_p: float = 1.0, seed: int = 0) -> Policy:
    """A policy that samples from `model` with the trainer's generation code (greedy for n=1 by default)."""
    from rlvr.trainer.generation import generate

    calls = [0]

    def policy(prompts: list[list[dict[str, str]]], n: int) -> list[list[str]]:
        greedy = temperature is None and n == 1
        calls[0] += 1
        return generate(model, tokenizer, prompts, n=n, max_new_tokens=max_new_tokens,
                        temperature=1.0 if temperature is None else temperature, top_p=top_p,
                        greedy=greedy, seed=seed * 1_000_003 + calls[0])

    return policy


# --- the command -----------------------------------------------------------------------


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--env", required=True, help="env id, e.g. rlvr/GSM8K-v0 (see `rlvr list`)")
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--model", help="model to sample from: 'smollm2', a folder or a hub id")
    source.add_argument("--policy", metavar="MODULE:ATTR", help="a callable policy(prompts, n) -> completions")
    parser.add_argument("--split", help="dataset split (passed to the env)")
    parser.add_argument("--env-arg", action="append", default=[], metavar="KEY=JSON", help="an env keyword argument")
    parser.add_argument("-n", "--samples", type=int, default=1, dest="n", help="completions per task (default 1)")
    parser.add_argument("-k", default=None, help="comma-separated k values for pass@k (default: 1 and n)")
    parser.add_argument("--limit", type=int, help="evaluate only the first LIMIT tasks")
    parser.add_argument("--batch-size", type=int, default=8, help="tasks per generation batch (default 8)")
    parser.add_argument("--max-new-tokens", type=int, default=256)
    parser.add_argument("--temperature", type=float, default=None,
                        help="sampling temperature (default: greedy when n=1, else 1.0)")
    parser.add_argument("--top-p", type=float, default=1.0)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--output", metavar="PATH", help="write every sample as JSON lines to PATH")
    parser.add_argument("--json", action="store_true", help="print the result as JSON")
    parser.add_argument("--no-progress", action="store_true", help="hide the progress bar")
    parser.add_argument("--endpoint", metavar="URL", help="evaluate the model --model NAME served at this "
                        "OpenAI-compatible URL (vLLM, SGLang, llama.cpp); every turn of multi-turn envs")
    parser.add_argument("--concurrency", type=int, default=8, help="episodes in flight with --endpoint (default 8)")
    parser.add_argument("--timeout", type=float, default=120.0, help="seconds per request with --endpoint")


def run(args: argparse.Namespace) -> int:
    from rlvr.cli import UsageError, _key_values

    env_kwargs = _key_values(args.env_arg, "--env-arg")
    if args.split is not None:
        env_kwargs["split"] = args.split
    ks = _parse_ks(args.k, args.n)
    for flag, value in (("--limit", args.limit), ("--batch-size", args.batch_size),
                        ("--max-new-tokens", args.max_new_tokens)):
        if value is not None and value < 1:
            raise UsageError(f"rlvr eval: {flag} must be at least 1, got {value}")
    from rlvr.envs import make

    make(args.env, **env_kwargs).close()  # a bad id, split or path fails before a model loads
    if args.policy and not args.endpoint:
        policy = _load_policy(args.policy)
    elif not args.endpoint:
        from rlvr.trainer.models import load_model

        model, tokenizer = load_model(args.model)
        policy = model_policy(model, tokenizer, max_new_tokens=args.max_new_tokens, temperature=args.temperature,
                              top_p=args.top_p, seed=args.seed)
    if args.endpoint:
        from rlvr.endpoint import run_eval

        result = run_eval(args, env_kwargs, ks)
    else:
        result = evaluate(args.env, policy, n=args.n, ks=ks, limit=args.limit, batch_size=args.batch_size,
                          env_kwargs=env_kwargs, keep_samples=bool(args.output), progress=not args.no_progress)
    if args.output:
        with open(args.output, "w", encoding="utf-8") as fh:
            for sample in result.samples:
                fh.write(json.dumps(sample, ensure_ascii=False) + "\n")
    if args.json:
        print(json.dumps(result.to_dict()))
    else:
        print(f"{result.env}: {result.items} tasks x {result.n} samples")
        for k, value in result.pass_at.items():
            print(f"  pass@{k}: {value:.4f}")
        print(f"  mean reward: {result.mean_reward:.4f}")
        if result.turns_mean is not None:
            print(f"  mean turns: {result.turns_mean:.2f}, mean tool calls: {result.tool_calls_mean:.2f}")
        if result.reasons:
            print("  reasons: " + ", ".join(f"{r} {c}" for r, c in result.reasons.items()))
    return 0


def _parse_ks(text: str | None, n: int) -> list[int]:
    from rlvr.cli import UsageError

    if n < 1:
        raise UsageError(f"rlvr eval: -n must be at least 1, got {n}")
    if text is None:
        return sorted({1, n})
    try:
        ks = sorted({int(part) for part in text.split(",") if part.strip()})
    except ValueError:
        raise UsageError(f"rlvr eval: -k expects comma-separated integers, got {text!r}") from None
    if not ks or ks[0] < 1 or ks[-1] > n:
        raise UsageError(f"rlvr eval: every k must be in 1..n (n={n}), got {text!r}")
    return ks


def _load_policy(target: str) -> Policy:
    import importlib

    from rlvr.cli import UsageError

    module_name, sep, attr = target.partition(":")
    if not sep or not module_name or not attr:
        raise UsageError(f"rlvr eval: --policy expects MODULE:ATTR, got {target!r}")
    try:
        obj: Any = importlib.import_module(module_name)
        for part in attr.split("."):
            obj = getattr(obj, part)
    except (ImportError, AttributeError) as exc:
        raise UsageError(f"rlvr eval: cannot load policy {target!r}: {exc}") from None
    if not callable(obj):
        raise UsageError(f"rlvr eval: policy {target!r} is not callable")
    return obj
