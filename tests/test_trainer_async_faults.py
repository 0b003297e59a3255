"""Faults of asynchronous GRPO on a real two-node local Ray cluster (tests/local_ray_cluster.py):
a generation worker killed with SIGKILL mid-run is started again and its step sampled again, so
no group is lost or trained twice; a trainer process killed with SIGKILL takes its workers with it
(Ray ends the actors of a dead driver) and `--resume` continues exactly from its checkpoint; every
run ends with no worker process left. At k = 0 the runs are compared with a synchronous run."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
from pathlib import Path

import needs
import pytest
import yaml
from waiting import wait_for

from rlvr.trainer.config import TrainConfig
from rlvr.trainer.grpo import GRPOTrainer
from rlvr.trainer.metrics import read_jsonl

needs.module("ray")
psutil = needs.module("psutil")

from local_ray_cluster import LocalRayCluster  # noqa: E402
from test_trainer_async import TOY, same_as_sync  # noqa: E402

from rlvr.trainer.async_grpo import AsyncGRPOTrainer  # noqa: E402

TESTS = Path(__file__).resolve().parent
STEPS = 5


@pytest.fixture(scope="module")
def cluster():
    with LocalRayCluster(nodes=2, cpus_per_node=1) as c:
        yield c


@pytest.fixture(scope="module")
def toy_sync(tmp_path_factory):
    return GRPOTrainer(TrainConfig(**TOY, steps=STEPS), tmp_path_factory.mktemp("sync")).train()


@pytest.fixture(autouse=True)
def _tests_importable(monkeypatch):
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(TESTS), os.environ.get("PYTHONPATH", "")]))


def workers(cluster) -> list[int]:
    """Pids of the generation workers running on this cluster's nodes (children of its raylets)."""
    raylets = {p.info["pid"] for p in cluster.processes() if (p.info["cmdline"] or [""])[0].endswith("raylet")}
    found = []
    for proc in psutil.process_iter(["pid", "ppid", "cmdline"]):
        try:
            if proc.info["ppid"] in raylets and "GenerationWorker" in " ".join(proc.info["cmdline"] or []):
                found.append(proc.info["pid"])
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            continue
    return found


def alive(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def lines(path: Path) -> int:
    return len(path.read_text().splitlines()) if path.exists() else 0


def test_worker_killed_mid_run(cluster, tmp_path, toy_sync):
    config = TrainConfig(**TOY, steps=STEPS, async_={"workers": 1, "max_staleness": 0, "address": cluster.address})
    trainer = AsyncGRPOTrainer(config, tmp_path)
    killed = []

    def kill_after_two_steps():
        wait_for(lambda: lines(tmp_path / "metrics.jsonl") >= 2, 300, "two steps")
        pid = wait_for(lambda: workers(cluster), 60, "a worker")[0]
        os.kill(pid, signal.SIGKILL)
        killed.append(pid)

    thread = threading.Thread(target=kill_after_two_steps, daemon=True)
    thread.start()
    records = trainer.train()
    thread.join(10)
    assert killed and records[-1]["worker_restarts"] >= 1
    same_as_sync(toy_sync, records)  # every step's groups, none lost, none twice, the same completions
    prompts = sorted(s["prompt"] for s in read_jsonl(tmp_path / "samples.jsonl"))
    assert prompts == list(range(STEPS * TOY["prompts_per_step"]))
    wait_for(lambda: not workers(cluster), 30, "the workers to end after the run")


def test_trainer_killed_resumes_exactly(cluster, tmp_path, toy_sync):
    run = tmp_path / "run"
    config = tmp_path / "async.yaml"
    config.write_text(yaml.safe_dump({**TOY, "steps": STEPS, "checkpoint_every": 1,
                                      "async": {"workers": 1, "max_staleness": 0, "address": cluster.address}}))
    command = [sys.executable, "-m", "rlvr", "train", "--config", str(config), "--run-dir", str(run)]
    with open(tmp_path / "first.log", "w") as log:
        trainer = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT)
    try:
        wait_for(lambda: lines(run / "metrics.jsonl") >= 2 and (run / "checkpoint.pt").exists(), 300, "two steps")
        pids = wait_for(lambda: workers(cluster), 60, "a worker")
    finally:
        trainer.kill()
        trainer.wait()
    killed = read_jsonl(run / "metrics.jsonl")
    assert len(killed) < STEPS  # killed mid-run
    # no orphan: Ray ends the actors of a driver that died
    wait_for(lambda: not any(map(alive, pids)), 60, "the killed trainer's workers to end")
    resumed = subprocess.run([*command[:-4], "--run-dir", str(run), "--resume"], capture_output=True, text=True,
                             timeout=600)
    assert resumed.returncode == 0, resumed.stderr[-2000:]
    after = read_jsonl(run / "metrics.jsonl")
    same_as_sync(toy_sync, after)
    # resumed from the checkpoint, not trained again from step 0 (the same metrics but for the timings): the
    # rows before it are the killed run's own (only its last row may be past the checkpoint)
    assert after[:len(killed) - 1] == killed[:-1]
    wait_for(lambda: not workers(cluster), 30, "the workers to end after the resumed run")
