"""Asynchronous GRPO: generation workers sample and score ahead while this process only trains.

`async: {workers: N, max_staleness: k}` in a run config makes `rlvr train` use this trainer. It is
the synchronous `GRPOTrainer` with one change: a step's groups come from the worker pool
(trainer/async_workers.py, each worker sampling with trainer/step_sampler.py) instead of
`sample_step`, and after each optimizer step the new weights are published to the workers.
Everything else (the loss, the optimizer, evaluations, checkpoints, metrics) is the synchronous
trainer's own code.

A step sampled under the current weights (staleness 0) trains exactly as a synchronous step: at
k = 0 the run logs the same completions and metrics as a synchronous run of the same seeds. A
step sampled s > 0 versions earlier carries the behaviour policy's log-probs, and the loss weighs
each token by pi / mu, truncated (`correction: tis`) or masked (`mis`) beyond `tis_cap`
(trainer/loss.py). Each step logs `staleness` (groups by versions behind), `stale_dropped`,
the behaviour ratio's mean and max, the share of tokens truncated or masked (`is_corrected_frac`),
`sampler_kl` (KL(behaviour || current), k3) and the weight sync's cost.

With `generator: vllm` the engines are the workers' (this process samples nothing and builds none).
Their groups carry the engine's log-probs mu_v of version v, and the loss's one behaviour weight
pi_s / mu_v (trainer/loss.py) covers both the s - v versions of staleness and the engine's numerics:
it is corrected at every staleness, 0 included, as the synchronous trainer corrects vLLM, and never twice.

With `trainer_prompts: m` the trainer samples the last m prompts of each step itself, under its
current weights (staleness 0), before it waits for the workers' share: on a machine where the trainer
and a worker each have one core, the trainer's core then samples while it would otherwise wait. The
step's prompts, seeds and advantages (computed over the whole step) stay those of a synchronous step.

A resumed run starts a new pool at its checkpoint's step: at k = 0 it continues exactly; at k > 0
the steps that were in flight are sampled again under the checkpoint's weights (same prompts, none
lost or repeated).
"""

from __future__ import annotations

import time

from rlvr.trainer import lora
from rlvr.trainer.async_workers import WorkerPool, step_position
from rlvr.trainer.devices import publishable
from rlvr.trainer.grpo import GRPOTrainer


class AsyncGRPOTrainer(GRPOTrainer):
    def __init__(self, config, run_dir, model=None, tokenizer=None, resume: bool = False):
        if not config.async_:
            raise ValueError("AsyncGRPOTrainer needs an async: section in the config")
        super().__init__(config, run_dir, model=model, tokenizer=tokenizer, resume=resume)
        if self.world > 1:
            raise ValueError("config: async runs train in one process (no torchrun)")
        self.sampler_differs = self.correct_sampler  # bf16 sampling or another engine: corrected at any staleness
        self.pool: WorkerPool | None = None

    def _make_generator(self):
        # the workers sample, each with its own generator; the trainer too when it samples a share of each step
        return super()._make_generator() if self.config.async_["trainer_prompts"] else None

    def train(self) -> list[dict]:
        self.pool = WorkerPool(self.config, str(self.device))
        try:
            self.pool.pids()  # the workers have loaded their models: like the trainer's own, not training time
            self.pool.start(self.step, self.step, self._weights())
            return super().train()
        finally:
            self.pool.close()

    def _weights(self) -> dict:
        """What the workers take after each step: the adapters of a LoRA run, else the state dict, as CPU
        tensors (any worker loads them, on whatever device it samples)."""
        return publishable(lora.adapter_state(self.model) if self.config.lora else self.model.state_dict())

    def train_step(self) -> dict:
        cfg = self.config
        t0 = time.perf_counter()
        lr = self.scheduler.get_last_lr()[0]
        own = []  # the step's last trainer_prompts prompts, sampled here while the workers finish the rest
        if cfg.async_["trainer_prompts"]:
            self.data_position = step_position(cfg, self.step)
            own, _ = self.sample_step(slice(cfg.prompts_per_step - cfg.async_["trainer_prompts"], None))
        own_s = time.perf_counter() - t0
        batch = self.pool.batch(self.step)
        wait_s = time.perf_counter() - t0
        groups, kept = batch.groups + own, batch.kept
        if own:  # advantages over the whole step, as a synchronous step computes them
            candidates = [g for g in groups if self.sampler.has_signal(g)]
            kept = list(zip(candidates, self.sampler.advantages(candidates, groups)))
        self.env_kwargs, self.data_position, self._replayed = batch.env_kwargs, batch.data_position, 0
        staleness = self.step - batch.version
        histogram = {str(staleness): len(batch.groups)}
        if own:
            histogram["0"] = histogram.get("0", 0) + len(own)
        self.correct_sampler = self.sampler_differs or staleness > 0
        self._last_samples = [{"step": self.step + 1, "prompt": g.index, "reward": g.rewards[0], "text": g.texts[0]}
                              for g in groups if g.texts]
        stats = self._optimise(kept, groups)
        if self.generator is not None:  # the trainer's own sampler, when it holds weights of its own (vLLM)
            self.generator.sync_weights(self.model)
        self.step += 1
        self.pool.publish(self.step, self._weights())
        step_s = time.perf_counter() - t0
        record = self._record(groups, kept, stats, lr, step_s, wait_s, cfg)
        tokens = stats["is_tokens"]
        record.update({
            "policy_version": batch.version,
            "staleness": histogram,  # groups trained by versions behind
            "stale_dropped": self.pool.take_dropped(),
            "worker_restarts": self.pool.restarts,  # since this trainer started
            "is_ratio_mean": stats["is_ratio_sum"] / tokens if tokens else None,
            "is_ratio_max": stats["is_ratio_max"] if tokens else None,
            "is_corrected_frac": stats["is_corrected"] / tokens if tokens else None,
            "sync_s": self.pool.publish_s,  # putting the weights in the object store (trainer side)
            "worker_sync_s": batch.sync_s,  # the worker fetching and loading them
            "worker_gen_s": batch.gen_s,  # the worker sampling and scoring this step
            "worker_sample_s": batch.sample_s,  # of which inside its generator
            "worker_score_s": batch.gen_s - batch.sample_s,  # and the rest: envs, tools, scoring, advantages
            "trainer_gen_s": own_s,  # the trainer sampling and scoring its own prompts (trainer_prompts)
        })
        return record
