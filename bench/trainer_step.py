#!/usr/bin/env python
"""rlvr's GRPO step against TRL's GRPOTrainer on the identical configuration.

The peer is `../shared/bench/trl_grpo_step.py`: its task (`make_prompts`, `sum_reward`), its model
builders (`build_model_and_tokenizer`, same seed), its G, prompts per step and completion
length. Each trainer runs in its own process (so peak RSS is its own), for the same number of
steps, one after the other; the first step (warm-up) is excluded from the per-step median.
rlvr sees the task through the env contract: a small gymnasium env serves prompt k of
`make_prompts` on `reset(seed=k)` and scores with `sum_reward`.

TRL runs in fp32 (the peer sets bf16=False). rlvr is measured against the same TRL run as
`fp32` (fp32 throughout, TRL's precision) and `bf16-sampling` (sampling in bf16: packed bf16
linears where oneDNN computes in bf16, autocast elsewhere; training in fp32, tokens reweighted by
the truncated importance weight); each row says which.
The `lora` variant trains LoRA adapters (peft, rank `--rank`, alpha 2 x rank, every linear layer
of the decoder) and is compared with TRL's GRPOTrainer given the same `peft_config` (the peer script
run unchanged, with that one argument added, on the same model, steps and geometry: each row checks
that both sides ran the setup asked for), and with rlvr's fp32 full fine-tuning row of the same run.
Each row gives both sides' mean generated tokens per step: a trainer that generates longer
completions does more work, so a row where the two differ much is not like for like. TRL runs the
forward and backward of every group, also of a group whose completions all got the same reward (its
advantages are 0); rlvr skips those by default (`skip_zero_variance`): a saving for its users, but not
the work TRL's step does. So rlvr trains every group here too, unless `--skip-zero-variance 1` asks for
its default; each row says which and gives the share of groups rlvr skipped (`rlvr_skipped_group_frac`).
Both sides' figures leave out the first step (warm-up): the wall seconds and the process CPU seconds.
`--repeats N` runs each side N times per row, alternating which goes first, and reports the
median of the N paired ratios (on a shared machine, drift then hits both sides alike).

    python bench/trainer_step.py                 # every configuration, full fine-tuning and LoRA rows
    python bench/trainer_step.py --only smollm2 --variants lora --repeats 3   # the LoRA rows
    python bench/trainer_step.py --only smollm2-G4 --variants lora --repeats 2 --background 2   # contended
`--background N` starts N busy processes beside each run (started with it, stopped after it): both sides
meet the same fixed load, which a machine's other jobs never guarantee. `--pin` says where that load runs:
`other` puts the trainer on the first CPU and the busy processes on the rest (load beside it, no
time-slicing), `same` puts them all on the first CPU (the trainer time-sliced with them); by default the
OS places them. Pinned rows want `--threads 1`.

    python bench/trainer_step.py --only smollm2-G4 --variants lora --repeats 2 --threads 1 --background 2 --pin other

Ends with `RESULT {"configs": [...]}`.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

PEER_DIR = Path(__file__).resolve().parents[1].parent / "shared" / "bench"
PEER = PEER_DIR / "trl_grpo_step.py"
VARIANTS = {"fp32": "auto", "bf16-sampling": "bf16", "lora": "auto"}  # rlvr's sample_dtype for each
CONFIGS = [
    {"name": "smollm2-G4-P2-L32", "model": "smollm2", "G": 4, "P": 2, "L": 32},
    {"name": "smollm2-G8-P4-L64", "model": "smollm2", "G": 8, "P": 4, "L": 64},
    {"name": "tiny-G4-P2-L32", "model": "tiny", "G": 4, "P": 2, "L": 32},
]


def run_rlvr_worker(args) -> dict:
    """Train `args.steps` steps with rlvr on the peer's task and model; prints one RESULT_JSON line."""
    sys.path.insert(0, str(PEER_DIR))
    import gymnasium as gym
    import torch
    import trl_grpo_step as peer

    from rlvr.envs.spaces import AnyText, Messages
    from rlvr.trainer.config import TrainConfig
    from rlvr.trainer.grpo import GRPOTrainer

    rows = peer.make_prompts(args.P * (args.steps + 1), seed=0)

    class PeerSumEnv(gym.Env):
        """Prompt k of the peer's list on reset(seed=k); reward = the peer's sum_reward."""

        metadata: dict = {"render_modes": []}
        observation_space, action_space = Messages(), AnyText()

        def reset(self, *, seed=None, options=None):
            self.row = rows[seed % len(rows)]
            text = self.row["prompt"][0]["content"]
            return self.row["prompt"], {"task_id": str(seed), "family": "sum", "difficulty": 1, "prompt_text": text}

        def score_group(self, completions):
            rewards = peer.sum_reward(completions, [self.row["answer"]] * len(completions))
            return [(r, {"correct": r == 1.0, "score": {"score": r, "components": {"sum": r}}}) for r in rewards]

        def step(self, action):
            reward, info = self.score_group([action])[0]
            return [], reward, True, False, info

    gym.register("bench/PeerSum-v0", entry_point=PeerSumEnv)
    torch.manual_seed(0)
    model, tok = peer.build_model_and_tokenizer(args.model, seed=0)
    rss_after_load = peer.rss_mb()[0]
    # TRL's settings in the peer: lr 1e-6, beta 0, loss "dapo" (token-mean), epsilon 0.2, temperature 1,
    # group-scaled rewards with the sample std, one optimisation pass, grad-norm clipping at 1.
    config = TrainConfig(
        model=args.model, env="bench/PeerSum-v0", steps=args.steps, prompts_per_step=args.P, group_size=args.G,
        max_new_tokens=args.L, threads=args.threads, lr=1e-6, beta=0.0, aggregation="token-mean", epsilon_low=0.2, epsilon_high=0.2,
        temperature=1.0, scale_rewards="group", std="sample", mu=1, max_grad_norm=1.0, progress=False,
        autocast="off", sample_dtype=args.sample_dtype, skip_zero_variance=bool(args.skip_zero_variance),
        lora={"rank": args.lora_rank, "alpha": 2 * args.lora_rank} if args.lora_rank else None,
    )
    def cpu_s() -> float:
        ru = resource.getrusage(resource.RUSAGE_SELF)
        return ru.ru_utime + ru.ru_stime

    records, step_cpu = [], []
    with tempfile.TemporaryDirectory() as run_dir:
        trainer = GRPOTrainer(config, run_dir, model=model, tokenizer=tok)
        with peer.RSSSampler() as sampler:
            for _ in range(args.steps):  # what trainer.train() does, with the CPU time of each step
                c0 = cpu_s()
                records.append(trainer.train_step())
                step_cpu.append(cpu_s() - c0)
    step_s = [r["step_s"] for r in records]
    steady = step_s[1:] or step_s
    res = {
        "trainer": "rlvr", "model": args.model, "step_s": [round(s, 3) for s in step_s],
        "median_step_s_excl_first": round(statistics.median(steady), 3),
        "step_cpu_s": [round(c, 3) for c in step_cpu],
        "median_sampling_s": round(statistics.median([r["gen_s"] for r in records][1:] or [records[0]["gen_s"]]), 3),
        "peak_rss_during_train_mb": round(sampler.peak_mb, 1), "rss_after_load_mb": round(rss_after_load, 1),
        "zero_var_frac": [r["zero_var_frac"] for r in records],
        "gen_tokens_per_step": [round(r["tokens_per_s"] * r["step_s"]) for r in records],
        "mean_reward_per_step": [round(r["reward_mean"], 3) for r in records],
        "sampler_kl": [r["sampler_kl"] for r in records],
    }
    print("RESULT_JSON " + json.dumps(res))
    return res


def run_trl_peft_worker(rank: int, peer_args: list[str]) -> int:
    """The peer script, unchanged, with TRL's GRPOTrainer given a LoRA `peft_config` of `rank`.

    `peer_args` go to the peer's own parser untouched: parsed here first, `--model`, `--steps`, `-G`
    and `-P` were taken by this script's options of the same names, and the peer ran its defaults
    (the tiny random model, 3 steps), which is how an earlier LoRA row compared SmolLM2 with it."""
    sys.path.insert(0, str(PEER_DIR))
    import trl
    import trl_grpo_step as peer
    from peft import LoraConfig

    config = LoraConfig(r=rank, lora_alpha=2 * rank, lora_dropout=0.0, target_modules="all-linear")

    class PeftGRPOTrainer(trl.GRPOTrainer):
        def __init__(self, *a, **kw):
            super().__init__(*a, peft_config=config, **kw)

    trl.GRPOTrainer = PeftGRPOTrainer
    peer.main(peer_args)
    return 0


BUSY = "while True: pass"  # one core's worth of CPU demand, no memory traffic: the contended row's load


def placement(pin: str, cpus: set[int]) -> tuple[set[int] | None, set[int] | None]:
    """The CPUs of the trainer and of the busy processes under `--pin` (None: wherever the OS puts them)."""
    if pin == "none":
        return None, None
    first = {min(cpus)}
    if pin == "same":
        return first, first
    if len(cpus) < 2:
        raise ValueError("--pin other needs two CPUs: this process may run on one")
    return first, cpus - first


def _pinned(cpus: set[int] | None):
    """A `preexec_fn` that binds the child to `cpus` before it starts (None: no binding)."""
    return None if cpus is None else functools.partial(os.sched_setaffinity, 0, cpus)


def _run(cmd: list[str], background: int = 0, cpus: tuple = (None, None)) -> dict:
    """One trainer run in its own process, beside `background` busy processes started for it alone;
    `cpus` is `placement`'s (trainer CPUs, busy-process CPUs)."""
    env = {**os.environ, "TQDM_DISABLE": "1"}
    trainer_cpus, busy_cpus = cpus
    busy = [subprocess.Popen([sys.executable, "-c", BUSY], preexec_fn=_pinned(busy_cpus)) for _ in range(background)]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, env=env, preexec_fn=_pinned(trainer_cpus))
    finally:
        for b in busy:
            b.kill()
            b.wait()
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT_JSON ")]
    if proc.returncode or not lines:
        raise RuntimeError(f"{' '.join(cmd)} failed ({proc.returncode}):\n{proc.stderr[-3000:]}")
    return json.loads(lines[-1][len("RESULT_JSON "):])


def _side(runs: list[dict], expect: dict) -> dict:
    """One trainer's figures over `runs` (medians across repeats); refuses a run of another setup."""
    for r in runs:
        got = {k: r[k] for k in expect if k in r}
        if got != {k: expect[k] for k in got}:
            raise RuntimeError(f"{r.get('trainer')} ran {got}, not {expect}")
        if len(r["step_s"]) != expect["steps"]:
            raise RuntimeError(f"{r.get('trainer')} recorded {len(r['step_s'])} steps, not {expect['steps']}")
    med = statistics.median
    return {
        "s_per_step": med(r["median_step_s_excl_first"] for r in runs),
        "cpu_s_per_step": round(med(med(r["step_cpu_s"][1:] or r["step_cpu_s"]) for r in runs), 3),  # no warm-up
        "peak_rss_mb": med(r["peak_rss_during_train_mb"] for r in runs),
        "tokens_per_step": round(med(statistics.fmean(r["gen_tokens_per_step"]) for r in runs), 1),
        "step_s": [r["step_s"] for r in runs],
        "tokens": [r["gen_tokens_per_step"] for r in runs],
    }


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["--trl-peft-worker"]:  # --trl-peft-worker RANK PEER_ARGS...: nothing parsed here
        return run_trl_peft_worker(int(argv[1]), argv[2:])
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--steps", type=int, default=8,
                   help="optimizer steps per trainer (the first is warm-up); fewer make a noisy median")
    p.add_argument("--repeats", type=int, default=1,
                   help="runs of each trainer per row, alternating which goes first; the row gives medians "
                        "and the median of the per-repeat ratios (a shared machine's drift hits both alike)")
    p.add_argument("--only", help="run only the configurations whose name contains this")
    p.add_argument("--threads", type=int, default=0,
                   help="torch threads for both trainers (0 = torch's default); 1 resists a crowded machine better")
    p.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--model", default="tiny", help=argparse.SUPPRESS)
    p.add_argument("-G", type=int, default=4, help=argparse.SUPPRESS)
    p.add_argument("-P", type=int, default=2, help=argparse.SUPPRESS)
    p.add_argument("-L", type=int, default=32, help=argparse.SUPPRESS)
    p.add_argument("--sample-dtype", default="auto", help=argparse.SUPPRESS)
    p.add_argument("--lora-rank", type=int, default=0, help=argparse.SUPPRESS)
    p.add_argument("--skip-zero-variance", type=int, default=0,
                   help="1: rlvr skips the groups whose rewards are all equal (its default; TRL trains them), "
                        "0 (default here): it trains every group, as TRL does")
    p.add_argument("--rank", type=int, default=16, help="LoRA rank of the lora variant (both trainers)")
    p.add_argument("--background", type=int, default=0,
                   help="busy processes started beside every run of the row (a fixed contended load, the same for "
                        "both sides): 0 measures the quiet row")
    p.add_argument("--pin", choices=["none", "other", "same"], default="none",
                   help="where the busy processes run: other (trainer on the first CPU, busy processes on the rest), "
                        "same (all on the first CPU, time-sliced), none (the OS places them)")
    p.add_argument("--variants", default="fp32,bf16-sampling,lora",
                   help="rlvr settings to measure: fp32 (TRL's precision throughout), bf16-sampling "
                        "(sampling in bf16, training in fp32, with the importance-weight correction) and/or lora "
                        "(adapters of --rank, against TRL + PEFT at that rank)")
    args = p.parse_args(argv)
    try:
        cpus = placement(args.pin, os.sched_getaffinity(0))
    except ValueError as e:
        p.error(str(e))
    if args.worker:
        run_rlvr_worker(args)
        return 0
    if not PEER.exists():
        print(f"peer benchmark missing: {PEER}", file=sys.stderr)
        return 1
    results = []
    for c in CONFIGS:
        if args.only and args.only not in c["name"]:
            continue
        geometry = ["-G", str(c["G"]), "-P", str(c["P"]), "--threads", str(args.threads)]
        expect = {"model": c["model"], "num_generations": c["G"], "prompts_per_step": c["P"],
                  "max_completion_length": c["L"], "steps": args.steps}
        peer_args = ["--model", c["model"], *geometry, "--max-completion-length", str(c["L"]), "--steps", str(args.steps)]
        variants = args.variants.split(",")
        trl_full_runs: list[dict] = []
        full = None
        for variant in variants:
            lora = ["--lora-rank", str(args.rank)] if variant == "lora" else []
            trl_cmd = [sys.executable, str(PEER), *peer_args]
            if lora:
                trl_cmd = [sys.executable, __file__, "--trl-peft-worker", str(args.rank), *peer_args]
            ours_cmd = [sys.executable, __file__, "--worker", "--model", c["model"], *geometry, "-L", str(c["L"]),
                        "--steps", str(args.steps), "--sample-dtype", VARIANTS[variant], *lora,
                        "--skip-zero-variance", str(args.skip_zero_variance)]
            load = [round(os.getloadavg()[0], 2)]
            t0 = time.perf_counter()
            ours_runs, trl_runs = [], [] if lora else trl_full_runs
            for i in range(args.repeats):
                order = ("trl", "ours") if i % 2 == 0 else ("ours", "trl")
                for who in order:
                    if who == "ours":
                        ours_runs.append(_run(ours_cmd, args.background, cpus))
                    elif len(trl_runs) <= i:  # the full fine-tuning peer is shared by the fp32 and bf16 rows
                        trl_runs.append(_run(trl_cmd, args.background, cpus))
                load.append(round(os.getloadavg()[0], 2))
            ours, trl = _side(ours_runs, {**expect, "model": c["model"]}), _side(trl_runs[:args.repeats], expect)
            ratios = [o["median_step_s_excl_first"] / t["median_step_s_excl_first"] for o, t in zip(ours_runs, trl_runs)]
            row = {
                "name": c["name"],
                "rlvr_precision": variant,
                "trl_peer": f"trl+peft r={args.rank}" if lora else "trl full fine-tuning",
                "rlvr_s_per_step": ours["s_per_step"],
                "trl_s_per_step": trl["s_per_step"],
                "step_ratio": round(statistics.median(ratios), 3),
                "step_ratios": [round(r, 3) for r in ratios],
                "rlvr_tokens_per_step": ours["tokens_per_step"],
                "trl_tokens_per_step": trl["tokens_per_step"],
                "rlvr_peak_rss_mb": ours["peak_rss_mb"],
                "trl_peak_rss_mb": trl["peak_rss_mb"],
                "rss_ratio": round(ours["peak_rss_mb"] / trl["peak_rss_mb"], 3),
                # process CPU seconds per step: less sensitive than wall time to other jobs on the machine
                "rlvr_cpu_s_per_step": ours["cpu_s_per_step"],
                "trl_cpu_s_per_step": trl["cpu_s_per_step"],
                "cpu_ratio": round(ours["cpu_s_per_step"] / trl["cpu_s_per_step"], 3),
                "rlvr_sampling_s": statistics.median(r["median_sampling_s"] for r in ours_runs),
                "trl_generate_s": round(statistics.median(r["total_generate_s"] / len(r["step_s"]) for r in trl_runs), 3),
                "rlvr_skip_zero_variance": bool(args.skip_zero_variance),
                "rlvr_skipped_group_frac": round(statistics.fmean(f for r in ours_runs for f in r["zero_var_frac"]), 3),
                "load_avg": load,
                "background_processes": args.background,
                "background_pin": args.pin,
            }
            if variant == "fp32":
                full = ours
            if lora and full is not None:  # also against rlvr's full fine-tuning of the same run
                row["rlvr_full_s_per_step"] = full["s_per_step"]
                row["rlvr_full_peak_rss_mb"] = full["peak_rss_mb"]
                row["step_ratio_vs_full"] = round(ours["s_per_step"] / full["s_per_step"], 3)
                row["rss_ratio_vs_full"] = round(ours["peak_rss_mb"] / full["peak_rss_mb"], 3)
            results.append(row)
            print(f"{c['name']} ({variant}): rlvr {ours['step_s']} s/step (tokens {ours['tokens']}) | "
                  f"{row['trl_peer']} {trl['step_s']} s/step (tokens {trl['tokens']}) | load avg {load} "
                  f"| {time.perf_counter() - t0:.0f} s")
            print("  " + json.dumps(row), flush=True)
    print("RESULT " + json.dumps({"configs": results}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
