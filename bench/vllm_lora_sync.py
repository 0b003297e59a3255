#!/usr/bin/env python
"""LoRA runs with vLLM: merged-weight sync against vLLM's LoRA adapters, same run, same steps.

A LoRA training step changes only the adapters. The vLLM generator can follow it in two ways:
- `merged`: send W + scale * B A for every adapted layer (`VLLMGenerator.sync_weights`, from
  memory) and sample with a plain engine;
- `adapter`: save the adapters (peft's `save_pretrained`, a few MB) and sample with an engine built
  with `enable_lora`, passing a new `LoRARequest` each step (the old one removed).
Each mode runs in its own process (one engine per process), on the same model (SmolLM2-135M, LoRA
rank 16, all linear layers), the same AdamW steps and the same sampling (`--prompts` x `--group` x
`--max-new-tokens`, EOS ignored). Per step: the sync's seconds and the sampling's seconds. After the
last step, the largest |engine log-prob - trainer log-prob| of a fixed completion: both ways must
sample from the trainer's model. Ends with `RESULT {"merged": {...}, "adapter": {...},
"adapter_over_merged": ...}`, the ratio of median (sync + sample) seconds per step.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time


def child(args) -> dict:
    import torch

    from rlvr.trainer.logprobs import group_logprobs
    from rlvr.trainer.lora import check_options, wrap
    from rlvr.trainer.models import load_model
    from rlvr.trainer.rollout.chat import encode_chats
    from rlvr.trainer.rollout.sessions import SamplingSettings
    from rlvr.trainer.vllm_generator import VLLMGenerator

    torch.set_num_threads(args.threads)
    model, tok = load_model("smollm2")
    lora = wrap(model, check_options({"rank": args.rank, "alpha": 2 * args.rank}))
    prompts = encode_chats(tok, [[{"role": "user", "content": f"What is {17 * i + 12} + {29 * i + 7}?"}]
                                 for i in range(args.prompts)])
    settings = SamplingSettings(n=args.group, max_new_tokens=args.max_new_tokens)
    adapter_dir = tempfile.mkdtemp(prefix="rlvr-lora-")
    extra = ({"enable_lora": True, "max_lora_rank": args.rank, "max_loras": 1} if args.mode == "adapter" else {})
    gen = VLLMGenerator(lora, tok, max_model_len=512, kv_cache_gib=0.5, **extra)  # B = 0: the base model
    current = []
    if args.mode == "adapter":
        from vllm.lora.request import LoRARequest

        generate = gen.llm.generate
        gen.llm.generate = lambda *a, **kw: generate(*a, lora_request=current[-1], **kw)

    def sync(step: int) -> None:
        if args.mode == "merged":
            gen.sync_weights(lora)
            return
        lora.save_pretrained(adapter_dir)
        if current:
            gen.llm.llm_engine.remove_lora(current[-1].lora_int_id)
        current.append(LoRARequest(f"step{step}", step + 1, adapter_dir))

    optimizer = torch.optim.AdamW([p for p in lora.parameters() if p.requires_grad], lr=1e-3)
    sync(0)
    target = gen.sample(prompts[:1], SamplingSettings(n=1, max_new_tokens=24), [99])[0].completion_ids[0]
    rows = []
    for step in range(1, args.steps + 1):
        ids = torch.tensor([target])
        (-group_logprobs(lora, torch.tensor(prompts[0]), ids, torch.ones(ids.shape))[0].sum()).backward()
        optimizer.step()
        optimizer.zero_grad()
        t0 = time.perf_counter()
        sync(step)
        t1 = time.perf_counter()
        out = gen.sample(prompts, settings, [step * 100 + i for i in range(args.prompts)])
        t2 = time.perf_counter()
        rows.append({"sync_s": t1 - t0, "sample_s": t2 - t1,
                     "tokens": sum(len(c) for s in out for c in s.completion_ids)})
        print(f"{args.mode} step {step}: sync {t1 - t0:.2f}s, sample {rows[-1]['tokens']} tokens {t2 - t1:.2f}s",
              file=sys.stderr, flush=True)
    with torch.no_grad():
        ids = torch.tensor([target])
        trainer = group_logprobs(lora, torch.tensor(prompts[0]), ids, torch.ones(ids.shape))[0][0].tolist()
    engine = gen.score(prompts[0], target)
    return {"sync_s": statistics.median(r["sync_s"] for r in rows),
            "sample_s": statistics.median(r["sample_s"] for r in rows),
            "tokens": rows[-1]["tokens"], "steps": rows,
            "max_abs_logprob_diff": max(abs(a - b) for a, b in zip(engine, trainer))}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--steps", type=int, default=3)
    p.add_argument("--prompts", type=int, default=4)
    p.add_argument("--group", type=int, default=8)
    p.add_argument("--max-new-tokens", type=int, default=32)
    p.add_argument("--rank", type=int, default=16)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--mode", choices=["merged", "adapter"], help="run one mode in this process (internal)")
    args = p.parse_args(argv)
    if importlib.util.find_spec("vllm") is None:
        print("SKIP: vllm is not installed in this environment; `make install-vllm`, then "
              ".venv-vllm/bin/python bench/vllm_lora_sync.py")
        print("RESULT " + json.dumps({"skipped": "vllm is not installed"}))
        return 0
    if args.mode:
        print("CHILD " + json.dumps(child(args)))  # vLLM logs to stdout too
        return 0
    load_before = os.getloadavg()
    result = {}
    for mode in ("merged", "adapter"):
        argv_child = [sys.executable, __file__, "--mode", mode] + [
            f"--{k.replace('_', '-')}={v}" for k, v in vars(args).items() if k != "mode"]
        done = subprocess.run(argv_child, stdout=subprocess.PIPE, text=True, check=True)
        result[mode] = json.loads(next(line[6:] for line in done.stdout.splitlines() if line.startswith("CHILD ")))
        r = result[mode]
        print(f"{mode}: median sync {r['sync_s']:.2f}s, sample {r['tokens']} tokens {r['sample_s']:.2f}s; "
              f"engine vs trainer after {args.steps} steps: max {r['max_abs_logprob_diff']:.1e} nats", flush=True)
    total = {m: result[m]["sync_s"] + result[m]["sample_s"] for m in result}
    result["adapter_over_merged"] = round(total["adapter"] / total["merged"], 3)
    print(f"load average before {load_before[0]:.2f}, after {os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs; "
          f"{args.threads} torch thread(s)")
    for m in ("merged", "adapter"):
        result[m] = {k: (round(v, 6) if isinstance(v, float) else v) for k, v in result[m].items() if k != "steps"}
    print("RESULT " + json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
