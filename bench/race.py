#!/usr/bin/env python
"""A recipe through rlvr's trainer and through TRL's GRPOTrainer with PEFT, side by side, one core each.

`--config` names any single-turn LoRA recipe (configs/*.yaml; default the code recipe). Both sides train it from the same
SmolLM2-135M-Instruct for `--minutes` of training time (evaluations not counted), at the same time,
each pinned to its own CPU core with one torch thread, on
- the same prompts in the same order (prompt k is the env's `reset(seed=seed + k)`; TRL's dataset is
  `rlvr.integrations.trl.env_dataset`, unshuffled), the same reward code (`EnvReward`, the env's own
  scoring: the sandbox for code), the same LoRA rank, alpha and target modules, the same group shape
  (P prompts x G completions an optimizer step), completion length, temperature, lr, clip range, KL
  weight, loss aggregation (token-mean = TRL's `dapo`) and reward scaling; the same stop strings (the env's
  `stop`: TRL's generate gets them with the tokenizer TRL does not hand it; a completion stopped there
  ends in one pad token, SmolLM2's end-of-sequence token, which TRL keeps as its end); TRL computes its
  loss in micro-batches of at most `TRL_ROWS` completions, accumulated into the same optimizer step;
- the same held-out evaluation: rlvr's greedy `evaluate_held_out` on the config's `eval_prompts`
  from `eval_seed`, with each side's model, before training, every `eval_every` optimizer steps
  (the config's, or `--set eval_every=N`) and after; each point is placed at the side's training
  minutes so far.
What TRL cannot take from a recipe is refused with a reason, or said: a curriculum, refill rounds,
replays, async sampling, multi-turn envs and other advantages are refused; the lr schedule runs
over steps in TRL (constant after warm-up: a decay over a time budget has no TRL equivalent) and
over the time budget in rlvr (the recipe's `decay_start`, `min_lr_ratio`).

    python bench/race.py --config configs/code-lora-smollm2.yaml [--minutes 30] [--seed 0] [--set eval_every=10]
Ends with `RESULT {"config": ..., "seed": ..., "minutes": ..., "rlvr": {"curve": [[minutes, accuracy], ...],
"steps": ..., "accuracy_after": ...}, "trl": {...}, "target": ..., "minutes_to_target": {"rlvr": ..., "trl": ...},
"time_ratio": ...}`: `target` is the lower of the two final accuracies (the higher where one side never rose
above its start), `minutes_to_target` the training minutes each side took to first reach it, `time_ratio`
rlvr's over TRL's (below 1: rlvr ahead), or a bound on it where one side never reached the target (`verdict`).
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PEER_DIR = ROOT.parent / "shared" / "bench"  # the peer's model loader (plain fp32 SmolLM2 for transformers.Trainer)
# TRL's loss forward keeps full-vocabulary logits and entropies in fp32: on 32 rows of 128 completion tokens
# (the code recipe's batch) it took 16 GB and climbing, too much beside the other side on a 24 GB machine
TRL_ROWS = 8
LOSS_TYPES = {"token-mean": "dapo", "seq-mean-token-mean": "grpo", "seq-mean-token-sum-norm": "dr_grpo"}


def recipe(config_path: str, seed: int, minutes: float, overrides: list[str]):
    from rlvr.trainer.config import load_config

    return load_config(config_path, [*overrides, f"seed={seed}", f"max_minutes={minutes}", "steps=100000",
                                     "threads=1", "progress=false"])


def refusal(cfg) -> str | None:
    """Why TRL's GRPOTrainer cannot run this recipe as rlvr does, or None."""
    from rlvr.trainer.rollout.envs import is_multiturn, make_envs

    checks = [
        (cfg.lora is None, "the race compares LoRA recipes (TRL with a peft_config); the config has no lora"),
        (cfg.model != "smollm2", f"the peer loads SmolLM2 only; the config's model is {cfg.model!r}"),
        (bool(cfg.curriculum), "TRL's dataset is fixed: a curriculum has no TRL equivalent"),
        (cfg.refill_rounds > 0, "TRL has no refill rounds (dynamic sampling)"),
        (cfg.replay_fraction > 0, "TRL has no prompt replay"),
        (cfg.async_ is not None, "the race runs synchronous recipes"),
        (cfg.advantage != "grpo", f"TRL computes GRPO advantages, not {cfg.advantage!r}"),
        (cfg.aggregation not in LOSS_TYPES, f"no TRL loss_type for aggregation {cfg.aggregation!r}"),
        (cfg.mu != 1, "the race runs one optimisation pass a batch (mu: 1)"),
    ]
    for failed, why in checks:
        if failed:
            return why
    envs = make_envs(cfg.env, cfg.env_kwargs, 1)
    try:
        if is_multiturn(envs[0]):
            return "multi-turn envs play differently in TRL (its own environment loop): single-turn recipes only"
    finally:
        envs[0].close()
    return None


def held_out(cfg, model, tokenizer) -> float:
    import torch

    from rlvr.trainer.heldout import evaluate_held_out
    from rlvr.trainer.packed_weights import packed_linears

    was_training = model.training
    model.eval()
    try:
        with torch.no_grad(), packed_linears(model, enabled=True, rows=cfg.eval_batch_size, dtype=torch.float32):
            result = evaluate_held_out(model, tokenizer, *cfg.eval_target(0), cfg.eval_prompts, seed=cfg.eval_seed,
                                       max_new_tokens=cfg.eval_max_new_tokens or cfg.max_new_tokens,
                                       batch=cfg.eval_batch_size, max_episode_tokens=cfg.max_episode_tokens)
    finally:
        model.train(was_training)
    return result["accuracy"]


def run_rlvr(cfg, run_dir: Path) -> dict:
    """rlvr's trainer on the recipe, as `rlvr train` runs it; its held-out evaluations make the curve."""
    from seed_runs import training_curve  # race.py's folder is first on sys.path when it runs

    from rlvr.trainer.grpo import GRPOTrainer

    trainer = GRPOTrainer(cfg, run_dir)
    records = trainer.train()
    _, curve = training_curve(records, trainer.evals.read())
    return {"curve": curve, "steps": len(records), "accuracy_after": curve[-1][1]}


def run_trl(cfg, run_dir: Path) -> dict:
    """TRL's GRPOTrainer with a peft LoRA on the recipe; the same evaluation after the same steps."""
    import torch
    from peft import LoraConfig
    from transformers import TrainerCallback
    from trl import GRPOConfig, GRPOTrainer

    from rlvr.integrations.trl import EnvReward, env_dataset
    from rlvr.trainer.rollout.envs import make_envs, stop_strings

    sys.path.insert(0, str(PEER_DIR))
    from trl_grpo_step import build_model_and_tokenizer

    torch.manual_seed(cfg.seed)
    model, tok = build_model_and_tokenizer("smollm2", seed=cfg.seed)
    lora = cfg.lora
    peft_config = LoraConfig(r=lora["rank"], lora_alpha=lora["alpha"], lora_dropout=lora["dropout"],
                             target_modules=lora["target_modules"])
    # more prompts than the time budget can use: at most one step a second
    steps = int(60 * cfg.max_minutes) + 1
    # one optimizer step a batch of P x G completions, its loss forward in micro-batches of at most TRL_ROWS
    batch = cfg.prompts_per_step * cfg.group_size
    rows = max(r for r in range(1, min(batch, TRL_ROWS) + 1) if batch % r == 0)
    dataset = env_dataset(cfg.env, cfg.prompts_per_step * steps, seed=cfg.seed, **cfg.env_kwargs)
    env = make_envs(cfg.env, cfg.env_kwargs, 1)[0]
    stop = list(stop_strings(env))
    env.close()
    args = GRPOConfig(
        output_dir=str(run_dir), use_cpu=True, bf16=False, fp16=False, report_to="none", save_strategy="no",
        logging_steps=1, disable_tqdm=True, dataloader_num_workers=0, gradient_checkpointing=False,
        max_steps=steps, per_device_train_batch_size=rows, gradient_accumulation_steps=batch // rows,
        num_generations=cfg.group_size, max_completion_length=cfg.max_new_tokens,
        temperature=cfg.temperature, top_p=cfg.top_p, learning_rate=cfg.lr, lr_scheduler_type="constant_with_warmup",
        warmup_steps=cfg.warmup_steps, weight_decay=cfg.weight_decay, adam_beta1=cfg.adam_betas[0],
        adam_beta2=cfg.adam_betas[1], max_grad_norm=cfg.max_grad_norm, beta=cfg.beta, epsilon=cfg.epsilon_low,
        epsilon_high=cfg.epsilon_high, loss_type=LOSS_TYPES[cfg.aggregation], scale_rewards=cfg.scale_rewards,
        mask_truncated_completions=cfg.mask_truncated, num_iterations=1, seed=cfg.seed, shuffle_dataset=False,
        generation_kwargs={"stop_strings": stop} if stop else None)
    curve: list[tuple[float, float]] = []
    clock = {"train_s": 0.0}

    class Budget(TrainerCallback):
        """Training time from step begin to step end (evaluations fall outside it); the evaluations; the stop."""

        def on_train_begin(self, a, state, control, model=None, **kw):
            curve.append((0.0, held_out(cfg, model, tok)))

        def on_step_begin(self, a, state, control, **kw):
            self.t0 = time.perf_counter()

        def on_step_end(self, a, state, control, model=None, **kw):
            clock["train_s"] += time.perf_counter() - self.t0
            done = clock["train_s"] >= 60 * cfg.max_minutes
            if done or (cfg.eval_every and state.global_step % cfg.eval_every == 0):
                curve.append((round(clock["train_s"] / 60, 2), held_out(cfg, model, tok)))
            control.should_training_stop = done

    trainer = GRPOTrainer(model=model, reward_funcs=[EnvReward(cfg.env, **cfg.env_kwargs)], args=args,
                          train_dataset=dataset, processing_class=tok, peft_config=peft_config, callbacks=[Budget()])
    if stop:  # transformers matches stop strings only when generate is handed the tokenizer, which TRL does not do
        trainer.model.generate = functools.partial(trainer.model.generate, tokenizer=tok)
    trainer.train()
    return {"curve": curve, "steps": trainer.state.global_step, "accuracy_after": curve[-1][1],
            "trl": __import__("trl").__version__}


def minutes_to(curve: list, target: float) -> float | None:
    return next((m for m, acc in curve if acc >= target), None)


def verdict(results: dict, minutes: float) -> dict:
    """Time to the same accuracy. The target is the lower final accuracy when both sides rose above their start;
    otherwise the better side's final accuracy, which the other did not reach in the budget: then only a bound
    on the ratio is known (`time_ratio_at_most` below 1 or `time_ratio_at_least` above it)."""
    rlvr, trl = results["rlvr"], results["trl"]
    finals = (rlvr["accuracy_after"], trl["accuracy_after"])
    rose = all(r["accuracy_after"] > r["curve"][0][1] for r in (rlvr, trl))
    target = min(finals) if rose else max(finals)
    to = {"rlvr": minutes_to(rlvr["curve"], target), "trl": minutes_to(trl["curve"], target)}
    out = {"target": target, "minutes_to_target": to, "time_ratio": None}
    if to["rlvr"] and to["trl"]:
        out["time_ratio"] = round(to["rlvr"] / to["trl"], 3)
    elif to["rlvr"] and to["trl"] is None:
        out["time_ratio_at_most"] = round(to["rlvr"] / minutes, 3)
    elif to["trl"] and to["rlvr"] is None:
        out["time_ratio_at_least"] = round(minutes / to["trl"], 3)
    return out


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--config", default=str(ROOT / "configs" / "code-lora-smollm2.yaml"),
                   help="a single-turn LoRA recipe (configs/*.yaml)")
    p.add_argument("--minutes", type=float, default=30.0, help="training minutes a side (evaluations not counted)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--run-dir", default=str(ROOT / "runs" / "race"))
    p.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE")
    p.add_argument("--side", choices=("rlvr", "trl"), help=argparse.SUPPRESS)  # a child: one side, in this process
    p.add_argument("--core", type=int, default=None, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.minutes <= 0:
        p.error("--minutes must be > 0")
    try:
        cfg = recipe(args.config, args.seed, args.minutes, args.overrides)
    except (OSError, ValueError, TypeError) as e:
        p.error(f"--config {args.config}: {e}")
    run_dir = Path(args.run_dir)
    if args.side:
        import torch

        if args.core is not None:
            os.sched_setaffinity(0, {args.core})
        torch.set_num_threads(1)
        side_dir = run_dir / args.side
        side_dir.mkdir(parents=True, exist_ok=True)
        result = (run_rlvr if args.side == "rlvr" else run_trl)(cfg, side_dir)
        (side_dir / "result.json").write_text(json.dumps(result))
        return 0

    why = refusal(cfg)
    if why:
        p.error(f"{args.config}: {why}")
    cores = sorted(os.sched_getaffinity(0))
    if len(cores) < 2:
        p.error("the race needs two CPU cores, one a side")
    run_dir.mkdir(parents=True, exist_ok=True)
    load_before = os.getloadavg()
    procs = {}
    for side, core in zip(("rlvr", "trl"), cores):
        cmd = [sys.executable, __file__, "--side", side, "--core", str(core), "--config", args.config,
               "--minutes", str(args.minutes), "--seed", str(args.seed),
               "--run-dir", str(run_dir), *(f"--set={o}" for o in args.overrides)]
        log = open(run_dir / f"{side}.log", "w")
        procs[side] = (subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT), log)
    failed = []
    for side, (proc, log) in procs.items():
        if proc.wait():
            failed.append(side)
        log.close()
    if failed:
        print(f"side(s) {failed} failed: see {run_dir}/<side>.log", file=sys.stderr)
        return 1
    results = {side: json.loads((run_dir / side / "result.json").read_text()) for side in procs}
    result = verdict(results, args.minutes)
    for side, r in results.items():
        print(f"{side}: {r['steps']} steps, held-out accuracy {r['curve'][0][1]:.3f} -> {r['accuracy_after']:.3f}; "
              f"curve {r['curve']}")
    print(f"load average before {load_before[0]:.2f}, after {os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs; "
          f"cores {cores[:2]}, one torch thread a side")
    print("RESULT " + json.dumps({"config": args.config, "seed": args.seed, "minutes": args.minutes,
                                  **results, **result}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
