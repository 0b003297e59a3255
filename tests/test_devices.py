"""Every device and dtype decision (trainer/devices.py), each branch on a CPU, CUDA's as a decision; and the
wiring that calls them: the trainer's device, the async workers' resources, env and published weights, the
vLLM engine's refusal under torchrun, `rlvr eval --model`'s device."""

from __future__ import annotations

import json
import pickle
import subprocess
import sys
from types import SimpleNamespace

import pytest
import torch

from rlvr.trainer import devices


def test_the_trainer_takes_its_ranks_gpu_or_the_cpu():
    assert devices.trainer_device(True, 3) == "cuda:3"
    assert devices.trainer_device(True) == "cuda:0"
    assert devices.trainer_device(False, 3) == "cpu"
    assert devices.eval_device(True) == "cuda:0" and devices.eval_device(False) == "cpu"


def test_the_trainers_wiring_asks_the_decision(monkeypatch):
    from rlvr.trainer import distributed

    monkeypatch.setenv("LOCAL_RANK", "1")
    assert distributed.device() == torch.device(devices.trainer_device(torch.cuda.is_available(), 1))
    monkeypatch.setattr(distributed, "trainer_device", lambda cuda, rank: f"cuda:{rank + 5}")
    assert distributed.device() == torch.device("cuda", 6)  # whatever the decision says, not a rule of its own


def test_a_worker_asks_for_a_gpu_when_the_trainer_is_on_cuda_unless_told():
    assert devices.worker_gpus(None, "cuda:0") == 1
    assert devices.worker_gpus(None, "cpu") == 0
    assert devices.worker_gpus(0.5, "cuda:0") == 0.5  # two workers share one GPU
    assert devices.worker_gpus(0, "cuda:0") == 0  # sampling on CPUs beside a GPU trainer
    assert devices.worker_gpus(1, "cpu") == 1  # a CPU trainer with GPU workers on a cluster
    assert devices.worker_resources(2, 0.5) == {"num_cpus": 2, "num_gpus": 0.5}


@pytest.mark.parametrize("bad", [-1, True, "1", [1]])
def test_worker_gpus_must_be_a_number(bad):
    with pytest.raises(ValueError, match="worker_gpus"):
        devices.check_worker_gpus(bad)


def test_the_async_config_carries_worker_gpus():
    from rlvr.trainer.async_workers import check_async

    config = SimpleNamespace(prompts_per_step=4, refill_rounds=0, replay_fraction=0.0, parallel="replicate")
    assert check_async({}, config)["worker_gpus"] is None
    assert check_async({"worker_gpus": 0.25}, config)["worker_gpus"] == 0.25
    with pytest.raises(ValueError, match="worker_gpus"):
        check_async({"worker_gpus": -1}, config)


def test_a_worker_that_asks_for_no_gpu_is_shown_none():
    assert devices.worker_env(0, None) == {"CUDA_VISIBLE_DEVICES": ""}
    assert devices.worker_env(0, "/x") == {"PYTHONPATH": "/x", "CUDA_VISIBLE_DEVICES": ""}
    assert devices.worker_env(1, None) == {}  # Ray names its GPU in CUDA_VISIBLE_DEVICES
    assert devices.worker_env(0.5, "/x") == {"PYTHONPATH": "/x"}


def test_a_pool_that_needs_more_gpus_than_the_cluster_is_refused():
    devices.check_gpu_fit(1, 1, 1)
    devices.check_gpu_fit(2, 0.5, 1)
    devices.check_gpu_fit(4, 0, 0)
    with pytest.raises(ValueError, match="2 worker.*need 2 GPUs.*has 1"):
        devices.check_gpu_fit(2, 1, 1)
    with pytest.raises(ValueError, match="need 1 GPUs"):
        devices.check_gpu_fit(1, 1, 0)


def test_a_local_ray_gets_the_gpus_but_the_trainers():
    assert devices.local_ray_gpus(["0"], "cuda:0") == ["0"]  # one GPU: shared with the trainer
    assert devices.local_ray_gpus(["0", "1", "2"], "cuda:0") == ["1", "2"]
    assert devices.local_ray_gpus(["4", "5", "6"], "cuda:1") == ["4", "6"]  # cuda:1 is the second one named
    assert devices.local_ray_gpus(["0", "1"], "cpu") == ["0", "1"]
    assert devices.local_ray_gpus([], "cpu") == []
    assert devices.visible_gpus(None, 2) == ["0", "1"]
    assert devices.visible_gpus("3, 1", 8) == ["3", "1"]
    assert devices.visible_gpus("", 8) == []


def test_published_weights_are_detached_cpu_tensors_that_unpickle_anywhere():
    weight = torch.nn.Parameter(torch.ones(2, 2))
    state = devices.publishable({"w": weight, "b": torch.zeros(3)})
    assert all(t.device.type == "cpu" and not t.requires_grad for t in state.values())
    assert torch.equal(pickle.loads(pickle.dumps(state))["w"], torch.ones(2, 2))


def test_the_async_trainer_publishes_through_the_decision(tmp_path, monkeypatch):
    """The trainer's `_weights` (the LoRA adapters here) are what `publishable` makes of them: on a CPU its
    result looks like its input, so the call itself is checked."""
    from rlvr.trainer import async_grpo
    from rlvr.trainer.async_grpo import AsyncGRPOTrainer
    from rlvr.trainer.config import from_dict

    given = []
    monkeypatch.setattr(async_grpo, "publishable", lambda state: given.append(state) or devices.publishable(state))

    cfg = from_dict({"model": "tiny", "env": "rlvr/Arithmetic-v0", "prompts_per_step": 2, "group_size": 2,
                     "max_new_tokens": 4, "steps": 1, "beta": 0.0, "eval_prompts": 0, "lora": {"rank": 2},
                     "async": {"workers": 1}, "progress": False})
    trainer = AsyncGRPOTrainer(cfg, tmp_path / "run")
    weights = trainer._weights()
    assert len(given) == 1 and given[0].keys() == weights.keys() and any(".lora_" in k for k in weights)
    assert all(t.device.type == "cpu" and not t.requires_grad for t in weights.values())


@pytest.mark.parametrize("device,requested,bf16,want", [
    ("cuda", None, True, "bfloat16"),  # the default on a GPU with bf16
    ("cuda", "auto", False, "float32"),  # a GPU without bf16
    ("cuda", "float32", True, "float32"),  # told otherwise
    ("cpu", None, True, "float32"),  # a CPU keeps the trainer's numerics
    ("cpu", "bfloat16", False, "bfloat16"),
])
def test_the_vllm_engines_dtype(device, requested, bf16, want):
    assert devices.engine_dtype(device, requested, bf16) == want


@pytest.mark.parametrize("training,sample_dtype,native,want", [
    (False, "bf16", True, True),  # a GPU with bf16, a CPU whose oneDNN computes in bf16
    (False, "bf16", False, False),  # an AVX2 CPU: packed fp32, not emulated bf16
    (False, "auto", True, False),  # sampled as training computes
    (True, "auto", False, True),  # training in bf16 (asked for) samples in bf16 too
])
def test_sampling_in_bf16_only_where_it_is_native(training, sample_dtype, native, want):
    assert devices.sampling_bf16(training, sample_dtype, native) is want


@pytest.mark.parametrize("native", [True, False])
def test_the_trainers_precision_asks_the_cpus_bf16(monkeypatch, native):
    from rlvr.trainer import step_sampler

    monkeypatch.setattr(step_sampler, "packs_bf16", lambda: native)
    config = SimpleNamespace(autocast="auto", sample_dtype="bf16")
    assert step_sampler.precision(config, torch.device("cpu")) == (False, native)
    assert step_sampler.precision(SimpleNamespace(autocast="bf16", sample_dtype="auto"),
                                  torch.device("cpu")) == (True, True)


def test_vllm_dtype_in_a_run_config_reaches_the_engine_options():
    from rlvr.trainer.config import from_dict

    assert from_dict({"model": "tiny"}).generator_options()["dtype"] == "auto"
    assert from_dict({"model": "tiny", "vllm_dtype": "float32"}).generator_options()["dtype"] == "float32"
    with pytest.raises(ValueError, match="vllm_dtype"):
        from_dict({"model": "tiny", "vllm_dtype": "float16"})


def test_an_unknown_engine_dtype_is_refused():
    with pytest.raises(ValueError, match="float16"):
        devices.engine_dtype("cuda", "float16", True)


def test_vllm_is_refused_under_torchrun_before_an_engine_is_built(monkeypatch):
    devices.check_vllm_world(1)
    with pytest.raises(ValueError, match="torchrun"):
        devices.check_vllm_world(2)
    from rlvr.trainer.models import load_model
    from rlvr.trainer.vllm_generator import VLLMGenerator

    model, tokenizer = load_model("tiny")
    monkeypatch.setenv("WORLD_SIZE", "2")
    with pytest.raises(ValueError, match=r"torchrun \(2 processes\)"):
        VLLMGenerator(model, tokenizer)  # raised before vLLM is imported: this venv has none


def test_rlvr_eval_puts_its_model_where_the_decision_says(monkeypatch):
    """`rlvr eval --model` moves its model to `devices.eval_device` (a meta device stands in for a GPU)."""
    from rlvr.evaluation import cli

    asked = []
    monkeypatch.setattr(devices, "eval_device", lambda cuda: asked.append(cuda) or "meta")
    generator, _ = cli._model_generator(SimpleNamespace(model="tiny", generator="local", seed=0))
    assert asked == [torch.cuda.is_available()]
    assert {p.device.type for p in generator.model.parameters()} == {"meta"}


RAY_ACTOR_CHECK = """
import json, os, secrets
os.environ["RAY_AUTH_TOKEN"] = secrets.token_hex(32)  # as WorkerPool does: no ~/.ray/auth_token
import ray
from rlvr.trainer import devices

ray.init(num_cpus=1, include_dashboard=False, log_to_driver=False)

@ray.remote(**devices.worker_resources(1, 0))
def seen():
    import torch

    return os.environ.get("CUDA_VISIBLE_DEVICES"), torch.cuda.is_available(), ray.get_gpu_ids()

env = {"env_vars": devices.worker_env(devices.worker_gpus(None, "cpu"), None)}
print(json.dumps(ray.get(seen.options(runtime_env=env).remote())))
ray.shutdown()
"""


def test_on_a_real_ray_a_zero_gpu_worker_sees_no_gpu():
    """The fact `worker_env` rests on: the pinned Ray passes the blank CUDA_VISIBLE_DEVICES to an actor that asks
    for no GPU (it would otherwise leave it the trainer's GPUs), and the actor asks Ray for exactly that.

    In its own process: ray.init turns token auth on in os.environ and caches the token for the process's life,
    so a Ray started here would leave every later `ray start` in the test run with auth on and no token."""
    pytest.importorskip("ray")
    done = subprocess.run([sys.executable, "-c", RAY_ACTOR_CHECK], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert json.loads(done.stdout.strip().splitlines()[-1]) == ["", False, []]
