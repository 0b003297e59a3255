"""`make gpu-check` (scripts/gpu_check.py) on a CPU: it runs to its end, each CUDA step skipped and saying why;
and its FSDP2 step, run on the CPU (`--on-cpu`: gloo), trains in a one-process group."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parent.parent
CUDA_STEPS = ["grpo-fp32-lora", "grpo-bf16-lora", "fsdp-one-gpu", "async-one-worker", "eval-model"]


def _run(*args: str) -> tuple[dict, str]:
    done = subprocess.run([sys.executable, str(ROOT / "scripts" / "gpu_check.py"), *args], capture_output=True,
                          text=True, timeout=600, cwd=ROOT)
    result = [line for line in done.stdout.splitlines() if line.startswith("RESULT ")]
    assert done.returncode == 0 and len(result) == 1, done.stdout[-2000:] + done.stderr[-2000:]
    return json.loads(result[0][len("RESULT "):]), done.stdout


@pytest.mark.skipif(torch.cuda.is_available(), reason="on a GPU the CUDA steps run (make gpu-check)")
def test_on_a_cpu_it_runs_to_its_end_and_says_why_each_cuda_step_is_skipped():
    result, out = _run()
    steps = result["steps"]
    assert result["failed"] == [] and steps["decisions"]["status"] == "pass"
    assert steps["decisions"]["trainer_device"] == "cpu" and steps["decisions"]["worker_gpus"] == 0
    for step in CUDA_STEPS:
        assert steps[step] == {"status": "skip", "why": "no CUDA device here (torch.cuda.is_available() is False)"}
        assert f"SKIP {step}: no CUDA device here" in out


def test_fsdp2_trains_in_a_one_process_group_on_the_cpu():
    result, _ = _run("--on-cpu", "--only", "fsdp-one-gpu")
    step = result["steps"]["fsdp-one-gpu"]
    assert step["status"] == "pass" and step["backend"] == "gloo", step
    assert step["sharded_params"] == step["params_changed"] > 0
