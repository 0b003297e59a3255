#!/usr/bin/env python
"""Multi-turn rollout throughput vs single-turn sampling, in sampled tokens a second, on two envs.

SmolLM2-135M-Instruct plays whole episodes through the trainer's episode loop (`trainer/rollout/loop.py`)
with the local sampler (one KV cache carried across turns; each env reply is run through it as
one prefill) on
- `selfcheck`: rlvr/MathSelfCheck-v0 (answer, then the env asks for a check: two assistant turns
  and one short env message per episode);
- `tool`: a ToolEnv on products of two 2-digit numbers whose one tool, `table(n)`, returns the
  multiplication table of n clipped to the python tool's 1000-character cap (~830 tokens: a long
  tool output). Pure Python, no Docker. One worked call in the prompt shows the call format;
  an episode is a call and an answer (`max_tool_calls=1`, `max_turns=2`).
The peer is plain single-turn sampling (`trainer/rollout/sampler.sample`) of the same prompts and
group size, with every completion forced to the episodes' mean number of sampled tokens (EOS ignored).
Also measured: the same episodes played turn by turn with the episode's ids encoded again each turn
(the loop's `TurnByTurn` session over the local sampler, as a generator with only `sample` gets), what
a rollout without a carried cache costs.

Like for like, every rate is sampled tokens (the policy's own, the ones trained on) per second of
wall time, the env replies' prefill counted in the episodes' time: `ratio` is the episodes' rate over
single-turn sampling of as many sampled tokens (below 1: what playing an env costs on top of
sampling), `reencode_ratio` the carried cache's rate over re-encoding each turn. `all_tokens_per_s`
also counts the env's tokens (fed as one prefill), which the peer would have to decode: it is no
sampling speed and has no ratio. Medians over `--repeats` runs; each run plays the episodes first and
then the single-turn sampling (its length comes from the episodes), and a ratio is the median of each
run's paired ratio (both measured back to back).
Ends with `RESULT {"selfcheck": {"multiturn_sampled_tokens_per_s": ..., "singleturn_tokens_per_s": ...,
"ratio": ..., "reencode_sampled_tokens_per_s": ..., "reencode_ratio": ...}, "tool": {...}}`.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import sys
import time

TOOL_ENV = "rlvr-bench/LongToolMath-v0"


def table(n: int) -> str:
    """The multiplication table of n, from n x 1 up, to read a product off.

    Args:
        n: the number whose multiples are listed
    """
    from rlvr.envs.python_tool import MAX_OUTPUT_CHARS, clip

    return clip("\n".join(f"{n} x {k} = {n * k}" for k in range(1, 201)), MAX_OUTPUT_CHARS)


class LookUp:
    """The tool env's call format, lenient enough for a 135M model at temperature 1: a turn without a
    \\boxed{} answer asks for the table of the first number it names."""

    def describe(self, schemas) -> str:
        return ("To look a product up, write the number whose multiplication table you need; the table tool "
                "replies with that table. Then give the answer in \\boxed{}.")

    def __call__(self, text: str):
        from rlvr.envs.tool_calls import ParsedTurn, ToolCall

        number = re.search(r"\d{1,6}", text)
        if "\\boxed" in text or number is None:
            return ParsedTurn()
        return ParsedTurn([ToolCall("table", {"n": int(number.group())})])


def register_tool_env() -> None:
    import gymnasium as gym

    from rlvr.envs.tasks_arithmetic import ArithmeticTasks
    from rlvr.envs.tool_env import ToolEnv

    class LongToolMath(ToolEnv):
        """Products of two 2-digit numbers, with one worked look-up before the task."""

        def _prompt_messages(self, task):
            messages = super()._prompt_messages(task)
            demo = [{"role": "user", "content": "Compute 23 * 41. Give the result as an integer in \\boxed{}."},
                    {"role": "assistant", "content": "Looking up the table of 23."},
                    {"role": "tool", "content": table(23)},
                    {"role": "assistant", "content": "23 x 41 = 943, so \\boxed{943}"}]
            return messages[:-1] + demo + messages[-1:]

    if TOOL_ENV not in gym.registry:
        gym.register(TOOL_ENV, entry_point=lambda **kw: LongToolMath(
            ArithmeticTasks(digits=2, ops="*"), tools=[table], parser=LookUp(), max_turns=2, max_tool_calls=1,
            **kw))


def measure(name, env_id, kwargs, model, tok, args) -> dict:
    from rlvr.trainer.rollout.chat import eos_ids
    from rlvr.trainer.rollout.envs import make_envs
    from rlvr.trainer.rollout.groups import prompt_seed
    from rlvr.trainer.rollout.local import LocalGenerator
    from rlvr.trainer.rollout.loop import local_rollout, rollout
    from rlvr.trainer.rollout.sampler import sample
    from rlvr.trainer.rollout.sessions import SamplingSettings

    class Resubmit:  # the local sampler behind `sample` only: each turn encodes the episode's ids again
        sample = LocalGenerator(model, tok.pad_token_id).sample

    n_eps = args.prompts * args.group
    envs = make_envs(env_id, kwargs, n_eps)
    indices = list(range(args.prompts))
    budget = 2 * args.max_new_tokens + (1200 if name == "tool" else 200)
    multi, single, reencode, all_tokens = [], [], [], []
    for r in range(args.repeats):
        t0 = time.perf_counter()
        groups = local_rollout(model, tok, envs, indices, seed=r, group_size=args.group,
                               max_new_tokens=args.max_new_tokens, budget=budget)
        seconds = time.perf_counter() - t0
        tokens = sum(len(c) for g in groups for c in g.completion_ids)
        sampled = sum(sum(w) for g in groups for w in g.weights)
        infos = [i for g in groups for i in g.infos]
        turns = statistics.fmean(i["turns"] for i in infos)
        calls = statistics.fmean(i.get("tool_calls", 0) for i in infos)
        multi.append(sampled / seconds)
        all_tokens.append(tokens / seconds)

        length = round(sampled / n_eps)  # as many sampled tokens, as single-turn completions of one length
        t0 = time.perf_counter()
        out = sample(model, [g.prompt_ids for g in groups], SamplingSettings(n=args.group, max_new_tokens=length),
                     [prompt_seed(r, i) for i in indices], tok.pad_token_id)
        seconds_single = time.perf_counter() - t0
        single.append(sum(len(c) for s in out for c in s.completion_ids) / seconds_single)
        line = (f"{name} run {r}: multi-turn {sampled} sampled tokens ({tokens} with the env's, {turns:.2f} turns and "
                f"{calls:.2f} tool calls/episode) in {seconds:.1f}s = {multi[-1]:.1f} sampled tok/s; single-turn "
                f"{n_eps} x {length} in {seconds_single:.1f}s = {single[-1]:.1f} tok/s")
        if not args.no_reencode:
            settings = SamplingSettings(n=args.group, max_new_tokens=args.max_new_tokens,
                                        stop_token_ids=tuple(eos_ids(tok, model)))
            t0 = time.perf_counter()
            again = rollout(Resubmit(), envs, [{"seed": r + i} for i in indices],
                            [prompt_seed(r, i) for i in indices], settings, tokenizer=tok, budget=budget)
            seconds_re = time.perf_counter() - t0
            re_tokens = sum(sum(w) for g in again for w in g.weights)
            reencode.append(re_tokens / seconds_re)
            line += f"; re-encoding each turn {re_tokens} sampled tokens in {seconds_re:.1f}s = {reencode[-1]:.1f} tok/s"
        print(line, flush=True)
    for env in envs:
        env.close()

    def paired(a: list[float], b: list[float]) -> tuple[float, list[float]]:
        """The median of the runs' paired ratios (each pair measured back to back, under the same load)."""
        ratios = [x / y for x, y in zip(a, b)]
        return round(statistics.median(ratios), 3), [round(x, 3) for x in ratios]

    ratio, ratios = paired(multi, single)
    result = {"multiturn_sampled_tokens_per_s": round(statistics.median(multi), 2),
              "singleturn_tokens_per_s": round(statistics.median(single), 2), "ratio": ratio,
              "paired_ratios": ratios, "all_tokens_per_s": round(statistics.median(all_tokens), 2)}
    if reencode:
        result["reencode_sampled_tokens_per_s"] = round(statistics.median(reencode), 2)
        result["reencode_ratio"], result["reencode_paired_ratios"] = paired(multi, reencode)
    return result

def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--envs", default="selfcheck,tool", help="comma-separated: selfcheck, tool")
    p.add_argument("--prompts", type=int, default=2)
    p.add_argument("--group", type=int, default=4)
    p.add_argument("--max-new-tokens", type=int, default=32, help="per assistant turn")
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--no-reencode", action="store_true", help="skip the re-encoding row")
    args = p.parse_args(argv)
    envs = {"selfcheck": ("rlvr/MathSelfCheck-v0", {"tasks": "arithmetic", "digits": 2}), "tool": (TOOL_ENV, {})}
    names = args.envs.split(",")
    if set(names) - set(envs):
        p.error(f"--envs takes {', '.join(envs)}; got {args.envs!r}")

    import torch

    from rlvr.trainer.models import load_model

    torch.set_num_threads(args.threads)
    register_tool_env()
    model, tok = load_model("smollm2")
    model.eval()
    load_before = os.getloadavg()
    result = {name: measure(name, *envs[name], model, tok, args) for name in names}
    print(f"load average before {load_before[0]:.2f}, after {os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs; "
          f"{args.prompts} prompts x {args.group} episodes, {args.max_new_tokens} tokens per turn, "
          f"{args.threads} thread(s)")
    print("RESULT " + json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
