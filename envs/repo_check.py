"""`rlvr repo check`: every task of a file or of the catalogue graded twice, gold and empty.

A task is sound when its gold patch scores 1 (every FAIL_TO_PASS and PASS_TO_PASS test passes) and an
empty submission scores 0 with exactly the FAIL_TO_PASS tests failing, through the same grader an episode
uses (a container no workspace was, filtered diff, per-test verdicts from the grader's own plugin); with
`--attacks`, every attack of `repo_attacks` must score 0 on it too. The builder keeps a
mutant on the evidence of its own suite runs; this check is the grader's word on the finished task, so a
catalogue is never shipped on the builder's word alone. gymnasium's `check_env` runs on rlvr/RepoFix-v0 over
each package's tasks as well.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections import Counter
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

from rlvr.envs.repo_task import RepoTask, load_catalogue, load_tasks


def check_task(task: RepoTask, grade: Callable[..., object], image: str, timeout: float) -> str | None:
    """Why `task` is unsound, or None when gold scores 1 and empty scores 0 with exactly F2P failing."""

    def run(diff: str):
        return grade(image, task.repo_dir, task.setup_patch, diff, task.fail_to_pass, task.pass_to_pass,
                     source_paths=task.source_paths, test_patch=task.test_patch, timeout=timeout)

    gold = run(task.gold_patch)
    if (gold.value, gold.reason) != (1.0, "passed"):
        failed = sorted(t for t, v in gold.tests.items() if v != "passed")[:3]
        return f"gold scored {gold.value} ({gold.reason}; not passed: {failed}; {gold.info.get('error', '')})"
    if gold.dropped:
        return f"gold patch touches files the grader drops: {gold.dropped}"
    empty = run("")
    failing = {t for t, v in empty.tests.items() if v != "passed"}
    if empty.value != 0.0 or failing != set(task.fail_to_pass):
        return (f"empty scored {empty.value} ({empty.reason}); failing {sorted(failing)[:3]}, "
                f"expected {sorted(task.fail_to_pass)[:3]}")
    return None


def _env_check(package: str, tasks: list[RepoTask]) -> str | None:
    """gymnasium's `check_env` on rlvr/RepoFix-v0 over one package's tasks; why it failed, or None."""
    import gymnasium as gym
    from gymnasium.utils.env_checker import check_env

    import rlvr.envs  # noqa: F401  (registers rlvr/RepoFix-v0)

    env = gym.make("rlvr/RepoFix-v0", tasks=tasks)
    try:
        check_env(env.unwrapped)
    except Exception as exc:  # noqa: BLE001 - reported as the package's failure
        return f"check_env: {type(exc).__name__}: {exc}"
    finally:
        env.close()
    return None


def check(tasks: list[RepoTask], workers: int = 2, timeout: float = 120.0, log=print,
          check_api: bool = True, attacks: bool = False) -> dict:
    """Check every task (with `attacks`, the attacks on it as well; with `check_api`, the env over each
    package's tasks with gymnasium's `check_env`); returns counts per package, the unsound tasks and
    envs with the reason."""
    from rlvr.envs.repo_attacks import check_attacks
    from rlvr.envs.repo_env import task_image
    from rlvr.sandbox.repo_grader import RepoGrader
    from rlvr.sandbox.repo_image import fetch_sdist

    grader = RepoGrader(warm=workers)
    warmed = set()
    for task in tasks:  # built (or found, `task_image` caches) one package at a time, before the grading starts
        image = task_image(task)
        if (image, task.repo_dir) not in warmed:
            warmed.add((image, task.repo_dir))
            grader.prewarm(image, workers, task.repo_dir)
    started = time.monotonic()

    def one(task: RepoTask):
        try:
            image = task_image(task)
            why = check_task(task, grader.grade, image, timeout)
            if why is None and attacks:
                sdist = fetch_sdist(task.package, task.version, log=lambda _message: None)
                why = check_attacks(task, grader.grade, image, sdist, timeout)
            return task, why
        except Exception as exc:  # noqa: BLE001 - one broken task is reported, the check goes on
            return task, f"check raised {type(exc).__name__}: {exc}"

    sound, bad, bad_envs = Counter(), [], []
    for package in sorted({t.package for t in tasks} if check_api else ()):
        why = _env_check(package, [t for t in tasks if t.package == package])
        if why:
            bad_envs.append({"package": package, "why": why})
            log(f"UNSOUND env of {package}: {why}")
    try:
        with ThreadPoolExecutor(max_workers=workers) as pool:
            for done, (task, why) in enumerate(pool.map(one, tasks), 1):
                if done % 25 == 0 or done == len(tasks):
                    log(f"checked {done} of {len(tasks)} tasks in {time.monotonic() - started:.0f} s")
                if why is None:
                    sound[task.package] += 1
                else:
                    bad.append({"instance_id": task.instance_id, "package": task.package, "why": why})
                    log(f"UNSOUND {task.instance_id}: {why}")
    finally:
        grader.close()
    return {"tasks": len(tasks), "sound": sum(sound.values()), "unsound": len(bad), "attacks": attacks,
            "packages": {p: sound[p] for p in sorted({t.package for t in tasks})},
            "wall_s": round(time.monotonic() - started, 1), "bad": bad, "unsound_envs": bad_envs}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("files", nargs="*", help="JSONL task files (default: the packaged catalogue)")
    parser.add_argument("--packages", default=None, help="comma-separated packages of the catalogue")
    parser.add_argument("--workers", type=int, default=2, help="grades at once (default 2)")
    parser.add_argument("--timeout", type=float, default=120.0, help="the grader's deadline per grade")
    parser.add_argument("--attacks", action="store_true",
                        help="grade every attack of rlvr.envs.repo_attacks on each task too (each must score 0)")
    parser.add_argument("--no-check-env", action="store_true",
                        help="skip gymnasium's check_env on rlvr/RepoFix-v0 over each package's tasks")


def run(args: argparse.Namespace) -> int:
    if args.workers < 1:
        raise ValueError("--workers must be at least 1")
    if args.files:
        tasks = [task for path in args.files for task in load_tasks(path)]
    else:
        tasks = load_catalogue(args.packages.split(",") if args.packages else None)
    if not tasks:
        raise ValueError("no tasks to check")
    result = check(tasks, workers=args.workers, timeout=args.timeout, check_api=not args.no_check_env,
                   attacks=args.attacks, log=lambda m: print(m, file=sys.stderr, flush=True))
    print(json.dumps(result))
    return 0 if not (result["unsound"] or result["unsound_envs"]) else 1
