"""Collectives put their tensors where the process group's backend reduces: CUDA under NCCL (which
takes nothing else), the CPU under gloo; and each helper gives the right answer in a real 2-process
gloo group. (A multi-GPU NCCL run needs GPUs; which device NCCL gets is checked here without one.)"""

from __future__ import annotations

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

from rlvr.trainer import distributed


def test_collective_device_follows_the_backend():
    assert distributed.collective_device("gloo") == torch.device("cpu")
    assert distributed.collective_device("nccl").type == "cuda"
    assert distributed.collective_device("cpu:gloo,cuda:nccl").type == "cuda"  # a group with both: NCCL's
    if torch.cuda.is_available():  # this rank's device, the one `setup` set
        assert distributed.collective_device("nccl").index == torch.cuda.current_device()


def _rank(rank: int, store: str, results) -> None:
    dist.init_process_group("gloo", init_method=f"file://{store}", rank=rank, world_size=2)
    try:
        weight = torch.nn.Parameter(torch.zeros(3))
        weight.grad = torch.full((3,), float(rank + 1))
        frozen = torch.nn.Parameter(torch.zeros(2), requires_grad=False)
        distributed.sum_gradients([weight, frozen])
        distributed.barrier()
        results.put((rank, {
            "device": str(distributed.collective_device()),  # read from the running group
            "sum": distributed.sum_values([rank, 1.5]),
            "max": distributed.max_value(float(rank)),
            "gathered": distributed.gather_lists([f"r{rank}"] * (rank + 1)),
            "grad": weight.grad.tolist(),
        }))
    finally:
        dist.destroy_process_group()


def test_collectives_in_a_two_process_gloo_group(tmp_path):
    ctx = mp.get_context("spawn")
    results = ctx.Queue()
    procs = [ctx.Process(target=_rank, args=(r, str(tmp_path / "store"), results)) for r in range(2)]
    for p in procs:
        p.start()
    for p in procs:  # a rank that fails exits at once, and its peer's collective then fails too
        p.join(timeout=120)
        if p.exitcode is None:
            p.kill()
        assert p.exitcode == 0
    out = dict(results.get(timeout=10) for _ in procs)
    for rank in (0, 1):
        assert out[rank] == {"device": "cpu", "sum": [1.0, 3.0], "max": 1.0,
                             "gathered": ["r0", "r1", "r1"], "grad": [3.0, 3.0, 3.0]}
