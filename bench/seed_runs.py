"""What the learning benches (learn_arith.py, learn_code.py; race.py's curve) share: a child process per seed,
a few at a time, and held-out accuracy placed at training minutes.
Imported by file name: a bench script's folder is first on sys.path when it runs."""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path


def run_seeds(script: str, seeds: list[int], parallel: int, child_args: Callable[[int], list[str]],
              run_dir: Path) -> list[dict] | None:
    """`python script --one --seeds S *child_args(S)` for every seed S, `parallel` at a time, each logging to
    run_dir/seed-S.log and writing run_dir/seed-S/summary.json; returns the summaries in seed order, or None
    (said on stderr) when a run failed."""
    run_dir.mkdir(parents=True, exist_ok=True)
    pending, running, failed = list(seeds), [], []
    while pending or running:
        while pending and len(running) < max(1, parallel):
            seed = pending.pop(0)
            cmd = [sys.executable, script, "--one", "--seeds", str(seed), *child_args(seed)]
            log = open(run_dir / f"seed-{seed}.log", "w")
            running.append((seed, subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT), log))
        time.sleep(2)
        for item in [r for r in running if r[1].poll() is not None]:
            running.remove(item)
            item[2].close()
            if item[1].returncode:
                failed.append(item[0])
    if failed:
        print(f"seeds {failed} failed: see {run_dir}/seed-N.log", file=sys.stderr)
        return None
    return [json.loads((run_dir / f"seed-{s}" / "summary.json").read_text()) for s in seeds]


def training_curve(records: list[dict], evals: list[dict]) -> tuple[float, list[tuple[float, float]]]:
    """(training minutes in all, [(training minutes, held-out accuracy)] for each evaluation): the minutes are
    the summed step times up to the evaluation's step (evaluations not counted)."""
    elapsed, minutes_at = 0.0, {0: 0.0}
    for r in records:
        elapsed += r["step_s"] / 60
        minutes_at[r["step"]] = elapsed
    return elapsed, [(round(minutes_at.get(e["step"], elapsed), 2), e["accuracy"]) for e in evals]


def seeds_parser(description: str, config: Path, run_dir: Path) -> argparse.ArgumentParser:
    """The arguments every learning bench takes; the bench adds its own."""
    p = argparse.ArgumentParser(description=description)
    p.add_argument("--seeds", default="0,1,2", help="comma-separated seeds, one run each")
    p.add_argument("--parallel", type=int, default=2, help="runs at a time (one torch thread each)")
    p.add_argument("--minutes", type=float, default=30.0, help="training budget per seed (evaluations not counted)")
    p.add_argument("--eval-every", type=int, default=25, help="steps between held-out evaluations")
    p.add_argument("--config", default=str(config))
    p.add_argument("--run-dir", default=str(run_dir))
    p.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE")
    p.add_argument("--one", action="store_true", help=argparse.SUPPRESS)  # a child: train --seeds in this process
    return p


def parse_seeds(p: argparse.ArgumentParser, text: str) -> list[int]:
    try:
        return [int(s) for s in text.split(",")]
    except ValueError:
        p.error(f"--seeds must be comma-separated integers, got {text!r}")
