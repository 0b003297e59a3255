"""`rlvr plot RUN_DIR`: PNG curves of a training run (reward, accuracy, KL, length, ...).

Reads RUN_DIR/metrics.jsonl (one record per step) and RUN_DIR/eval.jsonl (held-out
accuracy), writes RUN_DIR/curves.png (every logged curve) and RUN_DIR/reward.png (the
reward curve with the held-out accuracy).
"""

from __future__ import annotations

import argparse
from pathlib import Path

PANELS = [
    ("reward_mean", "reward (mean)"), ("accuracy", "accuracy (train samples)"), ("kl", "KL to reference"),
    ("completion_len", "completion length (tokens)"), ("entropy", "entropy (nats)"),
    ("zero_var_frac", "zero-variance groups (fraction)"), ("clip_frac", "clipped tokens (fraction)"),
    ("step_s", "step time (s)"),
]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("run_dir", help="a run folder written by `rlvr train`")
    parser.add_argument("--smooth", type=int, default=1, help="moving-average window over steps")


def _smooth(values: list[float], window: int) -> list[float]:
    if window <= 1:
        return values
    out = []
    for i in range(len(values)):
        part = values[max(0, i - window + 1): i + 1]
        out.append(sum(part) / len(part))
    return out


def write_plots(run_dir: str | Path, smooth: int = 1) -> list[Path]:
    """Write the PNGs; returns their paths."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from rlvr.trainer.metrics import read_jsonl

    run_dir = Path(run_dir)
    records = read_jsonl(run_dir / "metrics.jsonl")
    if not records:
        raise FileNotFoundError(f"no metrics in {run_dir} (expected {run_dir / 'metrics.jsonl'})")
    evals = read_jsonl(run_dir / "eval.jsonl")
    steps = [r["step"] for r in records]

    fig, ax = plt.subplots(figsize=(7, 4))
    ax.plot(steps, _smooth([r["reward_mean"] for r in records], smooth), label="train reward (mean)")
    ax.plot(steps, _smooth([r["accuracy"] for r in records], smooth), label="train accuracy", alpha=0.7)
    if evals:
        ax.plot([e["step"] for e in evals], [e["accuracy"] for e in evals], "o-", label="held-out accuracy (greedy)")
    ax.set_xlabel("step")
    ax.set_title(run_dir.name)
    ax.legend()
    ax.grid(alpha=0.3)
    fig.tight_layout()
    reward_png = run_dir / "reward.png"
    fig.savefig(reward_png, dpi=100)
    plt.close(fig)

    panels = [(k, t) for k, t in PANELS if any(r.get(k) is not None for r in records)]
    cols = 2
    rows = (len(panels) + cols - 1) // cols
    fig, axes = plt.subplots(rows, cols, figsize=(10, 2.6 * rows), squeeze=False)
    for ax, (key, title) in zip(axes.flat, panels):
        points = [(r["step"], r[key]) for r in records if r.get(key) is not None]
        ax.plot([p[0] for p in points], _smooth([p[1] for p in points], smooth))
        ax.set_title(title, fontsize=9)
        ax.grid(alpha=0.3)
    for ax in list(axes.flat)[len(panels):]:
        ax.axis("off")
    fig.tight_layout()
    curves_png = run_dir / "curves.png"
    fig.savefig(curves_png, dpi=90)
    plt.close(fig)
    return [reward_png, curves_png]


def run(args: argparse.Namespace) -> int:
    if args.smooth < 1:
        raise ValueError("--smooth must be at least 1")
    for path in write_plots(args.run_dir, args.smooth):
        print(path)
    return 0
