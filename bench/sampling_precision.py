#!/usr/bin/env python
"""Sampling precision on a CPU: the trainer's three ways to sample a step, same run, same inputs.

The `make run` recipe's sampling step (configs/arith-lora-smollm2.yaml: SmolLM2-135M-Instruct with
LoRA rank 16, 8 prompts of 4 completions, its max_new_tokens, temperature and top-p) through the one
episode loop (`rollout.local_rollout`, arithmetic scoring included), in three arms:

- `fp32`: weights packed for oneDNN in fp32, the default (`sample_dtype: fp32`);
- `bf16`: LoRA merged into packed bf16 copies of the linears (`sample_dtype: bf16` on a CPU whose
  oneDNN computes in bf16; norms, attention and the residual stay fp32);
- `autocast`: torch's bf16 autocast over the unpacked model, what a torch user would reach for: the peer.

At `--threads` 1 and 2: one untimed warm-up each, then `--repeats` timed rounds, the arms alternating
within a round and each round with its own seeds (the same for every arm). Reported: the median
seconds a step per arm; the tokens sampled (bf16 changes which tokens are drawn, so the counts
differ); the median of each round's fp32 / arm ratio, a step's and per token (times the arm's tokens
/ fp32's); and, on one thread, each arm's mean |log-prob the sampler gave - the fp32 model's
recomputation| over its tokens (what the loss's importance weights correct; fp32's is the control).
Ends with `RESULT {"threads": [...], "fp32_s": [...], "bf16_s": [...], "autocast_s": [...],
"bf16_speedup": [...], "autocast_speedup": [...], "bf16_speedup_per_token": [...],
"autocast_speedup_per_token": [...], "fp32_logprob_diff": ..., "bf16_logprob_diff": ..., ...}`.

    python bench/sampling_precision.py [--repeats 3] [--threads 1,2]

On a CPU whose oneDNN does not compute in bf16 there is no `bf16` arm (its fields are null): fp32 against
autocast measures why `sample_dtype: bf16` samples in fp32 there (`trainer/devices.py`, `sampling_bf16`).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
ARMS = ("fp32", "bf16", "autocast")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--threads", default="1,2")
    args = parser.parse_args()

    import torch
    from generation import trainer_diff  # bench/generation.py (this script's folder is on the path)

    from rlvr.trainer import lora
    from rlvr.trainer.config import load_config
    from rlvr.trainer.models import load_model
    from rlvr.trainer.packed_weights import can_pack, packed_linears
    from rlvr.trainer.rollout.envs import make_envs
    from rlvr.trainer.rollout.loop import local_rollout
    from rlvr.trainer.rollout.sessions import Sampled

    config = load_config(ROOT / "configs" / "arith-lora-smollm2.yaml")
    model, tokenizer = load_model(config.model)
    model = lora.wrap(model, lora.check_options(config.lora)).eval()
    arms = ARMS if can_pack(model, torch.bfloat16) else ("fp32", "autocast")
    if "bf16" not in arms:
        print("no bf16 arm: this CPU's oneDNN does not compute in bf16 (torch.ops.mkldnn._is_mkldnn_bf16_supported())")
    prompts = config.prompts_per_step
    envs = make_envs(config.env, config.env_kwargs_at(0), prompts)
    rows = prompts * config.group_size
    regions = {"fp32": lambda: packed_linears(model, rows=rows),
               "bf16": lambda: packed_linears(model, rows=rows, dtype=torch.bfloat16),
               "autocast": lambda: torch.autocast("cpu", dtype=torch.bfloat16)}

    def step(arm: str, seed: int):
        start = time.perf_counter()
        with regions[arm](), torch.no_grad():
            groups = local_rollout(model, tokenizer, envs, list(range(prompts)), seed=seed,
                                   group_size=config.group_size, max_new_tokens=config.max_new_tokens,
                                   temperature=config.temperature, top_p=config.top_p)
        return time.perf_counter() - start, groups

    load_before = os.getloadavg()[0]
    result = {"threads": [], **{f"{arm}_s": [] for arm in ARMS}, **{f"{arm}_tokens": [] for arm in ARMS},
              "bf16_speedup": [], "autocast_speedup": [], "bf16_speedup_per_token": [], "autocast_speedup_per_token": []}
    diffs = {arm: [] for arm in arms}
    for threads in [int(t) for t in args.threads.split(",")]:
        torch.set_num_threads(threads)
        for arm in arms:
            step(arm, 10_000)  # warm-up: oneDNN's kernels, the packing's first allocation
        seconds, tokens = {arm: [] for arm in arms}, {arm: 0 for arm in arms}
        for r in range(args.repeats):
            for arm in arms[r % len(arms):] + arms[:r % len(arms)]:  # each arm first in turn
                s, groups = step(arm, r)
                seconds[arm].append(s)
                tokens[arm] += sum(len(c) for g in groups for c in g.completion_ids)
                if threads == 1:  # the same measure as bench/generation.py's, on the loop's groups
                    sampled = [Sampled(g.prompt_ids, g.completion_ids, g.truncated, g.sample_logps) for g in groups]
                    diffs[arm].append(trainer_diff(model, sampled, config.temperature))
        result["threads"].append(threads)
        for arm in ARMS:
            present = arm in arms
            result[f"{arm}_s"].append(round(statistics.median(seconds[arm]), 3) if present else None)
            result[f"{arm}_tokens"].append(round(tokens[arm] / args.repeats, 1) if present else None)
        for arm in ("bf16", "autocast"):
            if arm not in arms:
                result[f"{arm}_speedup"].append(None)
                result[f"{arm}_speedup_per_token"].append(None)
                continue
            ratios = [f / a for f, a in zip(seconds["fp32"], seconds[arm])]
            result[f"{arm}_speedup"].append(round(statistics.median(ratios), 3))
            per_token = result[f"{arm}_speedup"][-1] * tokens[arm] / tokens["fp32"]  # arms draw different tokens
            result[f"{arm}_speedup_per_token"].append(round(per_token, 3))
        print(f"{threads} thread(s): " + ", ".join(f"{arm} {result[f'{arm}_s'][-1]:.2f} s "
                                                    f"({result[f'{arm}_tokens'][-1]:.0f} tokens)" for arm in arms)
              + "; " + ", ".join(f"fp32 / {arm} {result[f'{arm}_speedup'][-1]:.2f}" for arm in arms[1:]), flush=True)
    for arm in ARMS:
        values = diffs.get(arm)
        result[f"{arm}_logprob_diff"] = round(statistics.fmean(values), 5) if values else None
    result.update(load_before=round(load_before, 2), load_after=round(os.getloadavg()[0], 2))
    print("RESULT " + json.dumps(result), flush=True)


if __name__ == "__main__":
    main()
