"""Batched vs sequential scoring of 64 prompts x 8 math completions (MATH-500).

The batched path is `rlvr.envs.score_groups` over 64 envs (one `score_batch` call, the
math verifier's worker processes sharing the symbolic checks); the peer is the plain
gymnasium loop, `reset` + `step` once per completion. Both score the same 512
completions: for each problem the gold answer boxed, two rewritten but equivalent forms,
three other problems' answers, an unboxed answer and a hedge. The math verifier caches
symbolic verdicts per process, so the cache is cleared before each timed pass.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import gymnasium as gym

import rlvr.envs  # noqa: F401  (registers the ids)
import rlvr.verifiers.math as math_verifier
from rlvr.envs import score_groups

PROMPTS, GROUP, ROUNDS = 64, 8, 3
DATA = Path(__file__).resolve().parents[1].parent / "shared" / "datasets"


def completions_for(gold: str, others: list[str]) -> list[str]:
    return [
        f"So the answer is $\\boxed{{{gold}}}$.",
        f"<think>check</think> Final: \\boxed{{ {gold} }}",
        f"\\boxed{{\\left({gold}\\right)}}" if "," not in gold else f"\\boxed{{{gold.replace(' ', '')}}}",
        f"\\boxed{{{others[0]}}}",
        f"\\boxed{{{others[1]}}}",
        f"Thus \\boxed{{{others[2]}}}.",
        f"The answer is {gold}.",
        f"\\boxed{{{gold}}} or \\boxed{{{others[0]}}}",
    ]


def main() -> int:
    kwargs = {"path": str(DATA / "math500" / "test.jsonl")} if DATA.is_dir() else {}
    envs = [gym.make("rlvr/MATH500-v0", **kwargs) for _ in range(PROMPTS)]
    golds = []
    for i, env in enumerate(envs):
        env.reset(options={"index": i})
        golds.append(env.unwrapped.task.reference)
    batch = [completions_for(g, [golds[(i + d) % PROMPTS] for d in (1, 7, 13)]) for i, g in enumerate(golds)]
    n = PROMPTS * GROUP

    score_groups(envs, batch)  # start the worker pool (and warm imports) before timing
    batched, sequential = [], []
    for _ in range(ROUNDS):
        math_verifier._cache.clear()
        start = time.perf_counter()
        grouped = score_groups(envs, batch)
        batched.append(time.perf_counter() - start)

        math_verifier._cache.clear()
        start = time.perf_counter()
        stepped = []
        for i, env in enumerate(envs):
            row = []
            for completion in batch[i]:
                env.reset(options={"index": i})
                _, reward, _, _, info = env.step(completion)
                row.append((reward, info))
            stepped.append(row)
        sequential.append(time.perf_counter() - start)
        if [[r for r, _ in row] for row in grouped] != [[r for r, _ in row] for row in stepped]:
            print("batched and sequential rewards differ", file=sys.stderr)
            return 1

    correct = sum(info["correct"] for row in grouped for _, info in row)
    batched_rate, sequential_rate = n / min(batched), n / min(sequential)
    print(f"{PROMPTS} prompts x {GROUP} completions, best of {ROUNDS}; {correct}/{n} scored correct")
    print(f"batched (score_groups): {min(batched):.3f} s, {batched_rate:.0f} completions/s")
    print(f"sequential (step):      {min(sequential):.3f} s, {sequential_rate:.0f} completions/s")
    print(f"speedup: {batched_rate / sequential_rate:.2f}x")
    print("RESULT " + json.dumps({
        "batched_completions_per_s": round(batched_rate, 1),
        "sequential_completions_per_s": round(sequential_rate, 1),
        "speedup": round(batched_rate / sequential_rate, 2),
    }))
    return 0


if __name__ == "__main__":
    sys.exit(main())
