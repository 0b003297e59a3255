#!/usr/bin/env python
"""Does rlvr's GRPO teach SmolLM2-135M two-digit addition within 30 CPU-minutes?

Trains with configs/arith-smollm2.yaml (hardened composite reward: a correct single final
\\boxed{} answer, plus partial credit for the right final number and for exactly one final box,
weighted as the config says; a curriculum from one-digit to two-digit sums) for at most
`--minutes` of training wall time, and measures greedy accuracy on 200 held-out two-digit
addition prompts before and after. The run folder keeps the metrics, the evals and the reward
curve (reward.png).

    python bench/learn_arith.py [--minutes 30] [--run-dir runs/learn_arith] [--set key=value ...]
Ends with `RESULT {"accuracy_before": ..., "accuracy_after": ..., "minutes": ...}`.
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
    p.add_argument("--minutes", type=float, default=30.0, help="training wall-time budget")
    p.add_argument("--config", default=str(ROOT / "configs" / "arith-smollm2.yaml"))
    p.add_argument("--run-dir", default=str(ROOT / "runs" / "learn_arith"))
    p.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE")
    args = p.parse_args(argv)

    from rlvr.trainer.config import load_config
    from rlvr.trainer.grpo import GRPOTrainer
    from rlvr.trainer.plot import write_plots

    # steps is only an upper bound here: the time budget ends the run
    config = load_config(args.config, ["steps=1000", "eval_prompts=200", "progress=false",
                                       f"max_minutes={args.minutes}", *args.overrides])
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
              f"zero-var {r['zero_var_frac']:.2f} len {r['completion_len']:.1f} {r['step_s']:.1f}s "
              f"{r['env_kwargs']}")
    print(f"evals: {evals}")
    print(f"training {train_minutes:.1f} min over {len(records)} steps; wall incl. evals {wall / 60:.1f} min; "
          f"load average before {load_before[0]:.2f}, after {os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs")
    print(f"curve: {Path(args.run_dir) / 'reward.png'}")
    print("RESULT " + json.dumps({"accuracy_before": evals[0]["accuracy"], "accuracy_after": evals[-1]["accuracy"],
                                  "minutes": round(train_minutes, 1)}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
