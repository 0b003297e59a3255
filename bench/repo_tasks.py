"""Repository tasks: building, grading throughput against SWE-bench's way, and tool-call latency.

Building: tasks kept per CPU-hour and mutants tried, from `rlvr repo build` (envs/repo_build.py)
on one package (`--build NAME==VERSION`, `--build-limit` mutants), timed here in this run.

Grading: the gold patches of catalogue tasks graded at 1, 8 and 32 concurrent grades by
`rlvr.sandbox.repo_grader` as shipped (warm containers, each grading again while the tests leave it
clean; `--fresh` gives each grade a never-used one), and,
in the same run on the same tasks, by the peer: the way SWE-bench's harness grades, a fresh
container per grade (`docker create` + start from the same image, the patches copied in, `git apply`,
pytest on the same FAIL_TO_PASS and PASS_TO_PASS node ids with `-rA` and the grader's ini,
verdicts read from its
PASSED lines, the container removed). At 8 concurrent the peer runs a second time where the image
compiled the released code, with that bytecode cache (`fresh_container_cached`): the two speed-ups
tell the cache's share from the container reuse's. Per level: p50, p99 and max seconds per grade, grades/s.
Every rlvr grade of a gold patch must come back (`lost`: raised or never returned), none may be
`error`, and each must score 1 (`wrong` counts those that did not). More grades at 8 concurrent
bring the total to `--grades` (1,000).

Tool calls: p50/p99 milliseconds of the RepoFix tools' workspace operations (bash, view, exact
edit, diff) over the attach-stream server, and of the same bash commands through `docker exec`.

Usage: python bench/repo_tasks.py [--grades 1000] [--levels 1,8,32] [--peer-grades 8,48,64]
                                  [--build inflection==0.5.1] [--build-limit 12] [--tool-calls 400] [--fresh]
The machine is shared (2 cores, several jobs): the RESULT carries the load average.
"""

from __future__ import annotations

import argparse
import io
import itertools
import json
import os
import re
import shlex
import sys
import tarfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor

from rlvr.envs.repo_env import task_image
from rlvr.envs.repo_task import RepoTask, load_catalogue
from rlvr.sandbox.repo_image import PYCACHE


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q / 100 * (len(ordered) - 1))))] if ordered else float("nan")


# --- building ------------------------------------------------------------------------------------


def building(spec: str, limit: int) -> dict:
    from rlvr.envs.repo_build import build

    result = build(spec, limit=limit, workers=2, log=lambda m: print(f"  build: {m}", file=sys.stderr, flush=True))
    stats = result["stats"]
    hours = max(stats["cpu_s"], 1e-9) / 3600
    return {"package": spec, "mutants_tried": stats["mutants_tried"], "kept": stats["kept"],
            "cpu_s": stats["cpu_s"], "wall_s": stats["wall_s"], "tasks_per_cpu_hour": round(stats["kept"] / hours, 1),
            "outcomes": stats["outcomes"]}


# --- grading -------------------------------------------------------------------------------------


def rlvr_grade(grader, task: RepoTask):
    return grader.grade(task_image(task), task.repo_dir, task.setup_patch, task.gold_patch, task.fail_to_pass,
                        task.pass_to_pass, source_paths=task.source_paths, test_patch=task.test_patch, timeout=120.0)


def _tar(files: dict[str, str]) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        for name, text in files.items():
            data = text.encode()
            info = tarfile.TarInfo(name)
            info.size, info.mode = len(data), 0o644
            tar.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


def fresh_container_grade(client, task: RepoTask, cached: bool = False) -> float:
    """SWE-bench's way: a new container per grade; the patches copied in and applied; pytest -rA; PASSED lines.
    `cached`: the same, run where the image compiled the released code (the grader's bytecode cache), to
    tell the cache's share of the speed-up from the container's."""
    tests = list(dict.fromkeys(task.fail_to_pass + task.pass_to_pass))
    where = "/tmp/rlvr-work" if cached else task.repo_dir
    script = "\n".join([
        "set -u", *([f"cp -a {task.repo_dir} {where}"] if cached else []), f"cd {where}",
        *(["git apply /eval/setup.diff"] if task.setup_patch else []),
        "git apply /eval/model.diff",
        *(["git apply /eval/test.diff"] if task.test_patch else []),
        "if [ -d src ]; then export PYTHONPATH=$PWD/src; else export PYTHONPATH=$PWD; fi",
        # the grader's ini, as the grader runs them (a repository's addopts may need plugins the image lacks)
        f"python3 {'-X pycache_prefix=' + PYCACHE if cached else ''} -m pytest -c /opt/rlvr-repo/pytest.ini "
        f"--rootdir {where} -rA -p no:cacheprovider -q "
        + " ".join(shlex.quote(t) for t in tests),
    ])
    container = client.containers.create(task_image(task), command=["sleep", "600"], network_mode="none",
                                         mem_limit="2g", pids_limit=512, working_dir=task.repo_dir)
    try:
        container.start()
        container.put_archive("/", _tar({"eval/setup.diff": task.setup_patch, "eval/model.diff": task.gold_patch,
                                         "eval/test.diff": task.test_patch, "eval/eval.sh": script}))
        _, output = container.exec_run(["bash", "/eval/eval.sh"], demux=False)
        text = (output or b"").decode(errors="replace")
    finally:
        container.remove(force=True)
    passed = set(re.findall(r"^PASSED (.+?)\s*$", text, flags=re.M))  # ids may hold spaces
    return float(all(t in passed for t in tests))


def run_level(fn, tasks: list[RepoTask], n: int, concurrency: int) -> dict:
    """`n` grades, `concurrency` at once: latencies, grades/s, and every outcome."""
    jobs = list(itertools.islice(itertools.cycle(tasks), n))
    latencies, outcomes, lost = [], [], 0
    lock = threading.Lock()

    def one(task):
        nonlocal lost
        start = time.monotonic()
        try:
            outcome = fn(task)
        except Exception as exc:  # noqa: BLE001 - counted as lost, with its message kept
            with lock:
                lost += 1
                outcomes.append(("lost", f"{type(exc).__name__}: {str(exc)[:200]}"))
            return
        with lock:
            latencies.append(time.monotonic() - start)
            outcomes.append(outcome)

    os.sync()  # the disk writes of containers started before (pool starts, the other side's run) are not this run's
    start = time.monotonic()
    with ThreadPoolExecutor(concurrency) as pool:
        list(pool.map(one, jobs))
    wall = time.monotonic() - start
    return {"concurrency": concurrency, "grades": n, "wall_s": round(wall, 2), "grades_per_s": round(n / wall, 3),
            "p50_s": round(pct(latencies, 50), 3), "p99_s": round(pct(latencies, 99), 3),
            "max_s": round(max(latencies, default=float("nan")), 3), "lost": lost, "outcomes": outcomes}


def grading(tasks: list[RepoTask], levels: list[int], counts: list[int], peer_counts: list[int], total: int,
            fresh: bool = False) -> dict:
    import docker

    from rlvr.sandbox.repo_grader import RepoGrader

    client = docker.from_env(timeout=600)
    images = sorted({task_image(t) for t in tasks})

    def started(concurrency: int) -> RepoGrader:
        """A grader with its containers up before the clock starts. Reused ones: each image's share of the
        grades in flight (the tasks take the images in turn) plus the `warm` spares the grader keeps, so
        the clock sees grading, not the pool growing; never-used ones: the whole concurrency per image."""
        grader = RepoGrader(warm=concurrency if fresh else 2, reuse=not fresh)
        for image in images:
            grader.prewarm(image, concurrency if fresh else -(-concurrency // len(images)) + grader.warm)
        time.sleep(min(60, 2 + concurrency))
        return grader

    rows, outcomes = [], []
    for concurrency, n, peer_n in zip(levels, counts, peer_counts):
        grader = started(concurrency)
        ours = run_level(lambda t, g=grader: rlvr_grade(g, t), tasks, n, concurrency)
        grader.close()
        outcomes += ours.pop("outcomes")
        peer = run_level(lambda t: fresh_container_grade(client, t), tasks, peer_n, concurrency)
        peer_values = peer.pop("outcomes")
        row = {"concurrency": concurrency, "rlvr": ours, "fresh_container": peer,
               "peer_wrong": sum(v != 1.0 for v in peer_values),
               "speedup": round(ours["grades_per_s"] / peer["grades_per_s"], 2)}
        if concurrency == 8:  # the peer given rlvr's bytecode cache: what the container reuse alone buys
            cached = run_level(lambda t: fresh_container_grade(client, t, cached=True), tasks, peer_n, concurrency)
            row["peer_wrong"] += sum(v != 1.0 for v in cached.pop("outcomes"))
            row["fresh_container_cached"] = cached
            row["speedup_over_cached"] = round(ours["grades_per_s"] / cached["grades_per_s"], 2)
        rows.append(row)
        print(json.dumps(row), file=sys.stderr, flush=True)
    done = sum(r["rlvr"]["grades"] for r in rows)
    if total > done:  # the rest of the 1,000 at 8 concurrent
        grader = started(8)
        extra = run_level(lambda t: rlvr_grade(grader, t), tasks, total - done, 8)
        grader.close()
        outcomes += extra.pop("outcomes")
        rows.append({"concurrency": 8, "rlvr": extra, "endurance": True})
    graded = [o for o in outcomes if not (isinstance(o, tuple) and o[0] == "lost")]
    lost_messages = [o[1] for o in outcomes if isinstance(o, tuple)]
    return {"levels": rows, "grades": len(outcomes), "lost": len(lost_messages), "lost_examples": lost_messages[:3],
            "errors": sum(g.reason == "error" for g in graded),
            "error_examples": [g.info.get("error") for g in graded if g.reason == "error"][:3],
            "wrong": sum(g.value != 1.0 and g.reason != "error" for g in graded)}


# --- tool calls ----------------------------------------------------------------------------------


def tool_calls(task: RepoTask, n: int) -> dict:
    import docker

    from rlvr.sandbox.repo_workspace import WorkspacePool

    pool = WorkspacePool(task_image(task), task.repo_dir, size=1)
    workspace = pool.acquire()
    pool.close()
    path = task.mutation.file if task.mutation else task.source_paths[0]
    commands = [f"grep -n 'def ' {path} | head -20", "ls -la", f"wc -l {path}", "python3 -c 'print(1)'"]
    ours, exec_peer, by_op = [], [], {"bash": [], "view": [], "edit": [], "diff": []}
    with workspace:
        workspace.start(task.setup_patch)
        text = workspace.request("read", path=path)["content"]
        line = next(x for x in text.splitlines() if x.strip() and text.count(x) == 1)
        for i in range(n):
            op = ("bash", "view", "edit", "diff")[i % 4]
            start = time.monotonic()
            if op == "bash":
                workspace.bash(commands[(i // 4) % len(commands)])
            elif op == "view":
                workspace.view(path, 1 + (i % 50), 60 + (i % 50))
            elif op == "edit":
                workspace.edit(path, line, line + "  # x") if (i // 4) % 2 == 0 else workspace.edit(path, line + "  # x", line)
            else:
                workspace.diff()
            elapsed = (time.monotonic() - start) * 1000
            ours.append(elapsed)
            by_op[op].append(elapsed)
        container = docker.from_env().containers.get(workspace.ident)
        for i in range(max(20, n // 4)):
            start = time.monotonic()
            container.exec_run(["bash", "-c", commands[i % len(commands)]], workdir=task.repo_dir, user=str(workspace.agent_uid))
            exec_peer.append((time.monotonic() - start) * 1000)
    return {"calls": len(ours), "p50_ms": round(pct(ours, 50), 2), "p99_ms": round(pct(ours, 99), 2),
            "max_ms": round(max(ours), 2), "by_op_p50_ms": {k: round(pct(v, 50), 2) for k, v in by_op.items()},
            "bash_p99_ms": round(pct(by_op["bash"], 99), 2),
            "docker_exec_p50_ms": round(pct(exec_peer, 50), 2), "docker_exec_p99_ms": round(pct(exec_peer, 99), 2)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--grades", type=int, default=1000, help="rlvr grades in all (default 1000)")
    parser.add_argument("--levels", default="1,8,32")
    parser.add_argument("--counts", default="16,160,320", help="rlvr grades per level")
    parser.add_argument("--peer-grades", default="8,48,64", help="fresh-container grades per level")
    parser.add_argument("--tasks", type=int, default=40, help="catalogue tasks graded (cycled)")
    parser.add_argument("--packages", default=None, help="comma-separated packages (default: all in the catalogue)")
    parser.add_argument("--build", default="inflection==0.5.1", help="package to time a small build on ('' skips)")
    parser.add_argument("--build-limit", type=int, default=12, help="mutants tried in the timed build")
    parser.add_argument("--tool-calls", type=int, default=400)
    parser.add_argument("--fresh", action="store_true", help="rlvr's grader with a never-used container per grade")
    args = parser.parse_args()
    catalogue = load_catalogue()
    packages = sorted({t.package for t in catalogue})
    chosen = [t for t in catalogue if args.packages is None or t.package in args.packages.split(",")]
    if not chosen:
        print("no repository tasks in the catalogue: build some with `rlvr repo build`", file=sys.stderr)
        return 1
    # Tasks spread over the packages, the same list for both sides.
    by_package = {p: [t for t in chosen if t.package == p] for p in sorted({t.package for t in chosen})}
    tasks = [t for group in itertools.zip_longest(*by_package.values()) for t in group if t][: args.tasks]
    for image in sorted({task_image(t) for t in tasks}):
        print(f"image ready: {image}", file=sys.stderr)
    result: dict = {"tasks": len(catalogue), "packages": len(packages), "package_names": packages,
                    "graded_tasks": len(tasks)}
    load = [os.getloadavg()]
    if args.build:
        result["build"] = building(args.build, args.build_limit)
        load.append(os.getloadavg())
    tools = tool_calls(tasks[0], args.tool_calls)
    print(json.dumps({"tool_calls": tools}), file=sys.stderr, flush=True)  # kept if a later part is cut short
    result["tool_calls"] = tools
    result["tool_call_p50_ms"], result["tool_call_p99_ms"] = tools["p50_ms"], tools["p99_ms"]
    load.append(os.getloadavg())
    levels = [int(x) for x in args.levels.split(",")]
    counts = [int(x) for x in args.counts.split(",")]
    peer_counts = [int(x) for x in args.peer_grades.split(",")]
    graded = grading(tasks, levels, counts, peer_counts, args.grades, args.fresh)
    graded["reuse"] = not args.fresh
    load.append(os.getloadavg())
    result.update(graded)
    at8 = next((r for r in graded["levels"] if r["concurrency"] == 8 and "speedup" in r), None)
    result["speedup_8"] = at8["speedup"] if at8 else None
    result["grade_p99_s"] = at8["rlvr"]["p99_s"] if at8 else None
    result["targets"] = {"speedup_8>=5": bool(at8 and at8["speedup"] >= 5), "tool_call_p99<200ms": tools["p99_ms"] < 200,
                         "1000_grades_0_lost_0_errors": graded["grades"] >= 1000 and not graded["lost"]
                         and not graded["errors"]}
    result["load_average"] = load
    print("RESULT " + json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
