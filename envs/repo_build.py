"""`rlvr repo build NAME==VERSION`: repository tasks from a PyPI package, SWE-smith's way.

1. pip downloads the sdist; the task image is built from it (`rlvr.sandbox.repo_image`).
2. The suite runs twice in the image; tests that pass both times are the baseline.
3. Mutants of the package's non-test source (`rlvr.envs.repo_mutate`) each run the whole suite
   in parallel task containers, with a deadline per run and `--maxfail` cut short once a
   mutant breaks too many tests.
4. A mutant whose run ended, untampered, with 1 to `max_fail` baseline tests failing becomes a
   task: those tests are FAIL_TO_PASS, a seeded sample of the rest (all of which passed) is
   PASS_TO_PASS, the mutation's diff is the setup patch and its inverse the gold patch.
5. The problem statement lists the failing tests with their exception, message and the
   test-side frames of the traceback; package frames show only file and function, and any text
   equal to the mutated line (before or after) is cut, so it never points at the line.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import random
import re
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from rlvr.envs.repo_mutate import Mutant, sample_mutants, unified_diff
from rlvr.envs.repo_task import Mutation, RepoTask, save_tasks

# Longer pytest ids are left out of the baseline: a stress test parametrized with its input (semver's
# 200,000-character id) would put that input into every task that samples it
MAX_TEST_ID = 300
SKIP_DIRS = {"docs", "doc", "examples", "example", "benchmarks", "bench", "scripts", "tools", "build", "dist",
             ".git", ".github", "tests", "test", "testing"}


def source_layout(repo: Path) -> tuple[list[str], dict[str, str]]:
    """(source_paths an agent may change, {path: text} of the files to mutate)."""
    from rlvr.sandbox.repo_grader import why_not_allowed

    roots = [repo / "src"] if (repo / "src").is_dir() else [repo]
    paths: list[str] = []
    for root in roots:
        for entry in sorted(root.iterdir()):
            rel = entry.relative_to(repo).as_posix()
            if entry.is_dir() and (entry / "__init__.py").exists() and entry.name not in SKIP_DIRS:
                paths.append(rel)
            elif entry.is_file() and entry.suffix == ".py" and why_not_allowed(rel, [rel]) is None \
                    and entry.name not in ("setup.py", "noxfile.py", "conftest.py", "fabfile.py"):
                paths.append(rel)
    files = {}
    for rel in paths:
        base = repo / rel
        for path in ([base] if base.is_file() else sorted(base.rglob("*.py"))):
            name = path.relative_to(repo).as_posix()
            if why_not_allowed(name, paths) is None and "__pycache__" not in name:
                try:
                    files[name] = path.read_text(encoding="utf-8")
                except UnicodeDecodeError:
                    continue
    return paths, files


def _scrub(text: str, banned: list[str]) -> str:
    for item in banned:
        if item and len(item) > 3:
            text = text.replace(item, "<...>")
    return text


def problem_statement(package: str, f2p: list[str], details: dict, banned: list[str]) -> str:
    """Written from the failing tests only: names, exception and message, test-side frames."""
    lines = [f"Some tests of {package} fail. These tests should pass, and the others must keep passing:", ""]
    for test in f2p:
        lines.append(f"- {test}")
    lines.append("")
    for test in f2p[:3]:
        detail = details.get(test) or {}
        lines.append(f"{test}")
        message = _scrub(" ".join((detail.get("message") or "").split())[:400], banned)
        lines.append(f"    {detail.get('type', 'failure')}: {message}".rstrip())
        frames = detail.get("frames") or []
        if frames:
            lines.append("    Traceback (most recent call last, trimmed):")
        for frame in [f for f in frames if f.get("repo", True)][-6:]:
            name = frame.get("file", "?")
            is_test = "test" in name.rsplit("/", 1)[-1] or "/tests/" in f"/{name}" or name.startswith("test")
            if is_test:
                source = _scrub(frame.get("source", ""), banned).splitlines()
                lines.append(f"      {name}:{frame.get('line')} in {frame.get('function')}")
                if source:
                    lines.append(f"        {source[0][:200]}")
            else:
                lines.append(f"      {name} in {frame.get('function')}")
        lines.append("")
    lines.append("Fix the package's source code. Changes to tests or test configuration are not counted.")
    return "\n".join(lines).strip() + "\n"


class Builder:
    """Runs suites in reusable build containers (trusted mutants of trusted code)."""

    def __init__(self, image: str, workers: int, log: Callable[[str], None]):
        from rlvr.sandbox.repo_grader import WorkerContainer

        self.log = log
        self.free = []
        for _ in range(workers):
            container = WorkerContainer(image)
            container.wait_ready()
            self.free.append(container)
        self.lock = threading.Lock()
        self.image = image
        self.runs = 0
        self.cpu = 0.0

    def _retire(self, container) -> None:
        self.cpu += container_cpu(container.name)
        container.close()

    def run(self, setup_patch: str, timeout: float, maxfail: int | None = None) -> dict:
        from rlvr.sandbox.repo_grader import WorkerContainer

        with self.lock:
            container = self.free.pop()
        try:
            reply = container.request({"setup_patch": setup_patch, "paths": ["."], "timeout": timeout,
                                       "maxfail": maxfail}, timeout + 30)
        except (TimeoutError, RuntimeError, OSError) as exc:
            self._retire(container)
            container = WorkerContainer(self.image)
            container.wait_ready()
            reply = {"error": str(exc)}
        if reply.get("timed_out"):  # leftovers were killed; start clean anyway
            self._retire(container)
            container = WorkerContainer(self.image)
            container.wait_ready()
        with self.lock:
            self.free.append(container)
            self.runs += 1
        return reply

    def close(self):
        for container in self.free:
            self._retire(container)


def build(spec: str, limit: int = 120, keep: int | None = None, workers: int = 2, max_fail: int = 5,
          p2p: int = 25, timeout: float = 60.0, seed: int = 0, log: Callable[[str], None] = print,
          on_task: Callable[[RepoTask], None] | None = None) -> dict:
    """Make tasks from NAME==VERSION; returns {"tasks": [...], "stats": {...}}. `on_task` sees
    each task as it is kept (the CLI appends it to the output file, so a long build that is
    stopped keeps what it made)."""
    from rlvr.sandbox.repo_image import build_task_image, fetch_sdist, unpack_sdist

    match = re.fullmatch(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)\s*==\s*([A-Za-z0-9][A-Za-z0-9.+!_-]*)\s*", spec)
    if not match:
        raise ValueError(f"expected NAME==VERSION, got {spec!r}")
    package, version = match.groups()
    started = time.monotonic()
    cpu0 = _own_cpu()
    sdist = fetch_sdist(package, version, log)
    tag, sha = build_task_image(package, version, sdist, log=log)
    with tempfile.TemporaryDirectory(prefix="rlvr-repo-build-") as tmp:
        repo = unpack_sdist(sdist, Path(tmp))  # as the image unpacks it, so source paths match
        source_paths, files = source_layout(repo)
    if not files:
        raise ValueError(f"{package}=={version}: no package source files found")
    log(f"{package} {version}: {len(files)} source files under {', '.join(source_paths)}")
    builder = Builder(tag, max(2, workers), log)  # the baseline runs in two containers at once
    try:
        with ThreadPoolExecutor(max_workers=2) as pool:  # two containers, two interpreters, two hash seeds
            first, second = pool.map(lambda _: builder.run("", timeout * 3), range(2))
        baseline = sorted(t for t, v in (first.get("tests") or {}).items()
                          if v == "passed" and (second.get("tests") or {}).get(t) == "passed" and len(t) <= MAX_TEST_ID)
        if first.get("tampered") or not baseline:
            raise ValueError(f"{package}=={version}: no test passes in the image "
                             f"({first.get('error') or first.get('tampered') or first.get('output_tail', '')[-300:]})")
        unstable = unstable_ids(first, second)
        if unstable:
            raise ValueError(f"{package}=={version}: its test ids differ from one interpreter to the next (a parametrize "
                             f"over unordered values?), so a task's tests could be missing when graded: {unstable[:3]}")
        log(f"baseline: {len(baseline)} passing tests of {len(first.get('tests') or {})} "
            f"({first.get('duration')} s a run)")
        per_run = max(30.0, 10 * float(first.get("duration") or 1.0))
        candidates = sample_mutants(files, limit, seed)
        rng = random.Random(seed)
        tasks, outcomes = [], {}

        def try_one(mutant: Mutant):
            patch = unified_diff(mutant.file, files[mutant.file], mutant.source)
            reply = builder.run(patch, min(timeout, per_run), maxfail=max_fail + 1)
            return mutant, patch, reply

        pool = ThreadPoolExecutor(workers)
        try:
            for mutant, patch, reply in pool.map(try_one, candidates):
                verdict = _judge_mutant(reply, baseline, max_fail)
                outcomes[verdict if isinstance(verdict, str) else "kept"] = outcomes.get(
                    verdict if isinstance(verdict, str) else "kept", 0) + 1
                if isinstance(verdict, str):
                    continue
                f2p = verdict
                rest = [t for t in baseline if t not in set(f2p)]
                sample = sorted(rng.sample(rest, min(p2p, len(rest))))
                old_line = files[mutant.file].splitlines()[mutant.line - 1].strip()
                new_line = mutant.source.splitlines()[mutant.line - 1].strip()
                statement = problem_statement(package, f2p, reply.get("details") or {}, [old_line, new_line])
                gold = unified_diff(mutant.file, mutant.source, files[mutant.file])
                ident = hashlib.sha256(patch.encode()).hexdigest()[:10]
                task = RepoTask(
                    instance_id=f"{package.lower()}-{version}-{ident}", package=package, version=version,
                    problem_statement=statement, fail_to_pass=tuple(f2p), pass_to_pass=tuple(sample),
                    gold_patch=gold, source_paths=tuple(source_paths), sdist_sha256=sha,
                    mutation=Mutation(mutant.file, mutant.operator, mutant.description, mutant.line, patch),
                    hidden_tests=tuple(sorted({t.split("::")[0] for t in f2p})),
                ).with_hash()
                tasks.append(task)
                if on_task is not None:
                    on_task(task)
                if keep and len(tasks) >= keep:
                    break
        finally:
            pool.shutdown(wait=True, cancel_futures=True)
    finally:
        runs = builder.runs
        builder.close()
    cpu = builder.cpu + _own_cpu() - cpu0
    stats = {"package": package, "version": version, "image": tag, "baseline": len(baseline),
             "mutants_tried": len(outcomes) and sum(outcomes.values()), "suite_runs": runs, "kept": len(tasks),
             "outcomes": outcomes, "wall_s": round(time.monotonic() - started, 1), "cpu_s": round(cpu, 1)}
    return {"tasks": tasks, "stats": stats}


def unstable_ids(first: dict, second: dict) -> list[str]:
    """Test ids collected by one baseline run and not the other (both with a verdict for every test). isodate's
    parametrized ids carry an index that follows the interpreter's hash seed, so its tasks named tests the grader's
    interpreter did not collect."""
    a, b = set(first.get("tests") or {}), set(second.get("tests") or {})
    return sorted(a ^ b)


def _judge_mutant(reply: dict, baseline: list[str], max_fail: int):
    """The FAIL_TO_PASS list of a usable mutant, or why it is not usable."""
    if reply.get("error") or reply.get("patch_error"):
        return "error"
    if reply.get("timed_out"):
        return "timeout"
    if reply.get("tampered"):
        return "tampered"
    got = reply.get("tests") or {}
    failed = [t for t in baseline if got.get(t) != "passed"]
    if not failed:
        return "survived"
    if len(failed) > max_fail or not reply.get("ended"):
        return "too_many_failures"
    return failed


def _own_cpu() -> float:
    """CPU seconds of this process and its waited-for children (pip, docker clients)."""
    import resource

    return sum(resource.getrusage(who).ru_utime + resource.getrusage(who).ru_stime
               for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN))


def container_cpu(name: str) -> float:
    """CPU seconds a container has used so far (cgroup v1 cpuacct or v2 cpu.stat; 0 if unknown)."""
    import subprocess

    proc = subprocess.run(["docker", "inspect", "-f", "{{.Id}}", name], capture_output=True, text=True)
    ident = proc.stdout.strip()
    if not ident:
        return 0.0
    for path in (f"/sys/fs/cgroup/cpuacct/docker/{ident}/cpuacct.usage",
                 f"/sys/fs/cgroup/system.slice/docker-{ident}.scope/cpu.stat",
                 f"/sys/fs/cgroup/docker/{ident}/cpu.stat"):
        try:
            text = Path(path).read_text()
        except OSError:
            continue
        if path.endswith("cpuacct.usage"):
            return int(text.strip()) / 1e9
        for line in text.splitlines():
            if line.startswith("usage_usec"):
                return int(line.split()[1]) / 1e6
    return 0.0


def add_arguments(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="repo_command", metavar="ACTION")
    sub.required = True
    b = sub.add_parser("build", help="make repository tasks from NAME==VERSION (pip sdist, AST mutants)")
    b.add_argument("spec", help="a pure-Python package whose sdist carries its tests, e.g. inflection==0.5.1")
    b.add_argument("--out", default=None, help="JSONL file to write (default: ./<name>-<version>.jsonl)")
    b.add_argument("--limit", type=int, default=120, help="mutants to try (default 120)")
    b.add_argument("--keep", type=int, default=None, help="stop after this many tasks")
    b.add_argument("--workers", type=int, default=2, help="containers running suites in parallel (default 2)")
    b.add_argument("--max-fail", type=int, default=5, help="most FAIL_TO_PASS tests a task may have (default 5)")
    b.add_argument("--p2p", type=int, default=25, help="PASS_TO_PASS tests sampled per task (default 25)")
    b.add_argument("--timeout", type=float, default=60.0, help="deadline of one suite run in seconds")
    b.add_argument("--seed", type=int, default=0)
    from rlvr.envs import repo_check

    repo_check.add_arguments(sub.add_parser(
        "check", help="grade every task's gold patch (must score 1) and an empty submission (must score 0)"))


def run(args: argparse.Namespace) -> int:
    if args.repo_command == "check":
        from rlvr.envs import repo_check

        return repo_check.run(args)
    if args.limit < 1 or args.workers < 1 or args.max_fail < 1:
        raise ValueError("--limit, --workers and --max-fail must be at least 1")
    match = re.fullmatch(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)\s*==\s*(\S+)\s*", args.spec)
    if not match:
        raise ValueError(f"expected NAME==VERSION, got {args.spec!r}")
    out = Path(args.out or f"{match.group(1).lower()}-{match.group(2)}.jsonl")
    out.parent.mkdir(parents=True, exist_ok=True)
    partial = out.with_name(out.name + ".partial")
    partial.write_text("")

    def append(task: RepoTask) -> None:
        with open(partial, "a", encoding="utf-8") as handle:
            handle.write(json.dumps(task.to_dict(), sort_keys=True) + "\n")

    result = build(args.spec, limit=args.limit, keep=args.keep, workers=args.workers, max_fail=args.max_fail,
                   p2p=args.p2p, timeout=args.timeout, seed=args.seed,
                   log=lambda m: print(m, file=sys.stderr, flush=True), on_task=append)
    save_tasks(result["tasks"], out)
    partial.unlink(missing_ok=True)
    print(json.dumps({**result["stats"], "out": str(out)}))
    return 0
