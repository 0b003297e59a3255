#!/usr/bin/env python
"""Reward scoring on a Ray cluster (1 and 2 local nodes) against the in-process path, same inputs.

Inputs are real public data: MATH-500 (each problem's own solution as the completion, and for
every other item a different problem's solution, so about half are wrong) for the math
verifier, and MBPP (reference solutions, every third one swapped with another problem's) run
in the Docker sandbox for the code verifier. Each arm scores the same batches once to warm up
(worker processes, containers), then `--rounds` times timed (the median round is reported):
- local: `verifier.score_batch` in this process (the default path);
- ray_1node: `RayScorer` on a fresh one-node cluster started here (`ray start --head`);
- ray_2node: `RayScorer` on a fresh two-node cluster (`ray start --head` + `ray start --address`).
Every arm gets the same total pool: `--pool-size` sandbox containers and `--math-workers` math
processes, split evenly over the nodes. All nodes share this machine's CPUs, so a second node
brings no compute: what the Ray arms show is the per-item overhead of going through Ray
(`*_overhead_ms_per_item`), which a cluster of real machines pays too.

Delivery is counted from the receipts the workers return with each chunk (`last["receipts"]`):
over every pass (warm-up and timed), each item's result must reach the caller exactly once
(`delivered_once` of `delivery_expected`, with `duplicates` and `omitted`).

    python bench/ray_scoring.py [--math 500] [--code 120] [--pool-size 2] [--math-workers 2] [--rounds 3]
Ends with `RESULT {"local_items_per_s": ..., "ray_1node_items_per_s": ..., "ray_2node_items_per_s": ...,
"delivered_once": ..., ...}` (items of both kinds together; per-kind figures beside them).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import sys
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DATASETS = ROOT.parent / "shared" / "datasets"


def math_items(n: int):
    rows = [json.loads(x) for x in (DATASETS / "math500" / "test.jsonl").read_text().splitlines() if x][:n]
    completions = [rows[i if i % 2 == 0 else (i + 1) % len(rows)]["solution"] for i in range(len(rows))]
    return completions, [r["answer"] for r in rows], [{"question": r["problem"]} for r in rows]


def code_items(n: int):
    rows = [json.loads(x) for x in (DATASETS / "mbpp" / "mbpp.jsonl").read_text().splitlines() if x][:n]
    completions, fields = [], []
    for i, r in enumerate(rows):
        code = rows[(i + 1) % len(rows)]["code"] if i % 3 == 2 else r["code"]
        completions.append(f"```python\n{code}\n```")
        fields.append({"test_list": r["test_list"], "test_setup_code": r["test_setup_code"],
                       "entry_point": re.search(r"assert\W*(\w+)", r["test_list"][0]).group(1)})
    return completions, [None] * len(rows), fields


def timed(score, batches, rounds: int) -> tuple[list[float], list]:
    """The median round's seconds per batch (after one warm-up pass), and the last round's scores."""
    for verifier, items in batches:
        score(verifier, *items)
    totals, per_batch, out = [], [], []
    for _ in range(rounds):
        seconds, out = [], []
        for verifier, items in batches:
            start = time.perf_counter()
            out.append(score(verifier, *items))
            seconds.append(time.perf_counter() - start)
        totals.append(sum(seconds))
        per_batch.append(seconds)
    return per_batch[totals.index(statistics.median_low(totals))], out


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--math", type=int, default=500, help="MATH-500 items")
    p.add_argument("--code", type=int, default=120, help="MBPP items (Docker sandbox)")
    p.add_argument("--pool-size", type=int, default=2, help="sandbox containers in all, in every arm (even)")
    p.add_argument("--math-workers", type=int, default=2, help="math worker processes in all, in every arm (even)")
    p.add_argument("--rounds", type=int, default=3, help="timed rounds per arm (the median is reported)")
    args = p.parse_args(argv)
    if args.pool_size % 2 or args.math_workers % 2 or min(args.pool_size, args.math_workers) < 2:
        p.error("--pool-size and --math-workers must be even and at least 2 (split over two nodes)")
    if not DATASETS.exists():
        print(f"datasets not found under {DATASETS}", file=sys.stderr)
        return 1
    import ray

    sys.path.insert(0, str(ROOT / "tests"))
    from local_ray_cluster import LocalRayCluster

    from rlvr.ray_scoring import RayScorer
    from rlvr.registry import make_verifier

    def batches_for(nodes: int):
        """The two batches, with verifiers whose pools, per node, add up to the same totals."""
        math_v = make_verifier("math", workers=args.math_workers // nodes)
        code_v = make_verifier("code", pool_size=args.pool_size // nodes)
        return [(math_v, math_items(args.math)), (code_v, code_items(args.code))]

    batches = batches_for(1)
    sizes = [len(items[0]) for _, items in batches]
    total = sum(sizes)

    def local_score(verifier, completions, references, fields):
        return verifier.score_batch(completions, references, fields)

    rows, loads = {}, {"local": round(os.getloadavg()[0], 2)}
    rows["local"] = timed(local_score, batches, args.rounds)
    local_out = rows["local"][1]
    errors = sum(s.reason == "error" for out in local_out for s in out)
    deliveries: Counter = Counter()

    def ray_arm(name: str, nodes: int):
        """Timed scoring on a fresh cluster of `nodes` nodes; each batch's delivery counted from its receipts."""
        with LocalRayCluster(nodes=nodes, cpus_per_node=1) as cluster:
            ray.init(address=cluster.address, include_dashboard=False, log_to_driver=False)
            try:
                scorer = RayScorer()
                assert len(scorer.nodes()) == nodes
                loads[name] = round(os.getloadavg()[0], 2)

                def score(verifier, completions, *rest):
                    out = scorer.score_batch(verifier, completions, *rest)
                    counts = Counter(item for r in scorer.last["receipts"] for item in r["items"])
                    deliveries["expected"] += len(completions)
                    deliveries["once"] += sum(counts[i] == 1 for i in range(len(completions)))
                    deliveries["duplicates"] += sum(c - 1 for c in counts.values() if c > 1)
                    deliveries["omitted"] += sum(counts[i] == 0 for i in range(len(completions)))
                    return out

                rows[name] = timed(score, batches_for(nodes), args.rounds)
                print(f"{name}: {nodes} node(s), {sum(rows[name][0]):.2f} s, per node (last batch) "
                      f"{scorer.last['per_node']}")
            finally:
                ray.shutdown()

    ray_arm("ray_1node", 1)
    ray_arm("ray_2node", 2)
    result = {"items": total, "math_items": sizes[0], "code_items": sizes[1], "pool_size": args.pool_size,
              "math_workers": args.math_workers, "rounds": args.rounds}
    for name, (seconds, out) in rows.items():
        if [[s.value for s in o] for o in out] != [[s.value for s in o] for o in local_out]:
            raise SystemExit(f"{name}: scores differ from local scoring")
        result[f"{name}_items_per_s"] = round(total / sum(seconds), 1)
        for kind, n, sec in zip(("math", "code"), sizes, seconds):
            result[f"{name}_{kind}_items_per_s"] = round(n / sec, 1)
    local = rows["local"][0]
    for name in ("ray_1node", "ray_2node"):
        seconds = rows[name][0]
        result[f"{name}_vs_local"] = round(sum(local) / sum(seconds), 3)
        result[f"{name}_overhead_ms_per_item"] = round(1000 * (sum(seconds) - sum(local)) / total, 2)
        for kind, n, sec, base in zip(("math", "code"), sizes, seconds, local):
            result[f"{name}_{kind}_overhead_ms_per_item"] = round(1000 * (sec - base) / n, 2)
    result.update({"delivered_once": deliveries["once"], "delivery_expected": deliveries["expected"],
                   "duplicates": deliveries["duplicates"], "omitted": deliveries["omitted"],
                   "local_infrastructure_errors": errors,
                   "math_correct_frac": round(sum(s.value for s in local_out[0]) / sizes[0], 3),
                   "code_mean_score": round(sum(s.value for s in local_out[1]) / sizes[1], 3),
                   "load_avg_at_start": loads, "load_avg_after": round(os.getloadavg()[0], 2),
                   "cpus": os.cpu_count()})
    print(f"local {sum(local):.2f} s for {total} items ({sizes[0]} math, {sizes[1]} code); "
          f"load average {loads} -> {os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs")
    print("RESULT " + json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
