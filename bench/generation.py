#!/usr/bin/env python
"""Sampling throughput: the local KV-cache sampler against the in-process vLLM engine, same run.

Both generators (`trainer/generator.LocalGenerator`, `trainer/vllm_generator.VLLMGenerator`) sample
the same prompts (chat arithmetic questions) with the same model (SmolLM2-135M-Instruct, fp32),
group size, temperature, top-p and per-prompt seeds; no stop ids, so every completion runs to
`--max-new-tokens` and both produce the same number of tokens. The local sampler runs as training
runs it (inside `packed_linears`); both run on the same `--threads` torch threads (the vLLM
generator keeps the process's thread count). One untimed warm-up call each, then `--repeats`
timed calls, alternating; the ratio is the median of each pair's vLLM / local ratio.

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
    args = p.parse_args(argv)
    if importlib.util.find_spec("vllm") is None:
        print("SKIP: vllm is not installed in this environment; `make install-vllm`, then "
              ".venv-vllm/bin/python bench/generation.py")
        print("RESULT " + json.dumps({"skipped": "vllm is not installed"}))
        return 0

    import torch

    from rlvr.trainer.generation import encode_chats
    from rlvr.trainer.generator import LocalGenerator, SamplingSettings
    from rlvr.trainer.models import load_model
    from rlvr.trainer.packed_weights import packed_linears
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
    engine = VLLMGenerator(model, tok, max_model_len=max(map(len, prompts)) + args.max_new_tokens,
                           kv_cache_gib=args.kv_cache_gib)
    print(f"vLLM engine built in {time.perf_counter() - t0:.1f}s; torch threads {torch.get_num_threads()}",
          flush=True)
    local = LocalGenerator(model, tok.pad_token_id)

    def run_local(seeds):
        with packed_linears(model, rows=args.prompts * args.group):
            return local.sample(prompts, settings, seeds)

    def timed(fn, seeds):
        start = time.perf_counter()
        out = fn(seeds)
        seconds = time.perf_counter() - start
        return out, sum(len(c) for s in out for c in s.completion_ids) / seconds, seconds

    run_local([10_000 + i for i in range(args.prompts)])  # warm-up, untimed
    engine.sample(prompts, settings, [10_000 + i for i in range(args.prompts)])
    local_rates, vllm_rates = [], []
    for r in range(args.repeats):
        seeds = [r * args.prompts + i for i in range(args.prompts)]
        order = [("local", run_local), ("vllm", engine.sample)][::1 if r % 2 == 0 else -1]
        runs = {name: timed(fn, seeds) for name, fn in order}
        (local_out, rate_l, sec_l), (vllm_out, rate_v, sec_v) = runs["local"], runs["vllm"]
        local_rates.append(rate_l)
        vllm_rates.append(rate_v)
        tokens = sum(len(c) for s in local_out for c in s.completion_ids)
        print(f"run {r}: {args.prompts} x {args.group} x {args.max_new_tokens} = {tokens} tokens; local {sec_l:.1f}s "
              f"= {rate_l:.1f} tok/s; vLLM {sec_v:.1f}s = {rate_v:.1f} tok/s", flush=True)
    diff_vllm = trainer_diff(model, vllm_out, args.temperature)
    diff_local = trainer_diff(model, local_out, args.temperature)
    load_after = os.getloadavg()
    print(f"mean |log-prob - trainer's recomputation|: vLLM {diff_vllm:.2e}, local {diff_local:.2e} nats/token")
    print(f"load average before {load_before[0]:.2f}, after {load_after[0]:.2f} on {os.cpu_count()} CPUs; "
          f"{args.threads} torch thread(s); T={args.temperature}, top_p={args.top_p}")
    result = {"local_tokens_per_s": round(statistics.median(local_rates), 2),
              "vllm_tokens_per_s": round(statistics.median(vllm_rates), 2),
              "ratio": round(statistics.median(v / lo for v, lo in zip(vllm_rates, local_rates)), 3),
              "mean_abs_logprob_diff": float(f"{diff_vllm:.3g}"),
              "local_mean_abs_logprob_diff": float(f"{diff_local:.3g}"),
              "paired_ratios": [round(v / lo, 3) for v, lo in zip(vllm_rates, local_rates)]}
    print("RESULT " + json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
