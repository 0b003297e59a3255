#!/usr/bin/env python
"""Does rlvr's GRPO make SmolLM2-135M better at packaged code tasks, through the Docker sandbox, at every seed?

Trains configs/code-lora-smollm2.yaml (the recipe; its comments say why each choice) for `--minutes`
of training time (the trainer's max_minutes, which does not count evaluations) once per seed in
`--seeds`, `--parallel` runs at a time (one torch thread each), and measures greedy pass@1 (every
test passing), before training and after:
- rlvr/CodeGen-v0 at difficulty 1: the trainer's own held-out evaluation (the recipe's `eval_env`),
  on `eval_prompts` prompts from `eval_seed`, also every `--eval-every` steps for the curve;
- rlvr/CodeGen-v0 at difficulty 2 on the same seeds (report only);
- MBPP's test split, its 500 tasks each once (`--mbpp-limit` fewer; 0 skips it).
It also reports the share of step time spent in the envs, i.e. the sandbox scoring (`env_s` /
`step_s` summed over the run), so scoring is never the unseen bottleneck. Needs Docker (the
sandbox) and, for MBPP, its copy under ../shared/datasets or the hub.

    python bench/learn_code.py [--seeds 0,1,2] [--minutes 30] [--run-dir runs/learn_code] [--set key=value ...]
    python bench/learn_code.py --seeds 3,4,5 --set eval_seed=4000000   # seeds and prompts never tried
Ends with `RESULT {"seeds": [...], "accuracy_before": [...], "accuracy_after": [...] (CodeGen
difficulty 1), "d2_before": [...], "d2_after": [...], "mbpp_before": [...], "mbpp_after": [...],
"mbpp_change": [...], "scoring_share": [...], "median_accuracy_after": ..., "min_accuracy_after": ...,
"spread_accuracy_after": ..., "eval_seed": ..., "minutes": [...], "steps": [...]}`, one item per seed.
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
CODEGEN = "rlvr/CodeGen-v0"
MBPP = "rlvr/MBPP-v0"


def evaluations(trainer, mbpp_limit: int) -> dict:
    """Greedy pass@1 of the trainer's model on CodeGen difficulty 2 (its held-out seeds) and MBPP's test split
    (difficulty 1 is the trainer's own held-out evaluation)."""
    import torch

    from rlvr.envs.base import ENV_OPTIONS
    from rlvr.evaluation.passk import evaluate_pass_at_k
    from rlvr.trainer.heldout import evaluate_held_out
    from rlvr.trainer.packed_weights import packed_linears
    from rlvr.trainer.rollout.chat import eos_ids
    from rlvr.trainer.rollout.local import LocalGenerator

    cfg, model, tok = trainer.config, trainer.model, trainer.tokenizer
    tokens = cfg.eval_max_new_tokens or cfg.max_new_tokens
    # the recipe's env options (system prompt, reward weights) apply to every evaluation set
    options = {k: v for k, v in cfg.eval_target(0)[1].items() if k in ENV_OPTIONS}
    # as the trainer's own evaluation samples: fp32 weights packed for oneDNN, no gradients
    with torch.no_grad(), packed_linears(model, enabled=True, rows=cfg.eval_batch_size, dtype=torch.float32):
        out = {"d2": evaluate_held_out(model, tok, CODEGEN, {**options, "difficulty": 2}, cfg.eval_prompts,
                                       seed=cfg.eval_seed, max_new_tokens=tokens,
                                       batch=cfg.eval_batch_size)["accuracy"]}
        if mbpp_limit:
            result = evaluate_pass_at_k(MBPP, LocalGenerator(model, tok.pad_token_id), tokenizer=tok,
                                        env_kwargs={**options, "split": "test"}, limit=mbpp_limit,
                                        batch_size=cfg.eval_batch_size, max_new_tokens=tokens, progress=False,
                                        stop_token_ids=eos_ids(tok, model))
            out["mbpp"] = result.pass_at[1]
    return out


def train_one(config_path: str, run_dir: Path, minutes: float, eval_every: int, mbpp_limit: int,
              overrides: list[str]) -> dict:
    """One training run in this process; returns its summary (also written to run_dir/summary.json)."""
    from seed_runs import training_curve

    from rlvr.trainer.config import load_config
    from rlvr.trainer.grpo import GRPOTrainer
    from rlvr.trainer.plot import write_plots

    config = load_config(config_path, ["steps=5000", "progress=false", "threads=1", f"eval_every={eval_every}",
                                       f"max_minutes={minutes}", *overrides])
    env, kwargs = config.eval_target(0)
    if env != CODEGEN or kwargs.get("difficulty") != 1 or not config.eval_prompts:
        raise SystemExit(f"{config_path}: the held-out evaluation must be {CODEGEN} at difficulty 1 (eval_env, "
                         f"eval_env_kwargs, eval_prompts > 0); it is {env} {kwargs}, {config.eval_prompts} prompts")
    shutil.rmtree(run_dir, ignore_errors=True)
    load_before = os.getloadavg()
    trainer = GRPOTrainer(config, run_dir)
    before = evaluations(trainer, mbpp_limit)
    t0 = time.perf_counter()
    records = trainer.train()
    wall = time.perf_counter() - t0
    after = evaluations(trainer, mbpp_limit)
    evals = trainer.evals.read()
    write_plots(run_dir)
    elapsed, curve = training_curve(records, evals)
    for r in records:
        print(f"[seed {config.seed}] step {r['step']:3d} reward {r['reward_mean']:.3f} acc {r['accuracy']:.3f} "
              f"zero-var {r['zero_var_frac']:.2f} len {r['completion_len']:.1f} cut {r['truncated_frac']:.2f} "
              f"{r['step_s']:.1f}s (envs {r['env_s']:.1f}s) {r['env_kwargs']}")
    step_s = sum(r["step_s"] for r in records)
    summary = {"seed": config.seed, "steps": len(records), "minutes": round(elapsed, 1),
               "accuracy_before": evals[0]["accuracy"], "accuracy_after": evals[-1]["accuracy"],
               "d2_before": before["d2"], "d2_after": after["d2"],
               "mbpp_before": before.get("mbpp"), "mbpp_after": after.get("mbpp"),
               "scoring_share": round(sum(r["env_s"] for r in records) / step_s, 4) if step_s else None,
               "curve": curve,
               "wall_minutes": round(wall / 60, 1), "load_before": round(load_before[0], 2),
               "load_after": round(os.getloadavg()[0], 2), "eval_seed": config.eval_seed}
    (run_dir / "summary.json").write_text(json.dumps(summary))
    print(f"[seed {config.seed}] summary {json.dumps(summary)}")
    return summary


def main(argv=None) -> int:
    from seed_runs import parse_seeds, run_seeds, seeds_parser

    p = seeds_parser(__doc__.split("\n")[0], ROOT / "configs" / "code-lora-smollm2.yaml", ROOT / "runs" / "learn_code")
    p.add_argument("--mbpp-limit", type=int, default=500, help="MBPP test tasks evaluated (0: none)")
    args = p.parse_args(argv)
    seeds = parse_seeds(p, args.seeds)
    if args.minutes <= 0 or args.mbpp_limit < 0:
        p.error("--minutes must be > 0 and --mbpp-limit >= 0")
    run_dir = Path(args.run_dir)
    if args.one:
        train_one(args.config, run_dir, args.minutes, args.eval_every, args.mbpp_limit,
                  [*args.overrides, f"seed={seeds[0]}"])
        return 0

    load_before = os.getloadavg()
    summaries = run_seeds(__file__, seeds, args.parallel, lambda seed: ["--minutes", str(args.minutes),
                   "--eval-every", str(args.eval_every), "--mbpp-limit", str(args.mbpp_limit),
                   "--config", args.config, "--run-dir", str(run_dir / f"seed-{seed}"),
                   *(f"--set={o}" for o in args.overrides)], run_dir)
    if summaries is None:
        return 1
    for s in summaries:
        print(f"seed {s['seed']}: CodeGen d1 {s['accuracy_before']:.3f} -> {s['accuracy_after']:.3f}, "
              f"d2 {s['d2_before']:.3f} -> {s['d2_after']:.3f}, MBPP {s['mbpp_before']} -> {s['mbpp_after']} "
              f"in {s['minutes']} min ({s['steps']} steps), scoring share {s['scoring_share']}; curve {s['curve']}")
    print(f"load average before {load_before[0]:.2f}, after {os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs")
    after = [s["accuracy_after"] for s in summaries]
    mbpp_change = [None if s["mbpp_after"] is None else round(s["mbpp_after"] - s["mbpp_before"], 4)
                   for s in summaries]
    print("RESULT " + json.dumps({
        "seeds": seeds, "accuracy_before": [s["accuracy_before"] for s in summaries], "accuracy_after": after,
        "d2_before": [s["d2_before"] for s in summaries], "d2_after": [s["d2_after"] for s in summaries],
        "mbpp_before": [s["mbpp_before"] for s in summaries], "mbpp_after": [s["mbpp_after"] for s in summaries],
        "mbpp_change": mbpp_change, "scoring_share": [s["scoring_share"] for s in summaries],
        "median_accuracy_after": statistics.median(after), "min_accuracy_after": min(after),
        "spread_accuracy_after": round(max(after) - min(after), 4), "eval_seed": summaries[0]["eval_seed"],
        "minutes": [s["minutes"] for s in summaries], "steps": [s["steps"] for s in summaries]}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
