#!/usr/bin/env python
"""Multi-turn rollout throughput vs single-turn sampling of the same number of tokens.

SmolLM2-135M-Instruct plays whole episodes of rlvr/MathSelfCheck-v0 (answer, then the env asks
for a check: two assistant turns and one env message per episode) with the trainer's episode
sampler (`trainer/episodes.py`: one KV cache carried across turns, env tokens fed through it).
The peer is plain single-turn sampling (`trainer/generation.sample`) of the same prompts and
group size, with every completion forced to the episodes' mean length (EOS ignored), so both
process the same number of tokens after the prompt. Also measured: the same episodes played
turn by turn with the conversation re-encoded each turn (`rlvr.evaluate.run_episodes` over the
trainer's `generate`), what a rollout without a carried cache costs.

Tokens counted: every token after the prompt (sampled and env). Medians over `--repeats` runs,
alternating; the ratio is the median of each run's paired ratio (both measured back to back). Ends with
`RESULT {"multiturn_tokens_per_s": ..., "singleturn_tokens_per_s": ..., "ratio": ...}`.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--prompts", type=int, default=4)
    p.add_argument("--group", type=int, default=4)
    p.add_argument("--max-new-tokens", type=int, default=48, help="per assistant turn")
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--no-reencode", action="store_true", help="skip the re-encoding row")
    args = p.parse_args(argv)

    import torch

    from rlvr.evaluate import model_policy, run_episodes
    from rlvr.trainer.episodes import rollout_episodes
    from rlvr.trainer.generation import sample
    from rlvr.trainer.groups import make_envs, prompt_generator
    from rlvr.trainer.models import load_model

    torch.set_num_threads(args.threads)
    model, tok = load_model("smollm2")
    model.eval()
    env_id, kwargs = "rlvr/MathSelfCheck-v0", {"tasks": "arithmetic", "digits": 2}
    n_eps = args.prompts * args.group
    envs = make_envs(env_id, kwargs, n_eps)
    indices = list(range(args.prompts))
    load_before = os.getloadavg()
    multi, single, reencode, multi_sampled = [], [], [], []
    for r in range(args.repeats):
        t0 = time.perf_counter()
        groups = rollout_episodes(model, tok, envs, indices, seed=r, group_size=args.group,
                                  max_new_tokens=args.max_new_tokens, max_episode_tokens=4 * args.max_new_tokens + 200)
        seconds = time.perf_counter() - t0
        tokens = sum(len(c) for g in groups for c in g.completion_ids)
        sampled = sum(sum(w) for g in groups for w in g.weights)
        turns = statistics.fmean(i["turns"] for g in groups for i in g.infos)
        multi.append(tokens / seconds)
        multi_sampled.append(sampled / seconds)

        length = round(tokens / n_eps)  # the same total, as single-turn completions of one fixed length
        t0 = time.perf_counter()
        out = sample(model, [g.prompt_ids for g in groups], n=args.group, max_new_tokens=length,
                     generators=[prompt_generator(r, i) for i in indices], eos_token_ids=(),
                     pad_token_id=tok.pad_token_id)
        seconds_single = time.perf_counter() - t0
        single.append(sum(len(c) for s in out for c in s.completion_ids) / seconds_single)
        line = (f"run {r}: multi-turn {tokens} tokens ({sampled} sampled, {turns:.2f} turns/episode) in "
                f"{seconds:.1f}s = {multi[-1]:.1f} tok/s; single-turn {n_eps} x {length} in {seconds_single:.1f}s "
                f"= {single[-1]:.1f} tok/s")
        if not args.no_reencode:
            policy = model_policy(model, tok, max_new_tokens=args.max_new_tokens, temperature=1.0, seed=r)
            t0 = time.perf_counter()
            transcripts, _ = run_episodes(envs, policy, args.group, 0, args.prompts)
            seconds_re = time.perf_counter() - t0
            texts = [t for group in transcripts for t in group]
            re_tokens = sum(len(tok(t, add_special_tokens=False)["input_ids"]) for t in texts)
            reencode.append(re_tokens / seconds_re)
            line += f"; re-encoding each turn {re_tokens} sampled tokens in {seconds_re:.1f}s = {reencode[-1]:.1f} tok/s"
        print(line, flush=True)
    for env in envs:
        env.close()
    m, s = statistics.median(multi), statistics.median(single)
    print(f"load average before {load_before[0]:.2f}, after {os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs; "
          f"{args.prompts} prompts x {args.group} episodes, {args.threads} thread(s)")
    # ratio: the median of the runs' paired ratios (each pair measured back to back, under the same load)
    ratio = statistics.median(a / b for a, b in zip(multi, single))
    result = {"multiturn_tokens_per_s": round(m, 2), "singleturn_tokens_per_s": round(s, 2), "ratio": round(ratio, 3)}
    if reencode:  # sampled tokens only: with the cache carried vs the conversation re-encoded each turn
        result["multiturn_sampled_tokens_per_s"] = round(statistics.median(multi_sampled), 2)
        result["reencode_sampled_tokens_per_s"] = round(statistics.median(reencode), 2)
    print("RESULT " + json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
