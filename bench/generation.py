#!/usr/bin/env python
"""Sampling throughput: the local KV-cache sampler against the in-process vLLM engine, same run.

Both generators (`trainer/generator.LocalGenerator`, `trainer/vllm_generator.VLLMGenerator`) sample
the same prompts (chat arithmetic questions) with the same model (SmolLM2-135M-Instruct, fp32),
group size, temperature, top-p and per-prompt seeds; no stop ids, so every completion runs to
`--max-new-tokens` and both produce the same number of tokens. The local sampler runs as training
runs it (inside `packed_linears`); both run on the same `--threads` torch threads (the vLLM
generator keeps the process's thread count). One untimed warm-up call each, then `--repeats`
timed calls, alternating; the ratio is the median of each pair's vLLM / local ratio. vLLM's prefix
cache is emptied (untimed) before each timed call and each episode run, as a training step's weight
sync empties it: otherwise every call after the warm-up would find its prompts already computed,
while the local sampler computes them every time. vLLM runs as rlvr builds it: eager
(`enforce_eager=True`, no torch.compile or CUDA graphs), prefix caching on, chunked prefill off
on CPU.

Multi-turn rows (`--episodes`): whole tool episodes through the one episode loop
(`trainer/rollout.rollout`) with each generator, on bench/multiturn.py's LongToolMath env (a
look-up tool whose reply is ~830 tokens; pure Python): the local sampler carries its KV cache
across turns, vLLM re-submits each episode's ids (prefix caching). Tokens counted: the sampled
ones (the env's are not), per second of the whole loop; the ratio is again the median of each
run's own vLLM / local ratio (the order alternating).

Also reported: the mean absolute difference between the log-probs each generator returns and the
trainer's recomputation (`group_logprobs` at the sampling temperature) of the same tokens.
Ends with `RESULT {"local_tokens_per_s": ..., "vllm_tokens_per_s": ..., "ratio": ...,
"mean_abs_logprob_diff": ...}`. Without vllm installed (the main .venv) it says so and skips;
`make install-vllm` builds .venv-vllm, where it runs: `.venv-vllm/bin/python bench/generation.py`.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import statistics
import sys
import time


def trainer_diff(model, sampled, temperature: float) -> float:
    """Mean |returned log-prob - trainer's recomputed log-prob| over every sampled token."""
    import torch

    from rlvr.trainer.logprobs import group_logprobs

    total, count = 0.0, 0
    with torch.no_grad():
        for s in sampled:
            width = max(map(len, s.completion_ids))
            ids = torch.tensor([c + [0] * (width - len(c)) for c in s.completion_ids])
            mask = torch.tensor([[1] * len(c) + [0] * (width - len(c)) for c in s.completion_ids])
            logp = group_logprobs(model, torch.tensor(s.prompt_ids), ids, mask, temperature=temperature)[0]
            for row, (c, returned) in enumerate(zip(s.completion_ids, s.logprobs)):
                total += (logp[row, :len(c)] - torch.tensor(returned)).abs().sum().item()
                count += len(c)
    return total / count


def episode_rates(model, tok, local, engine, args) -> tuple[float, float, list[float], float]:
    """Sampled tokens/s of tool episodes through the episode loop: (local, vLLM, each run's vLLM / local,
    mean |vLLM - trainer| log-prob)."""
    import torch

    from rlvr.trainer.logprobs import group_logprobs
    from rlvr.trainer.packed_weights import packed_linears
    from rlvr.trainer.rollout.chat import eos_ids
    from rlvr.trainer.rollout.envs import make_envs
    from rlvr.trainer.rollout.loop import rollout
    from rlvr.trainer.rollout.sessions import SamplingSettings

    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from multiturn import TOOL_ENV, register_tool_env

    register_tool_env()
    envs = make_envs(TOOL_ENV, {}, args.prompts * args.group)
    settings = SamplingSettings(n=args.group, max_new_tokens=args.max_new_tokens, temperature=args.temperature,
                                top_p=args.top_p, stop_token_ids=tuple(eos_ids(tok, model)))

    def play(generator, seed):
        resets = [{"seed": seed * 1000 + i} for i in range(args.prompts)]
        start = time.perf_counter()
        groups = rollout(generator, envs, resets, [seed * 1000 + i for i in range(args.prompts)], settings,
                         tokenizer=tok, budget=2 * args.max_new_tokens + 1200)
        seconds = time.perf_counter() - start
        sampled = sum(sum(w) for g in groups for w in g.weights)
        turns = statistics.fmean(i["turns"] for g in groups for i in g.infos)
        return groups, sampled / seconds, f"{sampled} sampled tokens, {turns:.2f} turns/episode, {seconds:.1f}s"

    rates = {"local": [], "vllm": []}
    for r in range(args.repeats):
        for name in (["local", "vllm"] if r % 2 == 0 else ["vllm", "local"]):
            if name == "local":
                with packed_linears(model, rows=args.prompts * args.group):
                    groups, rate, line = play(local, r)
            else:
                engine.llm.reset_prefix_cache()  # cold, as after a step's weight sync (within a run, turns share it)
                groups, rate, line = play(engine, r)
                vllm_groups = groups
            rates[name].append(rate)
            print(f"episodes run {r} {name}: {line} = {rate:.1f} tok/s", flush=True)
    for env in envs:
        env.close()
    total, count = 0.0, 0
    with torch.no_grad():  # the sampled tokens' log-probs against the trainer's, env tokens left out
        for g in vllm_groups:
            width = max(map(len, g.completion_ids))
            ids = torch.tensor([c + [0] * (width - len(c)) for c in g.completion_ids])
            mask = torch.tensor([w + [0] * (width - len(w)) for w in g.weights])
            logp = group_logprobs(model, torch.tensor(g.prompt_ids), ids, mask, temperature=args.temperature)[0]
            for row, (w, returned) in enumerate(zip(g.weights, g.sample_logps)):
                for k, weight in enumerate(w):
                    if weight:
                        total += abs(logp[row, k].item() - returned[k])
                        count += 1
    paired = [v / lo for v, lo in zip(rates["vllm"], rates["local"])]
    return statistics.median(rates["local"]), statistics.median(rates["vllm"]), paired, total / count


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--prompts", type=int, default=4)
    p.add_argument("--group", type=int, default=8)
    p.add_argument("--max-new-tokens", type=int, default=64)
    p.add_argument("--temperature", type=float, default=1.0)
    p.add_argument("--top-p", type=float, default=1.0)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--kv-cache-gib", type=float, default=0.5)
    p.add_argument("--no-episodes", action="store_true", help="skip the multi-turn tool-episode rows")
    args = p.parse_args(argv)
    if importlib.util.find_spec("vllm") is None:
        print("SKIP: vllm is not installed in this environment; `make install-vllm`, then "
              ".venv-vllm/bin/python bench/generation.py")
        print("RESULT " + json.dumps({"skipped": "vllm is not installed"}))
        return 0

    import torch

    from rlvr.trainer.models import load_model
    from rlvr.trainer.packed_weights import packed_linears
    from rlvr.trainer.rollout.chat import encode_chats
    from rlvr.trainer.rollout.local import LocalGenerator
    from rlvr.trainer.rollout.sessions import SamplingSettings
    from rlvr.trainer.vllm_generator import VLLMGenerator

    torch.set_num_threads(args.threads)
    model, tok = load_model("smollm2")
    model.eval()
    chats = [[{"role": "user", "content": f"What is {17 * i + 12} + {29 * i + 7}? Explain step by step."}]
             for i in range(args.prompts)]
    prompts = encode_chats(tok, chats)
    settings = SamplingSettings(n=args.group, max_new_tokens=args.max_new_tokens, temperature=args.temperature,
                                top_p=args.top_p)
    load_before = os.getloadavg()
    t0 = time.perf_counter()
    engine = VLLMGenerator(model, tok, max_model_len=2048 if not args.no_episodes else
                           max(map(len, prompts)) + args.max_new_tokens,
                           kv_cache_gib=args.kv_cache_gib)
    print(f"vLLM engine built in {time.perf_counter() - t0:.1f}s; torch threads {torch.get_num_threads()}",
          flush=True)
    local = LocalGenerator(model, tok.pad_token_id)

    def run_local(seeds):
        with packed_linears(model, rows=args.prompts * args.group):
            return local.sample(prompts, settings, seeds)

    def run_vllm(seeds):
        return engine.sample(prompts, settings, seeds)

    def timed(fn, seeds):
        if fn is run_vllm:
            engine.llm.reset_prefix_cache()  # untimed: the prompts must not be cached from the call before
        start = time.perf_counter()
        out = fn(seeds)
        seconds = time.perf_counter() - start
        return out, sum(len(c) for s in out for c in s.completion_ids) / seconds, seconds

    run_local([10_000 + i for i in range(args.prompts)])  # warm-up, untimed
    run_vllm([10_000 + i for i in range(args.prompts)])
    local_rates, vllm_rates = [], []
    for r in range(args.repeats):
        seeds = [r * args.prompts + i for i in range(args.prompts)]
        order = [("local", run_local), ("vllm", run_vllm)][::1 if r % 2 == 0 else -1]
        runs = {name: timed(fn, seeds) for name, fn in order}
        (local_out, rate_l, sec_l), (vllm_out, rate_v, sec_v) = runs["local"], runs["vllm"]
        local_rates.append(rate_l)
        vllm_rates.append(rate_v)
        tokens = sum(len(c) for s in local_out for c in s.completion_ids)
        print(f"run {r}: {args.prompts} x {args.group} x {args.max_new_tokens} = {tokens} tokens; local {sec_l:.1f}s "
              f"= {rate_l:.1f} tok/s; vLLM {sec_v:.1f}s = {rate_v:.1f} tok/s", flush=True)
    diff_vllm = trainer_diff(model, vllm_out, args.temperature)
    diff_local = trainer_diff(model, local_out, args.temperature)
    result = {"local_tokens_per_s": round(statistics.median(local_rates), 2),
              "vllm_tokens_per_s": round(statistics.median(vllm_rates), 2),
              "ratio": round(statistics.median(v / lo for v, lo in zip(vllm_rates, local_rates)), 3),
              "mean_abs_logprob_diff": float(f"{diff_vllm:.3g}"),
              "local_mean_abs_logprob_diff": float(f"{diff_local:.3g}"),
              "paired_ratios": [round(v / lo, 3) for v, lo in zip(vllm_rates, local_rates)]}
    print(f"mean |log-prob - trainer's recomputation|: vLLM {diff_vllm:.2e}, local {diff_local:.2e} nats/token")
    if not args.no_episodes:
        ep_local, ep_vllm, ep_paired, ep_diff = episode_rates(model, tok, local, engine, args)
        result["episodes"] = {"local_tokens_per_s": round(ep_local, 2), "vllm_tokens_per_s": round(ep_vllm, 2),
                              "ratio": round(statistics.median(ep_paired), 3),
                              "paired_ratios": [round(r, 3) for r in ep_paired],
                              "mean_abs_logprob_diff": float(f"{ep_diff:.3g}")}
    load_after = os.getloadavg()
    print(f"load average before {load_before[0]:.2f}, after {load_after[0]:.2f} on {os.cpu_count()} CPUs; "
          f"{args.threads} torch thread(s); T={args.temperature}, top_p={args.top_p}")
    print("RESULT " + json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
