"""Sandbox throughput: HumanEval canonical and MBPP reference solutions verified per second.

Three ways to run the same trusted harness on the same problems, in one run:
  rlvr        the warm Docker pool (a job server in each long-lived, locked-down container)
  docker_run  one fresh container per problem, same image, same lock-down, same harness
  subprocess  the harness as a plain local subprocess, no isolation (the `local` backend)
with the same number of parallel workers. `overhead_vs_subprocess` is how much slower the
isolated pool is than no isolation at all (1.0 = free). Every verdict is checked: a
solution that does not pass aborts the benchmark.

Usage: python bench/sandbox.py [--workers N] [--mbpp N] [--docker-run N]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from rlvr.sandbox.docker_backend import DockerWorker
from rlvr.sandbox.pool import SandboxPool, default_size
from rlvr.sandbox.protocol import Job

DATASETS = Path(__file__).resolve().parents[1].parent / "shared" / "datasets"


def load_jobs(n_mbpp: int) -> tuple[list[Job], list[Job]]:
    humaneval = [json.loads(x) for x in (DATASETS / "humaneval" / "HumanEval.jsonl").read_text().splitlines() if x]
    mbpp = [json.loads(x) for x in (DATASETS / "mbpp" / "mbpp.jsonl").read_text().splitlines() if x][:n_mbpp]
    he_jobs = [Job(code=r["canonical_solution"], prefix=r["prompt"], tests=r["test"], entry_point=r["entry_point"],
                   timeout=10.0) for r in humaneval]
    mb_jobs = [Job(code=r["code"], test_list=r["test_list"], test_setup_code=r["test_setup_code"], timeout=10.0,
                   entry_point=re.search(r"assert\W*(\w+)", r["test_list"][0]).group(1)) for r in mbpp]
    return he_jobs, mb_jobs


def timed_batch(pool: SandboxPool, jobs: list[Job]) -> float:
    start = time.perf_counter()
    results = pool.run_batch(jobs)
    elapsed = time.perf_counter() - start
    failing = [(i, r.status, r.errors[:1]) for i, r in enumerate(results) if r.status != "passed"]
    if failing:
        raise SystemExit(f"{pool.backend}: {len(failing)} reference solutions did not pass: {failing[:5]}")
    return elapsed


def docker_run_each(pool: SandboxPool, jobs: list[Job], workers: int) -> float:
    """One container per problem: create, start, judge, remove (what `docker run -i` does)."""

    def one(job: Job) -> str:
        worker = DockerWorker(pool._client, pool.image, pool.limits)
        try:
            return worker.run(job.to_wire(pool.limits), job.budget()).get("status")
        finally:
            worker.close()

    start = time.perf_counter()
    with ThreadPoolExecutor(max_workers=workers) as executor:
        statuses = list(executor.map(one, jobs))
    elapsed = time.perf_counter() - start
    if any(s != "passed" for s in statuses):
        raise SystemExit(f"docker run: not all passed: {statuses}")
    return elapsed


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", type=int, default=default_size(), help="per backend (default: 2 per CPU)")
    parser.add_argument("--mbpp", type=int, default=200, help="MBPP problems to include")
    parser.add_argument("--docker-run", type=int, default=40, help="problems for the docker-run peer (slow)")
    args = parser.parse_args()
    if not (DATASETS / "humaneval" / "HumanEval.jsonl").exists():
        print(f"datasets not found under {DATASETS}", file=sys.stderr)
        return 1
    he_jobs, mb_jobs = load_jobs(args.mbpp)
    jobs = he_jobs + mb_jobs
    print(f"{len(he_jobs)} HumanEval + {len(mb_jobs)} MBPP problems, {args.workers} workers, "
          f"{os.cpu_count()} CPUs")

    t0 = time.perf_counter()
    docker_pool = SandboxPool(backend="docker", size=args.workers)
    print(f"docker pool warm in {time.perf_counter() - t0:.2f}s (image {docker_pool.image})")
    local_pool = SandboxPool(backend="local", size=args.workers)
    try:
        timed_batch(docker_pool, jobs[:20])  # warm caches on both sides
        timed_batch(local_pool, jobs[:20])
        # Interleave the two so that background load on a shared machine hits both alike.
        rlvr_he = timed_batch(docker_pool, he_jobs)
        local_he = timed_batch(local_pool, he_jobs)
        rlvr_mb = timed_batch(docker_pool, mb_jobs)
        local_mb = timed_batch(local_pool, mb_jobs)
        subset = jobs[:: max(1, len(jobs) // args.docker_run)][: args.docker_run]
        run_each = docker_run_each(docker_pool, subset, args.workers)
    finally:
        docker_pool.close()
        local_pool.close()

    rows = [
        ("HumanEval", len(he_jobs), rlvr_he, local_he),
        ("MBPP", len(mb_jobs), rlvr_mb, local_mb),
        ("all", len(jobs), rlvr_he + rlvr_mb, local_he + local_mb),
    ]
    print(f"{'set':10s} {'problems':>8s} {'rlvr/s':>8s} {'subproc/s':>10s} {'overhead':>9s}")
    for name, n, rlvr_t, local_t in rows:
        print(f"{name:10s} {n:8d} {n / rlvr_t:8.1f} {n / local_t:10.1f} {rlvr_t / local_t:9.2f}x")
    print(f"docker run per problem: {len(subset)} problems, {len(subset) / run_each:.1f}/s")
    rlvr_rate = len(jobs) / (rlvr_he + rlvr_mb)
    local_rate = len(jobs) / (local_he + local_mb)
    result = {
        "rlvr_problems_per_s": round(rlvr_rate, 2),
        "docker_run_problems_per_s": round(len(subset) / run_each, 2),
        "subprocess_problems_per_s": round(local_rate, 2),
        "overhead_vs_subprocess": round(local_rate / rlvr_rate, 3),
        "humaneval_rlvr_problems_per_s": round(len(he_jobs) / rlvr_he, 2),
    }
    print("RESULT " + json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
