"""Checkpoints that resume a run exactly: weights, optimizer, scheduler, RNG states, data position.

Written to a temporary file and renamed, so a kill mid-write leaves the previous checkpoint intact.
"""

from __future__ import annotations

import os
import random
from pathlib import Path

import torch

NAME = "checkpoint.pt"


def rng_state() -> dict:
    state = {"torch": torch.get_rng_state(), "python": random.getstate()}
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def set_rng_state(state: dict) -> None:
    torch.set_rng_state(state["torch"])
    random.setstate(state["python"])
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])


def save(run_dir: str | Path, *, model, optimizer, scheduler, step: int, data_position: int, config: dict) -> Path:
    path = Path(run_dir) / NAME
    tmp = path.with_suffix(".tmp")
    torch.save({
        "model": model.state_dict(), "optimizer": optimizer.state_dict(), "scheduler": scheduler.state_dict(),
        "step": step, "data_position": data_position, "rng": rng_state(), "config": config,
    }, tmp)
    os.replace(tmp, path)
    return path


def load(run_dir: str | Path, *, model, optimizer, scheduler) -> dict:
    """Restore the states in place; returns the checkpoint's step, data_position and config."""
    path = Path(run_dir) / NAME
    if not path.exists():
        raise FileNotFoundError(f"no checkpoint to resume from in {run_dir}")
    state = torch.load(path, map_location="cpu", weights_only=False)
    model.load_state_dict(state["model"])
    optimizer.load_state_dict(state["optimizer"])
    scheduler.load_state_dict(state["scheduler"])
    set_rng_state(state["rng"])
    return {k: state[k] for k in ("step", "data_position", "config")}
