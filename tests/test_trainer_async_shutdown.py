"""An asynchronous `rlvr train` stopped from outside shuts down cleanly: Ctrl-C (SIGINT) and a scheduler's
SIGTERM (Slurm, Kubernetes) both end the run with its workers and the local Ray instance it started
(GCS, raylet, workers): the command exits (130, 143) and no process it started is left behind."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import needs
import pytest
import yaml

needs.module("ray")
psutil = needs.module("psutil")

from test_trainer_async import TOY  # noqa: E402
from waiting import wait_for  # noqa: E402

TESTS = Path(__file__).resolve().parent


def alive(proc: psutil.Process) -> bool:
    try:
        return proc.is_running() and proc.status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def worker_started(trainer: psutil.Process) -> list[psutil.Process]:
    """The trainer's process tree once a generation worker is in it (empty before)."""
    tree = trainer.children(recursive=True)
    named = []
    for proc in tree:
        try:
            named.append(" ".join(proc.cmdline()))
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            named.append("")
    return tree if any("GenerationWorker" in name for name in named) else []


def foreground() -> None:
    """SIGINT as a terminal's foreground job has it. A shell's background job (a CI runner's, `cmd &`) inherits
    it ignored, and Python then installs no KeyboardInterrupt handler: Ctrl-C could not reach such a run."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


@pytest.mark.parametrize("sig,code", [(signal.SIGINT, 130), (signal.SIGTERM, 128 + signal.SIGTERM)], ids=["SIGINT", "SIGTERM"])
def test_a_stopped_run_leaves_no_process_behind(tmp_path, sig, code):
    config = tmp_path / "async.yaml"
    config.write_text(yaml.safe_dump({**TOY, "steps": 500, "async": {"workers": 1, "max_staleness": 1}}))
    run = tmp_path / "run"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(TESTS), os.environ.get("PYTHONPATH", "")])}
    with open(tmp_path / "train.log", "w") as log:
        proc = subprocess.Popen([sys.executable, "-m", "rlvr", "train", "--config", str(config), "--run-dir",
                                 str(run)], stdout=log, stderr=subprocess.STDOUT, env=env, preexec_fn=foreground)
    try:
        trainer = psutil.Process(proc.pid)
        wait_for(lambda: (run / "metrics.jsonl").exists() and (run / "metrics.jsonl").read_text().count("\n") >= 1,
                 300, "a trained step")
        started = wait_for(lambda: worker_started(trainer), 60, "the generation worker")
        proc.send_signal(sig)
        assert proc.wait(timeout=120) == code, (tmp_path / "train.log").read_text()[-2000:]
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    try:
        wait_for(lambda: not any(map(alive, started)), 60, "the processes the run started to end")
    except AssertionError:
        raise AssertionError(f"left behind: {[(p.pid, p.name()) for p in started if alive(p)]}") from None
    assert (run / "metrics.jsonl").read_text().count("\n") < 500  # stopped mid-run
