"""`rlvr train`: GRPO training from a YAML config, with `--set key=value` overrides.

    rlvr train --config configs/arith-smollm2.yaml --set lr=1e-6 --run-dir runs/arith
    rlvr train --run-dir runs/arith --resume          # continue exactly where a run stopped
    torchrun --nproc_per_node 2 -m rlvr train --config ...   # data parallel
    rlvr train --config ... --set async.workers=1 --set async.max_staleness=1   # asynchronous (async_grpo.py)
"""

from __future__ import annotations

import argparse
import signal
import threading
from pathlib import Path


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--config", "-c", help="YAML run config (see configs/); with --resume, the run's own")
    parser.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                        help="override a config key (value parsed as YAML; dotted keys reach into mappings)")
    parser.add_argument("--run-dir", help="where metrics, evals and checkpoints go (default runs/<config name>)")
    parser.add_argument("--resume", action="store_true", help="continue the run in --run-dir from its checkpoint")


def run(args: argparse.Namespace) -> int:
    from rlvr.cli import UsageError
    from rlvr.trainer.config import load_config

    if args.run_dir is None:
        if args.config is None:
            raise UsageError("rlvr train: give --config (and optionally --run-dir)")
        args.run_dir = str(Path("runs") / Path(args.config).stem)
    config_path = args.config
    if args.resume and config_path is None:
        config_path = Path(args.run_dir) / "config.yaml"
    if config_path is None:
        raise UsageError("rlvr train: give --config, or --resume with a --run-dir that holds a run")
    if not Path(config_path).exists():
        raise UsageError(f"rlvr train: no such config file: {config_path}")
    config = load_config(config_path, args.overrides)

    from rlvr.trainer import distributed

    if config.async_:  # generation workers sample ahead (trainer/async_grpo.py)
        from rlvr.trainer.async_grpo import AsyncGRPOTrainer as GRPOTrainer
    else:
        from rlvr.trainer.grpo import GRPOTrainer

    here = threading.current_thread() is threading.main_thread()  # where Python runs signal handlers
    previous = signal.signal(signal.SIGTERM, _stop) if here else None
    try:
        trainer = GRPOTrainer(config, args.run_dir, resume=args.resume)
        trainer.train()
        if trainer.rank == 0:
            evals = trainer.evals.read()
            if evals:
                print(f"held-out accuracy (greedy, {evals[0]['n']} prompts): before {evals[0]['accuracy']:.3f} "
                      f"(step {evals[0]['step']}), after {evals[-1]['accuracy']:.3f} (step {evals[-1]['step']})")
                for key in sorted(k for k in evals[-1] if k.startswith("reward/")):
                    print(f"  {key} (mean): before {evals[0].get(key, 0.0):.3f}, after {evals[-1][key]:.3f}")
            print(f"run written to {args.run_dir}")
    finally:
        distributed.teardown()
        if previous is not None:  # a caller's own handler (rlvr.cli.main called in-process) is back
            signal.signal(signal.SIGTERM, previous)
    return 0


def _stop(signum, frame):
    """A scheduler's SIGTERM (Slurm, Kubernetes) ends the run as Ctrl-C does: through its `finally` blocks, which
    end its generation workers and the local Ray instance it started; exit status 143, as a shell reports it."""
    raise SystemExit(128 + signum)
