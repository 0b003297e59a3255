"""Generation workers of asynchronous GRPO: Ray actors that sample and score whole steps ahead of training.

A worker holds its own copy of the model and samples each step with the synchronous trainer's
`StepSampler` (trainer/step_sampler.py): the same prompts, sampling seeds, episodes (tools included),
scoring through the envs and advantages as a synchronous step, so no loop is written twice. It builds
no optimizer and no reference model: it only samples. The
step index fixes everything random (the prompts are `step * prompts_per_step * (1 + refill_rounds)`
onwards), so a step sampled again, after a worker died, draws the same prompts.

The worker samples with its config's `generator`. With `generator: vllm` its engine is its own (in
the worker's process) and takes each new version as the synchronous trainer's does after a step:
merged into the base weights under LoRA, then a prefix-cache reset. The groups then carry the
engine's sampled log-probs, so one ratio in the loss covers both staleness and the engine's numerics.

`WorkerPool` (in the trainer) hands out steps in order. Step s is given out only while
s <= version + ahead (version: the trainer's optimizer steps so far), together with the newest
weights when the worker does not hold them yet: a LoRA run ships only the adapters, a full run the
state dict, once per version through Ray's object store (shared memory on one host, Ray's object
transfer across hosts). A finished step comes back tagged with the version it was sampled under;
one sampled more than `max_staleness` versions before the trainer reaches it is dropped, counted
and sampled again. A worker that dies (kill -9, a lost node) is started again and its step is
sampled again from the start, so no group is lost and none is trained twice.

This module imports neither torch nor ray at import time (the config validates `async:` here).
"""

from __future__ import annotations

import contextlib
import os
import secrets
import signal
import time
from collections import deque
from dataclasses import dataclass, field
from typing import Any

from rlvr.trainer import devices

DEFAULTS = {"workers": 1, "max_staleness": 1, "ahead": None, "address": None, "worker_cpus": 1, "worker_gpus": None,
            "trainer_prompts": 0}
MAX_RESTARTS = 3  # a step whose worker died this many times in a row ends the run (a worker that cannot start)


def check_async(options, config) -> dict | None:
    """The `async:` config section with defaults filled in, or None for a synchronous run.

    `ahead` (default `max_staleness`): how many steps sampling may run ahead of training; a larger
    value than `max_staleness` keeps more workers busy at the price of dropped steps.
    `trainer_prompts` (default 0): how many of each step's prompts (the last ones) the trainer samples
    itself, under its current weights, while the workers finish the rest; on a machine whose cores the
    trainer and the workers share, it keeps the trainer's core busy while it would wait."""
    if options is None or options is False:
        return None
    if options is True:
        options = {}
    if not isinstance(options, dict):
        raise ValueError("config: async is a mapping {workers, max_staleness, ahead, address, worker_cpus, "
                         "worker_gpus, trainer_prompts} or null")
    unknown = sorted(set(options) - set(DEFAULTS))
    if unknown:
        raise ValueError(f"config: unknown async key(s) {', '.join(unknown)}")
    merged = {**DEFAULTS, **options}
    if merged["ahead"] is None:
        merged["ahead"] = merged["max_staleness"]
    for key, low in (("workers", 1), ("max_staleness", 0), ("ahead", 0), ("trainer_prompts", 0)):
        if isinstance(merged[key], bool) or not isinstance(merged[key], int) or merged[key] < low:
            raise ValueError(f"config: async.{key} must be an integer of at least {low}")
    if not (isinstance(merged["worker_cpus"], (int, float)) and merged["worker_cpus"] >= 0):
        raise ValueError("config: async.worker_cpus must be a number of at least 0")
    devices.check_worker_gpus(merged["worker_gpus"])
    if merged["trainer_prompts"] >= config.prompts_per_step:
        raise ValueError(f"config: async.trainer_prompts must be below prompts_per_step ({config.prompts_per_step}): "
                         "the workers sample the rest")
    if merged["trainer_prompts"] and config.refill_rounds:
        raise ValueError("config: async.trainer_prompts needs refill_rounds 0: a refill round draws on the whole "
                         "step's groups, which neither side holds alone")
    if config.replay_fraction:
        raise ValueError("config: async runs do not replay prompts (replay_fraction must be 0): a step's replays "
                         "come from the step before, which is not trained yet when the next one is sampled")
    if config.parallel != "replicate":
        raise ValueError("config: async runs train in one process (parallel: replicate, no torchrun)")
    return merged


@dataclass
class Rollouts:
    """One step's groups, as a worker sampled and scored them."""

    step: int
    version: int  # the policy version (trainer optimizer steps) the groups were sampled under
    groups: list
    kept: list  # (group, advantages) of the groups with signal
    env_kwargs: dict
    data_position: int  # the prompt stream's position after this step
    gen_s: float  # sampling and scoring
    sample_s: float  # of which inside the generator (the rest: envs, tools, scoring, advantages)
    sync_s: float  # taking the new weights, before sampling
    worker: dict = field(default_factory=dict)  # pid and node that sampled it


def step_position(config, step: int) -> int:
    """Where step `step`'s prompts start in the prompt stream (no replay in async runs)."""
    return step * config.prompts_per_step * (1 + config.refill_rounds)


class GenerationWorker:
    """The Ray actor: the run's model, its generator and a step sampler, used only to sample and score steps."""

    def __init__(self, config, index: int, niceness: int):
        import dataclasses

        import torch

        from rlvr.trainer import distributed, lora
        from rlvr.trainer.memory import release_freed_memory
        from rlvr.trainer.models import load_model
        from rlvr.trainer.rollout import registry as generators
        from rlvr.trainer.step_sampler import StepSampler, precision, sampling_region

        # Ray starts workers at nice 15 (raylet's worker_niceness), below the trainer: on shared cores the
        # trainer, or any other job, would then take the core that sampling, the step's critical path, needs.
        # Linux sets niceness per thread: this one runs the actor's calls, and the threads it starts inherit it.
        try:
            os.setpriority(os.PRIO_PROCESS, 0, niceness)
        except PermissionError:  # raising a priority needs CAP_SYS_NICE: the worker keeps Ray's
            pass
        cfg = dataclasses.replace(config, async_=None)  # `config`: the run's TrainConfig
        if cfg.threads:
            torch.set_num_threads(cfg.threads)
        self.device = distributed.device()
        model, tokenizer = load_model(cfg.model, seed=cfg.seed)
        if cfg.lora:
            model = lora.wrap(model, cfg.lora)
        self.model, self.config = model.to(self.device).train(), cfg
        release_freed_memory()
        self.generator = self.clock = TimedGenerator(
            generators.build(cfg.generator, self.model, tokenizer, **cfg.generator_options()))
        use_bf16, sample_bf16 = precision(cfg, self.device)
        self.sampler = StepSampler(cfg, self.model, tokenizer, self.generator, region=lambda rows: sampling_region(
            self.model, rows, pack=not use_bf16, bf16=sample_bf16, device_type=self.device.type))
        self.part = slice(0, cfg.prompts_per_step - config.async_["trainer_prompts"])  # the trainer samples the rest
        self.version = -1

    def where(self) -> dict:
        import ray

        return {"pid": os.getpid(), "node": ray.get_runtime_context().get_node_id(),
                "niceness": os.getpriority(os.PRIO_PROCESS, 0), "device": str(self.device),
                "gpu_ids": [str(g) for g in ray.get_gpu_ids()]}

    def collect(self, step: int, version: int, weights: list | None) -> Rollouts:
        """Step `step`'s groups; `weights`: [an object ref of version `version`'s weights], or None to keep
        the weights held (a list, so that fetching them is timed here and not before the call)."""
        import ray

        t0 = time.perf_counter()
        if weights is not None:
            self._load(ray.get(weights[0]))
            self.version = version
        t1 = time.perf_counter()
        self.clock.seconds = 0.0
        sampled = self.sampler.collect(step, step_position(self.config, step), self.part)
        return Rollouts(step, self.version, sampled.groups, sampled.kept, sampled.env_kwargs, sampled.data_position,
                        gen_s=time.perf_counter() - t1, sample_s=self.clock.seconds, sync_s=t1 - t0,
                        worker=self.where())

    def _load(self, state: dict) -> None:
        """Version `state` into the model, and into the generator when it holds weights of its own (vLLM)."""
        from rlvr.trainer import lora

        if self.config.lora:
            lora.load_adapter_state(self.model, state)
        else:
            self.model.load_state_dict(state)
        self.generator.sync_weights(self.model)


class TimedGenerator:
    """A worker's generator, counting the seconds spent in it: the step's sampling, apart from its envs."""

    def __init__(self, inner):
        self.inner, self.seconds = inner, 0.0

    def __getattr__(self, name):  # sync_weights and the rest: the generator's own
        return getattr(self.inner, name)

    def timed(self, call, *args):
        t0 = time.perf_counter()
        try:
            return call(*args)
        finally:
            self.seconds += time.perf_counter() - t0

    def sample(self, prompt_ids, settings, seeds):
        return self.timed(self.inner.sample, prompt_ids, settings, seeds)

    def start(self, batch, settings):
        """The generator's own session, timed (it may prefill); None if it has none: the turn-by-turn
        session then calls `sample`, timed above."""
        own = getattr(self.inner, "start", None)
        t0 = time.perf_counter()
        session = own(batch, settings) if own is not None else None
        if session is None:
            return None
        self.seconds += time.perf_counter() - t0
        return TimedSession(session, self)


class TimedSession:
    def __init__(self, inner, clock: TimedGenerator):
        self.inner, self.clock = inner, clock

    def turns(self):
        return self.clock.timed(self.inner.turns)

    def extend(self, row, messages, reply_ids):
        return self.clock.timed(self.inner.extend, row, messages, reply_ids)

    def finish(self, row):
        return self.clock.timed(self.inner.finish, row)

    def close(self):
        return self.clock.timed(self.inner.close)


class WorkerPool:
    """The trainer's side: starts the workers, hands out steps, publishes weights, restarts dead workers."""

    def __init__(self, config, trainer_device: str = "cpu"):
        import ray

        opts = config.async_
        self._gpus = devices.worker_gpus(opts["worker_gpus"], trainer_device)
        self.ahead, self.max_staleness = opts["ahead"], opts["max_staleness"]
        self._own_ray = not ray.is_initialized()
        if self._own_ray:
            local = {}
            if not opts["address"]:
                local["num_cpus"] = max(os.cpu_count() or 1, int(opts["workers"] * opts["worker_cpus"]))
                if not {"RAY_AUTH_MODE", "RAY_AUTH_TOKEN", "RAY_AUTH_TOKEN_PATH"} & set(os.environ):
                    # a token for this run only: a new local Ray would otherwise write ~/.ray/auth_token, which
                    # every later `ray start --head` on the machine then enforces
                    os.environ["RAY_AUTH_TOKEN"] = secrets.token_hex(32)
            stop = signal.getsignal(signal.SIGTERM)
            with _visible_to_ray(trainer_device, local=not opts["address"]):
                ray.init(address=opts["address"], include_dashboard=False, log_to_driver=False, **local)
            if stop is not None and signal.getsignal(signal.SIGTERM) is not stop:
                signal.signal(signal.SIGTERM, stop)  # ray.init put its own (exit status 15): the command's stays
        self._config = config
        self._cpus = opts["worker_cpus"]
        devices.check_gpu_fit(opts["workers"], self._gpus, ray.cluster_resources().get("GPU", 0))
        self._runtime_env = {"env_vars": devices.worker_env(self._gpus, os.environ.get("PYTHONPATH"))}
        self.workers = [self._start(i) for i in range(opts["workers"])]
        self.held = [-1] * len(self.workers)  # the weights version each worker holds
        self.busy: dict[Any, tuple[int, int]] = {}  # in-flight call -> (worker, step)
        self.redo: deque[int] = deque()  # steps to sample again (dropped or lost)
        self.ready: dict[int, Rollouts] = {}
        self.next_step, self.version, self.weights = 0, -1, None
        self.dropped = 0  # groups dropped as too stale since the trainer last asked (`take_dropped`)
        self.restarts, self._failures = 0, 0
        self.publish_s = 0.0

    def _start(self, index: int):
        import ray

        actor = ray.remote(**devices.worker_resources(self._cpus, self._gpus), max_restarts=0)(GenerationWorker)
        return actor.options(scheduling_strategy="SPREAD", runtime_env=self._runtime_env).remote(
            self._config, index, os.getpriority(os.PRIO_PROCESS, 0))

    def pids(self) -> list[int]:
        import ray

        return [info["pid"] for info in ray.get([w.where.remote() for w in self.workers])]

    def start(self, step: int, version: int, weights: dict) -> None:
        self.next_step = step
        self.publish(version, weights)

    def publish(self, version: int, weights: dict) -> None:
        """The trainer's weights of `version` go to the object store; idle workers get steps."""
        import ray

        t0 = time.perf_counter()
        self.weights, self.version = ray.put(weights), version
        self.publish_s = time.perf_counter() - t0
        self._dispatch()

    def _dispatch(self) -> None:
        working = {w for w, _ in self.busy.values()}
        for w in range(len(self.workers)):
            if w in working:
                continue
            if self.redo:  # sampled again only once the trainer is near enough for it not to be dropped again
                if self.redo[0] - self.version > self.max_staleness:
                    return
                step = self.redo.popleft()
            elif self.next_step <= self.version + self.ahead:
                step, self.next_step = self.next_step, self.next_step + 1
            else:
                return
            weights = [self.weights] if self.held[w] != self.version else None
            self.busy[self.workers[w].collect.remote(step, self.version, weights)] = (w, step)
            self.held[w] = self.version

    def batch(self, step: int) -> Rollouts:
        """Step `step`'s rollouts (waits for them), sampled at most `max_staleness` versions before `step`."""
        import ray
        from ray.exceptions import ActorUnavailableError, RayActorError

        while step not in self.ready:
            if not self.busy:
                raise RuntimeError(f"async: no worker is sampling step {step}")
            [done], _ = ray.wait(list(self.busy), num_returns=1)
            w, got = self.busy.pop(done)
            try:
                result = ray.get(done)
            except (RayActorError, ActorUnavailableError):  # the worker died: a new one samples its step again
                self._failures += 1
                if self._failures > MAX_RESTARTS:
                    raise RuntimeError(f"async: worker {w} died {self._failures} times in a row") from None
                ray.kill(self.workers[w])
                self.workers[w], self.held[w] = self._start(w), -1
                self.restarts += 1
                self._again(got)
                self._dispatch()
                continue
            self._failures = 0
            if got - result.version > self.max_staleness:  # trained at version `got`: too stale
                self.dropped += len(result.groups)
                self._again(got)
            else:
                self.ready[got] = result
            self._dispatch()
        return self.ready.pop(step)

    def _again(self, step: int) -> None:
        self.redo = deque(sorted([*self.redo, step]))

    def take_dropped(self) -> int:
        dropped, self.dropped = self.dropped, 0
        return dropped

    def close(self) -> None:
        """Ends every worker (and the local Ray this pool started)."""
        import ray

        for worker in self.workers:
            ray.kill(worker)
        self.workers, self.busy = [], {}
        if self._own_ray:
            ray.shutdown()


@contextlib.contextmanager
def _visible_to_ray(trainer_device: str, local: bool):
    """While a local Ray instance starts, `CUDA_VISIBLE_DEVICES` names the GPUs it may hand to workers
    (`devices.local_ray_gpus`: all but the trainer's, where there are others); restored afterwards."""
    if not (local and trainer_device.startswith("cuda")):
        yield
        return
    import torch

    before = os.environ.get("CUDA_VISIBLE_DEVICES")
    visible = devices.visible_gpus(before, torch.cuda.device_count())
    os.environ["CUDA_VISIBLE_DEVICES"] = ",".join(devices.local_ray_gpus(visible, trainer_device))
    try:
        yield
    finally:
        if before is None:
            os.environ.pop("CUDA_VISIBLE_DEVICES", None)
        else:
            os.environ["CUDA_VISIBLE_DEVICES"] = before
