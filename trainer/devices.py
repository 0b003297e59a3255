"""Where each part of a run computes, and in what precision: every device and dtype decision in one place.

Each decision is a small function of what it is told (whether CUDA is there, the config's keys, the GPU
ids a process sees), so every branch, the CUDA ones included, is tested on a CPU (tests/test_devices.py).
The trainer (`distributed.device`), the async workers and their pool, `rlvr eval --model` and the vLLM
engine call them; `make gpu-check` (bench/gpu_check.py) runs the same wiring on one GPU.

The facts the async decisions rest on (Ray 2.60, the pinned version):
- an actor that asks for no GPU keeps the `CUDA_VISIBLE_DEVICES` it started with: Ray no longer blanks it
  (older Ray did, and `RAY_ACCEL_ENV_VAR_OVERRIDE_ON_ZERO=1` restores that). A worker that asks for none
  would then see every GPU and take cuda:0, beside the trainer and every other worker; under the older
  behaviour it sees none, and cannot unpickle tensors saved on a CUDA device. So a worker asks for the GPU
  it uses, a worker that asks for none is shown none, and the weights travel as CPU tensors;
- an actor given GPUs sees only those (`CUDA_VISIBLE_DEVICES` names them): its cuda:0 is its own GPU;
- a local Ray instance takes the GPUs named by `CUDA_VISIBLE_DEVICES` where `ray.init` runs, so the
  trainer's own GPU can be kept from the workers by naming the others there.

This module imports neither torch nor ray: the config validates `async:` with it.
"""

from __future__ import annotations

from typing import Any

CPU, BF16, FP32 = "cpu", "bfloat16", "float32"
BF16_KEY = "bf16"  # the config's spelling (`sample_dtype`, `autocast`)


def trainer_device(cuda_available: bool, local_rank: int = 0) -> str:
    """The trainer process's device: its rank's GPU (torchrun's LOCAL_RANK) where CUDA is there, else the CPU."""
    return f"cuda:{local_rank}" if cuda_available else CPU


def eval_device(cuda_available: bool) -> str:
    """Where `rlvr eval --model` puts the model it samples: the first visible GPU, else the CPU."""
    return trainer_device(cuda_available, 0)


def check_worker_gpus(value: Any) -> None:
    """`async.worker_gpus`: None (decided by the trainer's device, `worker_gpus`) or a number of at least 0;
    a fraction shares a GPU between workers (Ray's fractional GPUs)."""
    if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0):
        raise ValueError("config: async.worker_gpus must be null (one GPU per worker when the trainer is on "
                         "CUDA, none otherwise) or a number of at least 0")


def worker_gpus(option: float | None, trainer_device: str) -> float:
    """The GPUs a generation worker asks Ray for: `async.worker_gpus` when set, else one when the trainer
    is on CUDA (a worker samples with the trainer's code, which then runs on a GPU too), else none."""
    if option is not None:
        return option
    return 1 if trainer_device.startswith("cuda") else 0


def worker_resources(cpus: float, gpus: float) -> dict:
    """The keyword arguments of `ray.remote` for a generation worker: exactly what it uses."""
    return {"num_cpus": cpus, "num_gpus": gpus}


def worker_env(gpus: float, pythonpath: str | None) -> dict:
    """The environment variables of a worker's runtime env: a worker that asks for no GPU is shown none
    (`CUDA_VISIBLE_DEVICES` empty: the pinned Ray would otherwise leave it every GPU), so it samples on
    its CPU; `PYTHONPATH` so that envs named as module:Id import on the workers too."""
    env = {"PYTHONPATH": pythonpath} if pythonpath else {}
    if not gpus:
        env["CUDA_VISIBLE_DEVICES"] = ""
    return env


def check_gpu_fit(workers: int, gpus_each: float, cluster_gpus: float) -> None:
    """Refuse a pool whose workers ask for more GPUs than the Ray cluster has (Ray would leave the rest
    pending, and the run would wait for ever for its first step)."""
    need = workers * gpus_each
    if need > cluster_gpus + 1e-9:
        raise ValueError(f"async: {workers} worker(s) x {gpus_each:g} GPU each need {need:g} GPUs, and the Ray "
                         f"cluster has {cluster_gpus:g}: set async.worker_gpus (a fraction shares a GPU, 0 "
                         "samples on CPUs) or async.workers")


def local_ray_gpus(visible: list[str], trainer_device: str) -> list[str]:
    """The GPU ids a local Ray instance is given, of those the trainer's process sees: all but the
    trainer's own when there are others (one worker per remaining GPU, none beside the trainer), else
    all of them (one GPU: the workers share it with the trainer). The trainer's cuda:N is visible[N]."""
    if not trainer_device.startswith("cuda") or len(visible) < 2:
        return list(visible)
    own = visible[int(trainer_device.split(":")[1]) if ":" in trainer_device else 0]
    return [g for g in visible if g != own]


def visible_gpus(cuda_visible_devices: str | None, device_count: int) -> list[str]:
    """The GPU ids a process sees: those `CUDA_VISIBLE_DEVICES` names, or 0..count-1 when it is unset."""
    if cuda_visible_devices is None:
        return [str(i) for i in range(device_count)]
    return [g.strip() for g in cuda_visible_devices.split(",") if g.strip()]


def publishable(state: dict) -> dict:
    """The form in which weights travel to the workers: every tensor detached and on the CPU, which any
    worker can unpickle and load onto its own device (a CUDA tensor unpickles only where CUDA is)."""
    return {name: tensor.detach().to(CPU) for name, tensor in state.items()}


def engine_dtype(device_type: str, requested: str | None = None, bf16_supported: bool = False) -> str:
    """The dtype of a vLLM engine's weights: `requested` ("float32" or "bfloat16") when told, else on CUDA
    bf16 where the GPU has it (the trainer's fp32 weights would double the engine's memory and slow its
    decoding), and on a CPU fp32 (the sampler's numerics then stay closest to the trainer's)."""
    if requested not in (None, "auto", FP32, BF16):
        raise ValueError(f"a vLLM engine's dtype is 'auto', '{FP32}' or '{BF16}', not {requested!r}")
    if requested in (FP32, BF16):
        return requested
    return BF16 if device_type == "cuda" and bf16_supported else FP32


def sampling_bf16(training_bf16: bool, sample_dtype: str, bf16_native: bool) -> bool:
    """Whether a step samples in bf16: when training does, or when `sample_dtype: bf16` asks and the device
    computes bf16 natively (a GPU with bf16; a CPU whose oneDNN does, through packed bf16 weights). A CPU
    without it would sample under bf16 autocast, emulated: on an AVX2-only EPYC a step of the arithmetic
    recipe sampled 5.0x slower than packed fp32 (bench/results/sampling_precision.md). Such a CPU samples
    in fp32, which the loss need not correct."""
    return training_bf16 or (sample_dtype == BF16_KEY and bf16_native)


def check_vllm_world(world: int) -> None:
    """Refuse an in-process vLLM engine under torchrun: each rank would build a single-process engine inside
    an initialised process group without vLLM's external launcher (`distributed_executor_backend=
    "external_launcher"`, as TRL's colocate mode builds them), which is not wired here."""
    if world > 1:
        raise ValueError(f"generator: vllm builds one in-process engine and does not run under torchrun "
                         f"({world} processes): train in one process, or sample on several GPUs with async "
                         "workers (async: {workers: N}, one engine each)")
