"""Data parallelism on torch.distributed: groups are sharded across ranks, gradients summed.

Launched with `torchrun --nproc_per_node N -m rlvr train ...`: gloo on CPU, NCCL on GPU.
Each rank generates, scores and back-propagates its own share of the groups; before the
optimizer step the gradients are summed across ranks in one flat all-reduce. The loss is
normalised by batch-wide totals (see loss.py), so the sum is the gradient of the whole batch,
and every rank applies the same update to the same weights.

Why not `DistributedDataParallel`? DDP all-reduces inside `backward`, one bucket at a time,
and needs every rank to run the same number of backward passes. Here a rank runs one backward
per group it trains, and groups with equal rewards are skipped, so ranks differ; one explicit
all-reduce per optimizer step is simpler and cannot deadlock.

A collective's tensor must live where the process group's backend reduces: NCCL takes only CUDA
tensors, gloo CPU ones. The helpers here place theirs by `collective_device`, so no caller
chooses a device.
"""

from __future__ import annotations

import os

import torch
import torch.distributed as dist

from rlvr.trainer.devices import trainer_device


def setup() -> tuple[int, int]:
    """(rank, world size); initialises the process group when launched by torchrun."""
    world = int(os.environ.get("WORLD_SIZE", "1"))
    if world > 1 and not dist.is_initialized():
        backend = "nccl" if torch.cuda.is_available() else "gloo"
        if backend == "nccl":
            torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", "0")))
        dist.init_process_group(backend)
    if dist.is_initialized():
        return dist.get_rank(), dist.get_world_size()
    return 0, 1


def teardown() -> None:
    if dist.is_initialized():
        dist.destroy_process_group()


def active() -> bool:
    return dist.is_initialized() and dist.get_world_size() > 1


def device() -> torch.device:
    """This process's device (`devices.trainer_device`: its rank's GPU where CUDA is there, else the CPU)."""
    return torch.device(trainer_device(torch.cuda.is_available(), int(os.environ.get("LOCAL_RANK", "0"))))


def collective_device(backend: str | None = None) -> torch.device:
    """Where a tensor for a collective of the process group (default: the running one's backend) must live.

    NCCL reduces CUDA tensors only, on the device this rank set in `setup`; gloo reduces CPU tensors.
    A backend string may name several (`"cpu:gloo,cuda:nccl"`): with NCCL among them, CUDA."""
    backend = str(backend if backend is not None else dist.get_backend())
    if "nccl" in backend:
        return torch.device("cuda", torch.cuda.current_device()) if torch.cuda.is_available() else torch.device("cuda")
    return torch.device("cpu")


def sum_values(values: list[float]) -> list[float]:
    """Element-wise sum across ranks (identity in a single process)."""
    if not active():
        return list(values)
    t = torch.tensor(values, dtype=torch.float64, device=collective_device())
    dist.all_reduce(t)
    return t.tolist()


def max_value(value: float) -> float:
    if not active():
        return value
    t = torch.tensor([value], dtype=torch.float64, device=collective_device())
    dist.all_reduce(t, op=dist.ReduceOp.MAX)
    return float(t.item())


def barrier() -> None:
    """Wait for every rank; under NCCL on this rank's own device (else NCCL guesses one, device 0 by rank)."""
    if not active():
        return
    device = collective_device()
    dist.barrier(device_ids=[device.index] if device.type == "cuda" else None)


def gather_lists(items: list) -> list:
    """All ranks' lists concatenated in rank order (picklable items)."""
    if not active():
        return list(items)
    out: list = [None] * dist.get_world_size()
    dist.all_gather_object(out, items)
    return [x for part in out for x in part]


def sum_gradients(parameters) -> None:
    """Sum the .grad of every parameter across ranks (missing grads count as zero)."""
    if not active():
        return
    params = [p for p in parameters if p.requires_grad]
    for p in params:
        if p.grad is None:
            p.grad = torch.zeros_like(p)
    flat = torch.cat([p.grad.reshape(-1) for p in params]).to(collective_device())  # no copy if already there
    dist.all_reduce(flat)
    offset = 0
    for p in params:
        n = p.numel()
        p.grad.copy_(flat[offset:offset + n].view_as(p.grad))
        offset += n
