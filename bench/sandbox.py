"""Sandbox throughput: HumanEval canonical and MBPP reference solutions verified per second.

Three ways to run the same trusted harness on the same problems, in one run:
  rlvr        the warm Docker pool (a job server in each long-lived, locked-down container)
  docker_run  one fresh container per problem, same image, same lock-down, same harness
  subprocess  the harness as a plain local subprocess, no isolation (the `local` backend)
with the same number of parallel workers. `overhead_vs_subprocess` is how much slower the
isolated pool is than no isolation at all (1.0 = free). Every verdict is checked: a
solution that does not pass aborts the benchmark.

Then, per language (Python, C, C++, Java, JavaScript, Go, Rust), a small solve-and-run
stdin/stdout job (compile once, run on 3 cases) through the warm pool, against the same
program compiled and run unisolated with plain `subprocess.run` calls (same argv and flags),
with the same number of parallel jobs. The peer runs the pool's own toolchains: the bench
exports the pool's image into a temporary root file system and chroots into it (as root;
`--peer-root DIR` names a ready one instead), so both sides run the same binaries and a host
without compilers needs no manual step. RESULT gains `languages`:
[{"language", "jobs_per_s", "subprocess_jobs_per_s", "overhead"}], overhead = pool time /
subprocess time.

Usage: python bench/sandbox.py [--workers N] [--mbpp N] [--docker-run N] [--lang-jobs N] [--languages L,..]
                               [--only-languages] [--peer-root DIR]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import stat
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from rlvr.sandbox import languages
from rlvr.sandbox.docker_backend import DockerWorker
from rlvr.sandbox.image import image_tag, scratch_root
from rlvr.sandbox.pool import SandboxPool, default_size
from rlvr.sandbox.protocol import Job, Limits

DATASETS = Path(__file__).resolve().parents[1].parent / "shared" / "datasets"


def load_jobs(n_mbpp: int) -> tuple[list[Job], list[Job]]:
    """HumanEval and MBPP jobs; 30 s each, since a few MBPP references (amicable numbers up to
    9999) take about 9 s on a shared, loaded machine, on either backend."""
    humaneval = [json.loads(x) for x in (DATASETS / "humaneval" / "HumanEval.jsonl").read_text().splitlines() if x]
    mbpp = [json.loads(x) for x in (DATASETS / "mbpp" / "mbpp.jsonl").read_text().splitlines() if x][:n_mbpp]
    he_jobs = [Job(code=r["canonical_solution"], prefix=r["prompt"], tests=r["test"], entry_point=r["entry_point"],
                   timeout=30.0) for r in humaneval]
    mb_jobs = [Job(code=r["code"], test_list=r["test_list"], test_setup_code=r["test_setup_code"], timeout=30.0,
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
            return worker.run(job.to_wire(pool.limits), job.verdict_due(), job.budget()).get("status")
        finally:
            worker.close()

    start = time.perf_counter()
    with ThreadPoolExecutor(max_workers=workers) as executor:
        statuses = list(executor.map(one, jobs))
    elapsed = time.perf_counter() - start
    if any(s != "passed" for s in statuses):
        raise SystemExit(f"docker run: not all passed: {statuses}")
    return elapsed


# The same small task in every language: print the sum of the integers on stdin.
SUM_PROGRAMS = {
    "python": "import sys\nprint(sum(map(int, sys.stdin.read().split())))\n",
    "c": '#include <stdio.h>\nint main(void){long x,s=0;while(scanf("%ld",&x)==1)s+=x;printf("%ld\\n",s);return 0;}\n',
    "cpp": "#include <iostream>\nint main(){long x,s=0;while(std::cin>>x)s+=x;std::cout<<s<<'\\n';}\n",
    "java": "import java.io.*;import java.util.*;\npublic class Main{public static void main(String[] a) throws IOException{"
            "BufferedReader r=new BufferedReader(new InputStreamReader(System.in));long s=0;String l;"
            "while((l=r.readLine())!=null){StringTokenizer t=new StringTokenizer(l);while(t.hasMoreTokens())"
            "s+=Long.parseLong(t.nextToken());}System.out.println(s);}}\n",
    "javascript": "const t=require('fs').readFileSync(0,'utf8').split(/\\s+/).filter(Boolean);"
                  "console.log(t.reduce((s,x)=>s+Number(x),0));\n",
    "go": 'package main\nimport ("bufio";"fmt";"os")\nfunc main(){r:=bufio.NewReader(os.Stdin);var s,x int64;'
          'for{if _,e:=fmt.Fscan(r,&x);e!=nil{break};s+=x};fmt.Println(s)}\n',
    "rust": "use std::io::Read;\nfn main(){let mut s=String::new();std::io::stdin().read_to_string(&mut s).unwrap();"
            "let t:i64=s.split_whitespace().map(|x|x.parse::<i64>().unwrap()).sum();println!(\"{}\",t);}\n",
}
SUM_CASES = [{"input": "1 2\n", "output": "3\n"}, {"input": "5 7 9\n", "output": "21\n"},
             {"input": " ".join(map(str, range(1000))) + "\n", "output": f"{sum(range(1000))}\n"}]
HOST_PATH = "/usr/local/bin:/usr/bin:/bin"  # the toolchains apt installed, as in the image


PEER_ROOT: list[str] = []  # the root file system whose toolchains the peer runs
DEVICES = {"null": 3, "zero": 5, "full": 7, "random": 8, "urandom": 9}  # char devices, major 1


@contextlib.contextmanager
def image_root(client, image: str):
    """`image`'s file system in a temporary folder, with /proc mounted and the basic devices,
    for the peer to chroot into: the toolchains the pool runs, without the isolation."""
    if os.geteuid() != 0:
        raise SystemExit("the unisolated peer chroots into the image's file system, which needs root; "
                         "run as root, or pass --peer-root DIR (a root file system with the same toolchains)")
    with tempfile.TemporaryDirectory(prefix="rlvr-peer-") as tmp, scratch_root(Path(tmp) / "root") as root:
        started = time.perf_counter()
        container = client.containers.create(image, command=["true"])
        try:
            tar = subprocess.Popen(["tar", "-x", "-f", "-", "-C", str(root)], stdin=subprocess.PIPE)
            with contextlib.suppress(BrokenPipeError):
                for chunk in container.export():
                    tar.stdin.write(chunk)
            tar.stdin.close()
            if tar.wait() != 0:
                raise SystemExit(f"could not unpack {image} into {root}")
        finally:
            container.remove(force=True)
        for name, minor in DEVICES.items():
            device = root / "dev" / name
            if not device.exists():
                os.mknod(device, stat.S_IFCHR | 0o666, os.makedev(1, minor))
                os.chmod(device, 0o666)
        proc = root / "proc"
        subprocess.run(["mount", "-t", "proc", "proc", str(proc)], check=True)
        print(f"peer root: {image} unpacked in {time.perf_counter() - started:.1f}s", flush=True)
        try:
            yield str(root)
        finally:
            subprocess.run(["umount", "-l", str(proc)], check=False)


def subprocess_job(language: str) -> bool:
    """The job unisolated: compile with the same argv, then one plain subprocess per case."""
    code = SUM_PROGRAMS[language]
    root = PEER_ROOT[0]
    with tempfile.TemporaryDirectory(prefix="rlvr-bench-", dir=os.path.join(root, "tmp")) as scratch:
        inside = "/" + os.path.relpath(scratch, root)  # the same directory as the program sees it
        source, compile_argv, run_argv, env = languages.plan(language, code, Limits().memory_mb, inside)
        env = {"PATH": HOST_PATH, "LANG": "C.UTF-8", "HOME": inside, **env}
        Path(scratch, source).write_text(code)

        def enter():  # chroot is no isolation: same kernel, user, cgroup and network; only paths change
            os.chroot(root)
            os.chdir(inside)

        if compile_argv:
            subprocess.run(compile_argv, preexec_fn=enter, env=env, check=True, capture_output=True, timeout=120)
        argv = run_argv or ["python3", source]
        for case in SUM_CASES:
            out = subprocess.run(argv, preexec_fn=enter, env=env, input=case["input"].encode(), capture_output=True,
                                 timeout=60)
            if out.returncode != 0 or out.stdout.decode() != case["output"]:
                return False
    return True


def bench_languages(workers: int, n_jobs: int, only: list[str], peer_root: str | None) -> list[dict]:
    """Jobs/s per language: the warm pool (the languages image for all but Python) against
    plain subprocesses, the two interleaved per language so that load hits both alike."""
    python_pool = SandboxPool(backend="docker", size=workers) if "python" in only else None
    others = [lang for lang in only if lang != "python"]
    lang_pool = SandboxPool(backend="docker", size=workers, image=image_tag(languages=True)) if others else None
    try:
        with contextlib.ExitStack() as stack:
            if peer_root is None:  # the languages image holds Python too
                pool = lang_pool or python_pool
                peer_root = stack.enter_context(image_root(pool._client, pool.image))
            PEER_ROOT[:] = [peer_root]
            return _bench_languages(workers, n_jobs, only, python_pool, lang_pool)
    finally:
        for pool in (python_pool, lang_pool):
            if pool is not None:
                pool.close()


def _bench_languages(workers, n_jobs, only, python_pool, lang_pool) -> list[dict]:
    rows = []
    for language in only:
        pool = python_pool if language == "python" else lang_pool
        n = n_jobs * (4 if language == "python" else 1)
        jobs = [Job(code=SUM_PROGRAMS[language], io_tests=SUM_CASES, language=language, timeout=20.0)
                for _ in range(n)]
        timed_batch(pool, jobs[:workers])  # warm: first compile of each toolchain reads it from disk
        with ThreadPoolExecutor(max_workers=workers) as executor:
            assert all(executor.map(subprocess_job, [language] * workers)), f"{language}: subprocess failed"
        pool_s = timed_batch(pool, jobs)
        start = time.perf_counter()
        with ThreadPoolExecutor(max_workers=workers) as executor:
            ok = list(executor.map(subprocess_job, [language] * n))
        sub_s = time.perf_counter() - start
        if not all(ok):
            raise SystemExit(f"{language}: the unisolated program failed")
        rows.append({"language": language, "jobs_per_s": round(n / pool_s, 2),
                     "subprocess_jobs_per_s": round(n / sub_s, 2), "overhead": round(pool_s / sub_s, 3)})
        print(f"{language:10s} {n:4d} jobs  pool {n / pool_s:7.2f}/s  subprocess {n / sub_s:7.2f}/s  "
              f"overhead {pool_s / sub_s:5.2f}x", flush=True)
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", type=int, default=default_size(), help="per backend (default: 2 per CPU)")
    parser.add_argument("--mbpp", type=int, default=200, help="MBPP problems to include")
    parser.add_argument("--docker-run", type=int, default=40, help="problems for the docker-run peer (slow)")
    parser.add_argument("--lang-jobs", type=int, default=12, help="jobs per compiled language (Python: 4x)")
    parser.add_argument("--languages", default=",".join(languages.LANGUAGES), help="comma-separated")
    parser.add_argument("--only-languages", action="store_true", help="skip the HumanEval/MBPP part")
    parser.add_argument("--peer-root", default=None,
                        help="a root file system with the image's toolchains and /proc mounted, for the unisolated "
                             "peer to chroot into (default: the pool's image, unpacked into a temporary folder)")
    args = parser.parse_args()
    peer_root = os.path.abspath(args.peer_root) if args.peer_root else None
    only = [languages.canonical(x) for x in args.languages.split(",")]
    if None in only:
        parser.error(f"--languages takes {', '.join(languages.LANGUAGES)}")
    if args.only_languages:
        rows = bench_languages(args.workers, args.lang_jobs, only, peer_root)
        print("RESULT " + json.dumps({"languages": rows, "load_average": os.getloadavg()}))
        return 0
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
        "languages": bench_languages(args.workers, args.lang_jobs, only, peer_root),
        "load_average": os.getloadavg(),
    }
    print("RESULT " + json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
