#!/usr/bin/env python
"""Reward scoring on a Ray cluster (1 and 2 local nodes) against the in-process path, same inputs.

Inputs are real public data: MATH-500 (each problem's own solution as the completion, and for
every other item a different problem's solution, so about half are wrong) for the math
verifier, and MBPP (reference solutions, every third one swapped with another problem's) run
in the Docker sandbox for the code verifier. Each path scores the same batches once to warm
up (worker processes, containers), then once timed:
- local: `verifier.score_batch` in this process (the default path);
- ray 1 node: `RayScorer` on a cluster of one node started here (`ray start --head`);
- ray 2 nodes: the same cluster after a second node joins (`ray start --address`).
All nodes share this machine's CPUs, so two nodes cannot be faster than one here: the figure
is the per-item overhead of going through Ray, which a real second machine would pay too.

    python bench/ray_scoring.py [--math 500] [--code 120]
Ends with `RESULT {"local_items_per_s": ..., "ray_1node_items_per_s": ..., "ray_2node_items_per_s": ...,
"lost": 0, ...}` (items of both kinds together; per-kind figures beside them).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import time
from pathlib import Path

DATASETS = Path(__file__).resolve().parents[1].parent / "shared" / "datasets"


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


def timed(score, batches) -> tuple[list[float], list]:
    """Seconds to score each batch (after one warm-up pass), and the scores."""
    for verifier, items in batches:
        score(verifier, *items)
    seconds, out = [], []
    for verifier, items in batches:
        start = time.perf_counter()
        out.append(score(verifier, *items))
        seconds.append(time.perf_counter() - start)
    return seconds, out


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--math", type=int, default=500, help="MATH-500 items")
    p.add_argument("--code", type=int, default=120, help="MBPP items (Docker sandbox)")
    p.add_argument("--pool-size", type=int, default=2, help="sandbox containers per node (and locally)")
    p.add_argument("--port", type=int, default=6395)
    args = p.parse_args(argv)
    if not DATASETS.exists():
        print(f"datasets not found under {DATASETS}", file=sys.stderr)
        return 1
    import ray

    from rlvr.ray_cluster import LocalCluster
    from rlvr.ray_scoring import RayScorer
    from rlvr.registry import make_verifier

    math_v, code_v = make_verifier("math"), make_verifier("code", pool_size=args.pool_size)
    batches = [(math_v, math_items(args.math)), (code_v, code_items(args.code))]
    sizes = [len(items[0]) for _, items in batches]
    total = sum(sizes)
    load = os.getloadavg()

    def local_score(verifier, completions, references, fields):
        return verifier.score_batch(completions, references, fields)

    rows = {}
    local_s, local_out = timed(local_score, batches)
    errors = sum(s.reason == "error" for out in local_out for s in out)
    rows["local"] = (local_s, local_out)
    with LocalCluster(nodes=1, cpus_per_node=1, port=args.port) as cluster:
        ray.init(address=cluster.address, include_dashboard=False, log_to_driver=False)
        try:
            scorer = RayScorer()
            lost = 0
            for name in ("ray_1node", "ray_2node"):
                if name == "ray_2node":
                    cluster.add_node(1)
                nodes = scorer.nodes()
                seconds, out = timed(scorer.score_batch, batches)
                lost += scorer.last["lost"] + sum(n - len(o) for n, o in zip(sizes, out))
                rows[name] = (seconds, out)
                print(f"{name}: {len(nodes)} node(s), {sum(seconds):.2f} s, per node (last batch) {scorer.last['per_node']}")
        finally:
            ray.shutdown()
    result = {"items": total, "math_items": sizes[0], "code_items": sizes[1]}
    for name, (seconds, out) in rows.items():
        same = [[s.value for s in o] for o in out] == [[s.value for s in o] for o in local_out]
        if not same:
            raise SystemExit(f"{name}: scores differ from local scoring")
        result[f"{name}_items_per_s"] = round(total / sum(seconds), 1)
        for kind, n, sec in zip(("math", "code"), sizes, seconds):
            result[f"{name}_{kind}_items_per_s"] = round(n / sec, 1)
    local = sum(rows["local"][0])
    for name in ("ray_1node", "ray_2node"):
        result[f"{name}_vs_local"] = round(local / sum(rows[name][0]), 3)
        result[f"{name}_overhead_ms_per_item"] = round(1000 * (sum(rows[name][0]) - local) / total, 2)
    result.update({"lost": lost, "local_infrastructure_errors": errors,
                   "math_correct_frac": round(sum(s.value for s in local_out[0]) / sizes[0], 3),
                   "code_mean_score": round(sum(s.value for s in local_out[1]) / sizes[1], 3),
                   "load_avg_before": round(load[0], 2), "load_avg_after": round(os.getloadavg()[0], 2),
                   "cpus": os.cpu_count()})
    print(f"local {local:.2f} s for {total} items ({sizes[0]} math, {sizes[1]} code); "
          f"load average {load[0]:.2f} -> {os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs")
    print("RESULT " + json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
