#!/usr/bin/env python
"""Does rlvr's GRPO teach SmolLM2-135M two-digit addition within 30 CPU-minutes, at every seed?

Trains configs/arith-lora-smollm2.yaml, the config of `make run` (configs/arith-smollm2.yaml, where
the reward and curriculum are described, with LoRA adapters, eight prompts of four completions a
step and an lr decay over the time budget) for
`--minutes` (the trainer's max_minutes, which does not count evaluations; the reported minutes
are the summed step times), once per seed in `--seeds`, `--parallel` runs at a time (one torch
thread each). Greedy accuracy on 200 held-out two-digit sums is measured before training, every
`--eval-every` steps, and after.
Each seed's run folder keeps its metrics, evals and curves; the folder above gets
accuracy.png, held-out accuracy against training minutes for every seed.

    python bench/learn_arith.py [--seeds 0,1,2] [--minutes 30] [--run-dir runs/learn_arith] [--set key=value ...]
Ends with `RESULT {"seeds": [...], "accuracy_before": [...], "accuracy_after": [...],
"median_accuracy_after": ..., "min_accuracy_after": ..., "spread_accuracy_after": ..., "eval_seed": ...,
"minutes_to_0.5": [...], "median_minutes_to_0.5": ...}`
(spread: the highest minus the lowest seed's accuracy; eval_seed: the first env seed of the held-out
prompts, 1,000,000 unless `--set eval_seed=N` picks another set; minutes_to_0.5: training minutes to
the first evaluation at 0.5 or more; null if never).
The recipe was chosen on seeds 0, 1 and 2 and the default held-out set: `--seeds 3,4,5
--set eval_seed=2000000` reports it on seeds and prompts it was never tried on.
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def train_one(config_path: str, run_dir: Path, minutes: float, eval_every: int, overrides: list[str]) -> dict:
    """One training run in this process; returns its summary (also written to run_dir/summary.json)."""
    from seed_runs import training_curve

    from rlvr.trainer.config import load_config
    from rlvr.trainer.grpo import GRPOTrainer
    from rlvr.trainer.plot import write_plots

    # steps is only an upper bound here: the time budget ends the run
    config = load_config(config_path, ["steps=5000", "eval_prompts=200", "progress=false", "threads=1",
                                       f"eval_every={eval_every}", f"max_minutes={minutes}", *overrides])
    shutil.rmtree(run_dir, ignore_errors=True)
    load_before = os.getloadavg()
    trainer = GRPOTrainer(config, run_dir)
    t0 = time.perf_counter()
    records = trainer.train()
    wall = time.perf_counter() - t0
    evals = trainer.evals.read()
    write_plots(run_dir)
    elapsed, curve = training_curve(records, evals)
    for r in records:
        print(f"[seed {config.seed}] step {r['step']:3d} reward {r['reward_mean']:.3f} acc {r['accuracy']:.3f} "
              f"zero-var {r['zero_var_frac']:.2f} len {r['completion_len']:.1f} {r['step_s']:.1f}s {r['env_kwargs']}")
    reached = [m for m, acc in curve if acc >= 0.5]
    summary = {"seed": config.seed, "steps": len(records), "minutes": round(elapsed, 1),
               "accuracy_before": evals[0]["accuracy"], "accuracy_after": evals[-1]["accuracy"],
               "minutes_to_0.5": reached[0] if reached else None, "curve": curve,
               "wall_minutes": round(wall / 60, 1), "load_before": round(load_before[0], 2),
               "load_after": round(os.getloadavg()[0], 2), "eval_seed": config.eval_seed}
    (run_dir / "summary.json").write_text(json.dumps(summary))
    print(f"[seed {config.seed}] summary {json.dumps(summary)}")
    return summary


def plot_seeds(summaries: list[dict], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4))
    for s in summaries:
        ax.plot([m for m, _ in s["curve"]], [a for _, a in s["curve"]], "o-", label=f"seed {s['seed']}")
    ax.set_xlabel("training minutes (one CPU core)")
    ax.set_ylabel("held-out accuracy (greedy, 200 prompts)")
    ax.set_ylim(0, 1)
    ax.grid(alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def main(argv=None) -> int:
    from seed_runs import parse_seeds, run_seeds, seeds_parser

    p = seeds_parser(__doc__.split("\n")[0], ROOT / "configs" / "arith-lora-smollm2.yaml", ROOT / "runs" / "learn_arith")
    args = p.parse_args(argv)
    seeds = parse_seeds(p, args.seeds)
    run_dir = Path(args.run_dir)
    if args.one:
        train_one(args.config, run_dir, args.minutes, args.eval_every, [*args.overrides, f"seed={seeds[0]}"])
        return 0

    load_before = os.getloadavg()
    summaries = run_seeds(__file__, seeds, args.parallel, lambda seed: ["--minutes", str(args.minutes),
                   "--eval-every", str(args.eval_every), "--config", args.config,
                   "--run-dir", str(run_dir / f"seed-{seed}"), *(f"--set={o}" for o in args.overrides)], run_dir)
    if summaries is None:
        return 1
    for s in summaries:
        print(f"seed {s['seed']}: {s['accuracy_before']:.3f} -> {s['accuracy_after']:.3f} in {s['minutes']} min "
              f"({s['steps']} steps), 0.5 after {s['minutes_to_0.5']} min; curve {s['curve']}")
    plot_seeds(summaries, run_dir / "accuracy.png")
    print(f"load average before {load_before[0]:.2f}, after {os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs; "
          f"curves: {run_dir / 'accuracy.png'}")
    after = [s["accuracy_after"] for s in summaries]
    eval_seed = summaries[0]["eval_seed"]
    to_half = [s["minutes_to_0.5"] for s in summaries]
    # a seed that never reached 0.5 counts as slower than every seed that did
    median_to_half = statistics.median([m if m is not None else float("inf") for m in to_half])
    print("RESULT " + json.dumps({
        "seeds": seeds, "accuracy_before": [s["accuracy_before"] for s in summaries], "accuracy_after": after,
        "median_accuracy_after": statistics.median(after), "min_accuracy_after": min(after),
        "spread_accuracy_after": round(max(after) - min(after), 4), "eval_seed": eval_seed,
        "minutes_to_0.5": to_half,
        "median_minutes_to_0.5": None if median_to_half == float("inf") else median_to_half,
        "minutes": [s["minutes"] for s in summaries], "steps": [s["steps"] for s in summaries]}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
