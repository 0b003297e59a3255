"""bench/trainer_step.py's contended row puts its busy load where `--pin` says: beside the trainer on
another CPU, or on the trainer's own CPU, time-sliced with it. The two measure different things
(bench/results/trainer_step.md), so a row must run where it says it ran."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import needs
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_module import load  # noqa: E402

trainer_step = load("trainer_step")
BENCH = Path(__file__).resolve().parents[1] / "bench" / "trainer_step.py"
CPUS = os.sched_getaffinity(0)

# a stand-in trainer: reports its own CPUs and those of the busy processes its parent started beside it
REPORT = """
import json, os, sys
from pathlib import Path
def busy(proc):
    try:
        sibling = int(proc.joinpath("stat").read_text().rpartition(")")[2].split()[1]) == os.getppid()
        return sibling and proc.joinpath("cmdline").read_bytes().rstrip(b"\\0").split(b"\\0")[-2:] == [
            b"-c", sys.argv[1].encode()]
    except OSError:
        return False
pids = [int(p.name) for p in Path("/proc").iterdir() if p.name.isdigit() and busy(p)]
print("RESULT_JSON " + json.dumps({"trainer": sorted(os.sched_getaffinity(0)),
      "busy": [sorted(os.sched_getaffinity(pid)) for pid in pids]}))
"""


def test_placement_of_each_pin():
    assert trainer_step.placement("none", {0, 1}) == (None, None)
    assert trainer_step.placement("same", {2, 3}) == ({2}, {2})
    assert trainer_step.placement("other", {2, 3, 5}) == ({2}, {3, 5})
    with pytest.raises(ValueError, match="two CPUs"):
        trainer_step.placement("other", {4})


@needs.skip_unless(len(CPUS) >= 2, "pinning beside the trainer needs two CPUs")
@pytest.mark.parametrize("pin", ["other", "same"])
def test_busy_processes_run_where_the_pin_says(pin):
    got = trainer_step._run([sys.executable, "-c", REPORT, trainer_step.BUSY], background=2,
                            cpus=trainer_step.placement(pin, CPUS))
    first = min(CPUS)
    assert got["trainer"] == [first]
    assert len(got["busy"]) == 2
    expect = [first] if pin == "same" else sorted(CPUS - {first})
    assert got["busy"] == [expect, expect]


def test_unpinned_runs_go_where_the_os_puts_them():
    got = trainer_step._run([sys.executable, "-c", REPORT, trainer_step.BUSY], background=1)
    assert got["trainer"] == sorted(CPUS)
    assert got["busy"] == [sorted(CPUS)]


def test_pin_other_on_one_cpu_is_refused_in_one_line():
    one = min(CPUS)
    proc = subprocess.run([sys.executable, str(BENCH), "--pin", "other"], capture_output=True, text=True,
                          preexec_fn=lambda: os.sched_setaffinity(0, {one}), timeout=60)
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines()[-1].endswith("--pin other needs two CPUs: this process may run on one")
    assert "Traceback" not in proc.stderr
