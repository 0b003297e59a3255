"""The env catalogue: import time, reset+score throughput per family, batched math scoring.

1. Import: `import rlvr.envs` in a fresh interpreter registers the whole catalogue (every
   reasoning-gym dataset lazily, by entry-point string); the peer is `import reasoning_gym`,
   which eager registration would add, and `import gymnasium` (most of rlvr.envs' own
   import) is shown beside it. Median of 5 fresh interpreters each.
2. Per family of reasoning-gym envs: `reset` + `step` with the boxed gold answer on the
   first items of every env of the family (items/s, generation included; the scorer runs
   in rlvr's scoring worker); the peer is the same items straight from reasoning-gym
   (`dataset[i]` + `score_answer(gold, entry)` in-process). sympy's cache is cleared before
   each pass. Then scoring alone: `score_group` of 8 boxed completions of each item (one
   exchange with the worker) against 8 `score_answer` calls.
3. Batched vs sequential scoring of 64 prompts x 8 math completions (MATH-500): the batched
   path is `rlvr.envs.score_groups` over 64 envs (one `score_batch` call, the math
   verifier's worker processes sharing the symbolic checks); the peer is the plain
   gymnasium loop, `reset` + `step` once per completion. Both score the same 512
   completions: for each problem the gold answer boxed, two rewritten but equivalent forms,
   three other problems' answers, an unboxed answer and a hedge. The math verifier caches
   symbolic verdicts per process, so the cache is cleared before each timed pass. Each round
   times both arms back to back (the order alternating); the figures are medians of the rounds
   and the speedup is the median of each round's own ratio.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import time
from collections import defaultdict
from pathlib import Path

import gymnasium as gym

import rlvr.envs  # noqa: F401  (registers the ids)
import rlvr.verifiers.math as math_verifier
from rlvr.envs import score_groups
from rlvr.envs import tasks_reasoning_gym as rg
from rlvr.registry import env_entries

PROMPTS, GROUP, ROUNDS = 64, 8, 21  # a pass takes ~50 ms: many rounds for a stable median
IMPORTS, ITEMS = 5, 4  # fresh interpreters per import timing; items per reasoning-gym env
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


def import_seconds(module: str) -> tuple[float, float]:
    """Median (wall, CPU) seconds of importing `module` in a fresh interpreter (start-up excluded).

    CPU time is what the import itself costs; wall time also counts waiting for a busy CPU.
    """
    code = (f"import time; t, c = time.perf_counter(), time.process_time(); import {module}; "
            f"print(time.perf_counter() - t, time.process_time() - c)")
    runs = [subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                           env={**os.environ, "PYTHONWARNINGS": "ignore"}).stdout.split() for _ in range(IMPORTS)]
    return statistics.median(float(w) for w, _ in runs), statistics.median(float(c) for _, c in runs)


def family_throughput() -> dict[str, dict[str, float]]:
    """Per family: rlvr's reset+step items/s and score_group completions/s, and the peer's."""
    from reasoning_gym.factory import create_dataset
    from sympy.core.cache import clear_cache  # some generators run sympy: neither pass may reuse the other's

    seconds: dict[str, dict[str, float]] = defaultdict(lambda: defaultdict(float))
    items: dict[str, int] = defaultdict(int)
    for name, (family, _) in rg.DATASETS.items():
        env = gym.make(rg.env_id(name))  # building the dataset (and the scorer's) is left out of the timings
        env.reset(options={"index": ITEMS})
        env.step("\\boxed{warm-up}")
        dataset = create_dataset(name, seed=0, size=env.unwrapped.source.items)
        time_ = seconds[family]
        clear_cache()
        start = time.perf_counter()
        for i in range(ITEMS):
            env.reset(options={"index": i})
            env.step(rg.box_answer(env.unwrapped.task.reference or "none"))
        time_["step"] += time.perf_counter() - start
        clear_cache()
        start = time.perf_counter()
        for i in range(ITEMS):
            entry = dataset[i]
            dataset.score_answer(rg.gold_answer(entry), entry)
        time_["peer_step"] += time.perf_counter() - start
        for i in range(ITEMS):  # G completions of items already made: scoring alone
            env.reset(options={"index": i})
            entry, gold = env.unwrapped.task.fields["entry"], env.unwrapped.task.reference or "none"
            start = time.perf_counter()
            env.unwrapped.score_group([rg.box_answer(gold)] * GROUP)
            time_["group"] += time.perf_counter() - start
            start = time.perf_counter()
            for _ in range(GROUP):
                dataset.score_answer(gold, entry)
            time_["peer_group"] += time.perf_counter() - start
        items[family] += ITEMS
    return {f: {"items_per_s": items[f] / t["step"], "peer_items_per_s": items[f] / t["peer_step"],
                "completions_per_s": items[f] * GROUP / t["group"],
                "peer_completions_per_s": items[f] * GROUP / t["peer_group"]}
            for f, t in sorted(seconds.items())}


def main() -> int:
    env_ids = len(env_entries())
    (import_s, import_cpu_s), (peer_import_s, peer_cpu_s) = import_seconds("rlvr.envs"), import_seconds("reasoning_gym")
    gymnasium_s, gymnasium_cpu_s = import_seconds("gymnasium")
    print(f"load: {os.getloadavg()[0]:.2f} (1-min average)")
    print(f"import rlvr.envs ({env_ids} env ids, lazily): {import_s:.3f} s wall, {import_cpu_s:.3f} s CPU, "
          f"median of {IMPORTS} (gymnasium alone: {gymnasium_s:.3f} s wall, {gymnasium_cpu_s:.3f} s CPU); "
          f"import reasoning_gym (what eager registration adds): {peer_import_s:.3f} s wall, {peer_cpu_s:.3f} s CPU")
    families = family_throughput()
    print(f"first {ITEMS} items of each reasoning-gym env: reset + step of the boxed gold (items/s, generation "
          f"included), and score_group of {GROUP} completions (completions/s); peer: reasoning-gym alone")
    for family, r in families.items():
        print(f"  {family:<12} items/s {r['items_per_s']:8.1f} vs {r['peer_items_per_s']:8.1f} "
              f"({r['items_per_s'] / r['peer_items_per_s']:.2f}x)   completions/s {r['completions_per_s']:8.1f} "
              f"vs {r['peer_completions_per_s']:8.1f} ({r['completions_per_s'] / r['peer_completions_per_s']:.2f}x)")

    kwargs = {"path": str(DATA / "math500" / "test.jsonl")} if DATA.is_dir() else {}
    envs = [gym.make("rlvr/MATH500-v0", **kwargs) for _ in range(PROMPTS)]
    golds = []
    for i, env in enumerate(envs):
        env.reset(options={"index": i})
        golds.append(env.unwrapped.task.reference)
    batch = [completions_for(g, [golds[(i + d) % PROMPTS] for d in (1, 7, 13)]) for i, g in enumerate(golds)]
    n = PROMPTS * GROUP

    score_groups(envs, batch)  # start the worker pool (and warm imports) before timing
    def batched_pass() -> tuple[float, list]:
        math_verifier._cache.clear()
        start = time.perf_counter()
        grouped = score_groups(envs, batch)
        return time.perf_counter() - start, grouped

    def sequential_pass() -> tuple[float, list]:
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
        return time.perf_counter() - start, stepped

    batched, sequential = [], []
    for round_ in range(ROUNDS):
        if round_ % 2:
            (s_time, stepped), (b_time, grouped) = sequential_pass(), batched_pass()
        else:
            (b_time, grouped), (s_time, stepped) = batched_pass(), sequential_pass()
        batched.append(b_time)
        sequential.append(s_time)
        if [[r for r, _ in row] for row in grouped] != [[r for r, _ in row] for row in stepped]:
            print("batched and sequential rewards differ", file=sys.stderr)
            return 1

    correct = sum(info["correct"] for row in grouped for _, info in row)
    batched_s, sequential_s = statistics.median(batched), statistics.median(sequential)
    batched_rate, sequential_rate = n / batched_s, n / sequential_s
    speedup = statistics.median(s / b for b, s in zip(batched, sequential))
    print(f"{PROMPTS} prompts x {GROUP} completions, median of {ROUNDS} paired rounds; {correct}/{n} scored correct")
    print(f"batched (score_groups): {batched_s:.3f} s, {batched_rate:.0f} completions/s")
    print(f"sequential (step):      {sequential_s:.3f} s, {sequential_rate:.0f} completions/s")
    print(f"speedup: {speedup:.2f}x (median of the rounds' ratios: "
          f"{', '.join(f'{s / b:.2f}' for b, s in zip(batched, sequential))})")
    print("RESULT " + json.dumps({
        "env_ids": env_ids,
        "import_s": round(import_s, 3),
        "import_cpu_s": round(import_cpu_s, 3),
        "peer_import_s": round(peer_import_s, 3),
        "peer_import_cpu_s": round(peer_cpu_s, 3),
        "gymnasium_import_s": round(gymnasium_s, 3),
        "gymnasium_import_cpu_s": round(gymnasium_cpu_s, 3),
        **{f"family_{key}": {f: round(r[key], 1) for f, r in families.items()}
           for key in ("items_per_s", "peer_items_per_s", "completions_per_s", "peer_completions_per_s")},
        "batched_completions_per_s": round(batched_rate, 1),
        "sequential_completions_per_s": round(sequential_rate, 1),
        "speedup": round(speedup, 2),
        "load_avg": round(os.getloadavg()[0], 2),
    }))
    return 0


if __name__ == "__main__":
    sys.exit(main())
