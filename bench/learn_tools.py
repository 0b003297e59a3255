#!/usr/bin/env python
"""Does rlvr's GRPO teach SmolLM2-135M to use a python tool within 30 CPU-minutes?

The task is the product of two 3-digit numbers (rlvr/ToolMath-v0 with the sandboxed `python`
tool, configs/tools-smollm2.yaml): a 135M model cannot multiply them in its head, and untrained
it never calls the tool. Trains for at most `--minutes` of training time and reports greedy
accuracy on 200 held-out prompts (no worked examples in the prompt) before and after, and the
share of correct answers whose episode called the tool. Needs Docker (the sandbox).

    python bench/learn_tools.py [--minutes 30] [--run-dir runs/learn_tools] [--set key=value ...]
One seed a run: `--set seed=1` (the config's seed, 0, by default).
Ends with `RESULT {"seed": ..., "accuracy_before": ..., "accuracy_after": ..., "tool_use_among_correct": ...,
"minutes": ...}`.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--minutes", type=float, default=30.0, help="training budget (summed step times)")
    p.add_argument("--config", default=str(ROOT / "configs" / "tools-smollm2.yaml"))
    p.add_argument("--run-dir", default=str(ROOT / "runs" / "learn_tools"))
    p.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE")
    args = p.parse_args(argv)

    from rlvr.trainer.config import load_config
    from rlvr.trainer.grpo import GRPOTrainer
    from rlvr.trainer.plot import write_plots

    config = load_config(args.config, ["progress=false", f"max_minutes={args.minutes}", *args.overrides])
    shutil.rmtree(args.run_dir, ignore_errors=True)
    load_before = os.getloadavg()
    trainer = GRPOTrainer(config, args.run_dir)
    t0 = time.perf_counter()
    records = trainer.train()
    wall = time.perf_counter() - t0
    evals = trainer.evals.read()
    train_minutes = sum(r["step_s"] for r in records) / 60
    write_plots(args.run_dir)
    for r in records:
        print(f"step {r['step']:3d} reward {r['reward_mean']:.3f} acc {r['accuracy']:.3f} "
              f"zero-var {r['zero_var_frac']:.2f} turns {r.get('turns_mean', 1):.2f} "
              f"calls {r.get('tool_calls_mean', 0):.2f} errors {r['errors']} {r['step_s']:.1f}s {r['env_kwargs']}")
    print(f"evals: {evals}")
    print(f"training {train_minutes:.1f} min over {len(records)} steps; wall incl. evals {wall / 60:.1f} min; "
          f"load average before {load_before[0]:.2f}, after {os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs")
    print("RESULT " + json.dumps({"seed": config.seed, "accuracy_before": evals[0]["accuracy"], "accuracy_after": evals[-1]["accuracy"],
                                  "tool_use_among_correct": evals[-1]["tool_use_among_correct"],
                                  "minutes": round(train_minutes, 1)}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
