"""The GRPO training loop.

One step: draw P prompts from the env, sample G completions of each, score them through the
env API, turn rewards into advantages, then run `mu` optimisation passes over the groups that
carry signal (each pass: one forward/backward per group, gradients summed across processes,
norm clipping, one AdamW step under a warmup + cosine schedule). Groups whose advantages are
all zero (every completion got the same reward) are skipped before any forward pass; with
`refill_rounds` > 0 fresh prompts replace them (DAPO's dynamic sampling), and with
`replay_fraction` > 0 part of each step's prompts are recent ones that carried signal, asked
again (trainer/replay.py).

Everything random is a function of (seed, prompt index), so a run resumed from a checkpoint
logs the same metrics as one that never stopped, and a sharded run trains on the same
completions as a single process.
"""

from __future__ import annotations

import contextlib
import copy
import math
import statistics
import time
import warnings
from pathlib import Path

import torch
import yaml

from rlvr.trainer import checkpoint, distributed, lora
from rlvr.trainer.config import TrainConfig
from rlvr.trainer.devices import BF16_KEY
from rlvr.trainer.heldout import evaluate_held_out
from rlvr.trainer.logprobs import densify_gradients, group_logprobs
from rlvr.trainer.loss import grpo_loss, kl_k3
from rlvr.trainer.memory import release_freed_memory
from rlvr.trainer.metrics import JsonlLog
from rlvr.trainer.packed_weights import packed_linears
from rlvr.trainer.progress import ProgressBar
from rlvr.trainer.replay import ReplayBuffer
from rlvr.trainer.reporting import Reporter
from rlvr.trainer.rollout import registry as generators
from rlvr.trainer.rollout.groups import Group
from rlvr.trainer.rollout.tally import episode_metrics
from rlvr.trainer.step_sampler import StepSampler, precision, sampling_region


def lr_factor(step: int, warmup: int, total: int, min_ratio: float, time_fraction: float = 0.0,
              decay_start: float = 0.0) -> float:
    """Linear warmup over `warmup` steps, constant up to `decay_start` (a share of the run), then cosine
    decay from 1 to `min_ratio` at `total` steps, or sooner when `time_fraction` (the share of a time
    budget spent) is further along: a run that a time budget ends does not know its step count, and
    still ends its decay when its time does."""
    if step < warmup:
        return (step + 1) / warmup
    progress = max((step - warmup) / max(1, total - warmup), time_fraction)
    progress = min(1.0, max(0.0, progress - decay_start) / (1 - decay_start))
    return min_ratio + (1 - min_ratio) * 0.5 * (1 + math.cos(math.pi * progress))


def make_optimizer(params, config: TrainConfig) -> torch.optim.Optimizer:
    """AdamW, fused when the device has a fused kernel (less memory and time than the per-tensor loop)."""
    kwargs = dict(lr=config.lr, betas=tuple(config.adam_betas), weight_decay=config.weight_decay)
    try:
        return torch.optim.AdamW(params, fused=True, **kwargs)
    except (RuntimeError, TypeError):
        return torch.optim.AdamW(params, foreach=False, **kwargs)


class GRPOTrainer:
    """Trains `config.model` (or a model passed in) on `config.env`, logging to `run_dir`."""

    def __init__(self, config: TrainConfig, run_dir: str | Path, model=None, tokenizer=None,
                 resume: bool = False):
        self.config = config
        self.rank, self.world = distributed.setup()
        if config.prompts_per_step % self.world:
            raise ValueError(f"prompts_per_step ({config.prompts_per_step}) must divide by {self.world} processes")
        if config.threads:
            torch.set_num_threads(config.threads)
        self.device = distributed.device()
        if model is None:
            from rlvr.trainer.models import load_model

            model, tokenizer = load_model(config.model, seed=config.seed)
        if config.lora:  # only the adapters require grad, so only they reach the optimizer
            model = lora.wrap(model, config.lora)
        self.model, self.tokenizer = model.to(self.device).train(), tokenizer
        self.ref_model = None
        if config.beta != 0.0:  # a frozen copy of the starting weights; none at all when beta = 0
            # with LoRA the reference is the base model: the same model with its adapters disabled
            self.ref_model = model if config.lora else copy.deepcopy(model).eval().requires_grad_(False)
        self.fsdp = None
        if config.parallel == "fsdp":  # after the reference copy: that one stays whole
            from rlvr.trainer.fsdp import Sharded

            self.fsdp = Sharded(self.model, self.device)
        release_freed_memory()  # what loading the model freed (a GGUF model is de-quantized through a copy)
        self.params = [p for p in self.model.parameters() if p.requires_grad]
        self.optimizer = make_optimizer(self.params, config)
        total = config.steps * config.mu
        self.train_seconds = 0.0  # training time against max_minutes, evaluations not counted
        self.scheduler = torch.optim.lr_scheduler.LambdaLR(
            self.optimizer, lambda s: lr_factor(s, config.warmup_steps * config.mu, total, config.min_lr_ratio,
                                                self._time_fraction(), config.decay_start))
        # sampling in bf16 while training in fp32: the loss then reweights tokens by the two policies' ratio
        self.use_bf16, self.sample_bf16 = precision(config, self.device)
        if config.sample_dtype == BF16_KEY and not self.sample_bf16:
            warnings.warn(f"sample_dtype: bf16 samples in fp32 on {self.device}: it does not compute bf16 natively "
                          "(on a CPU: oneDNN without bf16, e.g. AVX2 only), where bf16 is emulated and slower",
                          stacklevel=2)
        # the loss reweights tokens by the sampler's and the trained policy's ratio, and logs their KL, when
        # they differ: sampling in bf16 while training in fp32, or sampling in another engine (vLLM)
        self.correct_sampler = (self.sample_bf16 and not self.use_bf16) or not generators.is_exact(config.generator)
        self.run_dir = Path(run_dir)
        self.metrics, self.evals = JsonlLog(self.run_dir / "metrics.jsonl"), JsonlLog(self.run_dir / "eval.jsonl")
        self.samples = JsonlLog(self.run_dir / "samples.jsonl")  # one completion per group, to read what it does
        self.step, self.data_position = 0, 0
        self.replay, self._replayed = ReplayBuffer(config.replay_capacity, config.seed), 0
        self.env_kwargs = None
        if self.rank == 0:
            self.run_dir.mkdir(parents=True, exist_ok=True)
        if resume:
            state = checkpoint.load(self.run_dir, load_states=self._load_states, scheduler=self.scheduler)
            self.step, self.data_position = state["step"], state["data_position"]
            self.train_seconds = state["train_seconds"]
            self.replay.load(state["replay"])
            if self.rank == 0:
                for log in (self.metrics, self.evals, self.samples):
                    log.truncate_after(self.step)
        elif self.rank == 0:
            if self.metrics.read():
                raise ValueError(f"{self.run_dir} already holds a run: resume it or choose another run dir")
            (self.run_dir / "config.yaml").write_text(yaml.safe_dump(config.to_dict(), sort_keys=False))
        self.generator = self._make_generator()  # after a resume: an engine starts from the resumed weights
        self.sampler = StepSampler(config, self.model, self.tokenizer, self.generator, rank=self.rank,
                                   world=self.world, replay=self.replay, region=self._sampling_region,
                                   gathered=self._gathered)
        self.reporter = Reporter(config.report_to if self.rank == 0 else [], self.run_dir, config.to_dict(),
                                 resume_step=self.step)

    # --- the loop ---------------------------------------------------------------------

    def train(self) -> list[dict]:
        """Run to `config.steps`; returns this run's metrics records."""
        cfg = self.config
        if cfg.eval_prompts and self.step == 0 and not self.evals.read():
            self._evaluate()
        bar = self._progress_bar()
        records = []
        started = time.perf_counter() - self.train_seconds  # a resumed run's budget counts the time already trained
        eval_s = 0.0  # held-out evaluations do not count against max_minutes
        try:
            while self.step < cfg.steps and self._time_fraction() <= 1:  # a resumed run may have no time left
                record = self.train_step()
                records.append(record)
                if self.rank == 0:
                    self.metrics.append(record)
                    for sample in self._last_samples:
                        self.samples.append(sample)
                    self.reporter.log_step(record, self._last_samples)
                self.train_seconds = time.perf_counter() - started - eval_s
                if cfg.max_minutes > 0:  # the slowest rank's clock: every rank stops and decays alike
                    self.train_seconds = distributed.max_value(self.train_seconds)
                if bar is not None:
                    bar.update(self.step, self.train_seconds, reward=f"{record['reward_mean']:.3f}",
                               acc=f"{record['accuracy']:.2f}", kl=f"{record['kl']:.4f}")
                last = self.step == cfg.steps or self._time_fraction() > 1
                if cfg.eval_prompts and (last or (cfg.eval_every and self.step % cfg.eval_every == 0)):
                    t_eval = time.perf_counter()
                    self._evaluate()
                    eval_s += time.perf_counter() - t_eval
                if cfg.checkpoint_every and (self.step % cfg.checkpoint_every == 0 or last):
                    self.save()
        finally:
            checkpoint.wait()
            self.reporter.close()
            if bar is not None:
                bar.close()
            self.sampler.close()
        return records

    def save(self) -> None:
        model_state, optimizer_state = self._states()  # every rank takes part under FSDP
        if self.rank == 0:
            checkpoint.save(self.run_dir, model_state=model_state, optimizer_state=optimizer_state,
                            scheduler=self.scheduler, step=self.step, data_position=self.data_position,
                            train_seconds=self.train_seconds, replay=self.replay.state(),
                            config=self.config.to_dict())
        distributed.barrier()

    def _make_generator(self):
        return generators.build(self.config.generator, self.model, self.tokenizer, **self.config.generator_options())

    def _time_fraction(self) -> float:
        """The share of max_minutes trained so far (0 without a time budget), for the lr schedule."""
        return self.train_seconds / (60 * self.config.max_minutes) if self.config.max_minutes > 0 else 0.0

    def _states(self) -> tuple[dict, dict]:
        """What a checkpoint keeps: the adapters of a LoRA run (else every weight, whole under FSDP), and
        the optimizer's state."""
        if self.fsdp is not None:
            return self.fsdp.state(self.optimizer)
        model_state = lora.adapter_state(self.model) if self.config.lora else self.model.state_dict()
        return model_state, self.optimizer.state_dict()

    def _load_states(self, model_state: dict, optimizer_state: dict) -> None:
        if self.fsdp is not None:
            return self.fsdp.load_state(self.optimizer, model_state, optimizer_state)
        if self.config.lora:
            lora.load_adapter_state(self.model, model_state)
        else:
            self.model.load_state_dict(model_state)
        self.optimizer.load_state_dict(optimizer_state)

    def train_step(self) -> dict:
        cfg = self.config
        t0 = time.perf_counter()
        lr = self.scheduler.get_last_lr()[0]
        groups, kept = self.sample_step()
        t_gen = time.perf_counter() - t0
        if self.config.vllm_sleep:  # the engine's memory is free for the backward pass
            self.generator.sleep()
        self._last_samples = distributed.gather_lists([
            {"step": self.step + 1, "prompt": g.index, "reward": g.rewards[0], "text": g.texts[0]} for g in groups
            if g.texts])
        stats = self._optimise(kept, groups)
        if self.config.vllm_sleep:
            self.generator.wake_up()
        self.generator.sync_weights(self.model)  # a generator with its own weights takes the new ones
        self.step += 1
        step_s = time.perf_counter() - t0
        return self._record(groups, kept, stats, lr, step_s, t_gen, cfg)

    # --- rollouts and advantages --------------------------------------------------------

    def sample_step(self, part: slice | None = None) -> tuple[list[Group], list[tuple[Group, torch.Tensor]]]:
        """This step's groups of this rank, and those that carry signal with their advantages
        (trainer/step_sampler.py); the prompt stream moves on. `part`: only these of the step's prompts."""
        sampled = self.sampler.collect(self.step, self.data_position, part)
        self.data_position, self._replayed, self.env_kwargs = sampled.data_position, sampled.replayed, sampled.env_kwargs
        return sampled.groups, sampled.kept

    @property
    def envs(self) -> list:
        return self.sampler.envs

    # --- optimisation -------------------------------------------------------------------

    def _tensors(self, group: Group):
        width = max(len(c) for c in group.completion_ids)
        ids = torch.full((len(group.completion_ids), width), self.tokenizer.pad_token_id, dtype=torch.long)
        for i, c in enumerate(group.completion_ids):
            ids[i, :len(c)] = torch.tensor(c)
        mask = self._mask(group, width)
        prompt = torch.tensor(group.prompt_ids, dtype=torch.long)
        sampler = None
        if self.correct_sampler:
            sampler = torch.zeros_like(mask)
            for i, lps in enumerate(group.sample_logps):
                sampler[i, :len(lps)] = torch.tensor(lps)
            sampler = sampler.to(self.device)
        return prompt.to(self.device), ids.to(self.device), mask.to(self.device), sampler

    def _mask(self, group: Group, width: int) -> torch.Tensor:
        """The loss weight of each completion token (G x width, on the CPU): 1, or 0 after a cut with
        `mask_truncated`; multi-turn env tokens are context, weight 0."""
        mask = torch.zeros((len(group.completion_ids), width), dtype=torch.float32)
        for i, (c, cut) in enumerate(zip(group.completion_ids, group.truncated)):
            if not (self.config.mask_truncated and cut):
                mask[i, :len(c)] = 1.0 if group.weights is None else torch.tensor(group.weights[i], dtype=torch.float32)
        return mask

    def _autocast(self, enabled: bool | None = None):
        if not (self.use_bf16 if enabled is None else enabled):
            return contextlib.nullcontext()
        return torch.autocast(self.device.type, dtype=torch.bfloat16)

    def _packed(self, rows: int, dtype: torch.dtype = torch.float32):
        """Sampling on a CPU through weights packed for oneDNN in `dtype` (not under FSDP, whose weights are
        gathered views, nor under bf16 training); yields whether they were packed."""
        return packed_linears(self.model, enabled=self.fsdp is None and not self.use_bf16, rows=rows, dtype=dtype)

    def _sampling_region(self, rows: int):
        """A step's sampling (`step_sampler.sampling_region`): packed as `_packed` says, in bf16 when sampling is."""
        return sampling_region(self.model, rows, pack=self.fsdp is None and not self.use_bf16, bf16=self.sample_bf16,
                               device_type=self.device.type)

    def _gathered(self):
        """Under FSDP, whole weights on every rank for a block that runs a rank-dependent number of forwards."""
        return self.fsdp.gathered() if self.fsdp is not None else contextlib.nullcontext()

    def _logprobs(self, model, prompt, ids, mask, with_entropy=False):
        with self._autocast():
            if self.fsdp is not None and model is self.model:
                return self.fsdp.policy(prompt, ids, mask, self.config.temperature, self.config.chunk_tokens,
                                        with_entropy, self.config.pack_tokens)
            return group_logprobs(model, prompt, ids, mask, self.config.temperature, self.config.chunk_tokens,
                                  with_entropy, self.config.pack_tokens)

    def _optimise(self, kept: list[tuple[Group, torch.Tensor]], groups: list[Group]) -> dict:
        cfg = self.config
        release_freed_memory()  # what sampling freed (KV caches), before the step's peak
        batch = [(self._tensors(g), adv.to(self.device)) for g, adv in kept]
        batch = [(t, adv) for t, adv in batch if t[2].sum() > 0]
        masks = [m for (_, _, m, _), _ in batch]
        if cfg.count_skipped:  # the skipped groups' tokens count as if trained with advantage 0
            trained = {id(g) for g, _ in kept}
            masks += [self._mask(g, max(map(len, g.completion_ids))) for g in groups
                      if id(g) not in trained and g.completion_ids]
        n_seqs, n_tokens = distributed.sum_values(
            [sum(float((m.sum(-1) > 0).sum()) for m in masks), sum(float(m.sum()) for m in masks)])
        totals = {"clipped": 0.0, "kl": 0.0, "tokens": 0.0, "entropy": 0.0, "entropy_tokens": 0.0,
                  "grad_norm": 0.0, "updates": 0, "sampler_kl": 0.0, "is_ratio_sum": 0.0, "is_ratio_max": 0.0,
                  "is_corrected": 0.0, "is_tokens": 0.0}
        if n_seqs == 0:
            for _ in range(cfg.mu):
                self.scheduler.step()
            return totals
        old, ref = [None] * len(batch), [None] * len(batch)
        with torch.no_grad(), self._gathered():
            for i, ((prompt, ids, mask, _), _) in enumerate(batch):
                if cfg.mu > 1:
                    old[i] = self._logprobs(self.model, prompt, ids, mask)[0]
                if self.ref_model is not None:
                    with self.ref_model.disable_adapter() if self.config.lora else contextlib.nullcontext():
                        ref[i] = self._logprobs(self.ref_model, prompt, ids, mask)[0]
        for pass_ in range(cfg.mu):
            self.optimizer.zero_grad(set_to_none=True)
            for i, ((prompt, ids, mask, sampler), adv) in enumerate(batch):
                logp, entropy = self._logprobs(self.model, prompt, ids, mask, with_entropy=pass_ == 0)
                old_logp = old[i] if old[i] is not None else logp.detach()
                loss, st = grpo_loss(
                    logp, old_logp, adv, mask,
                    n_seqs=n_seqs, n_tokens=n_tokens, max_tokens=cfg.max_new_tokens, aggregation=cfg.aggregation,
                    epsilon_low=cfg.epsilon_low, epsilon_high=cfg.epsilon_high, ratio_level=cfg.ratio_level,
                    ref_logp=ref[i], beta=cfg.beta, sampler_logp=sampler, tis_cap=cfg.tis_cap,
                    correction=cfg.correction)
                if sampler is not None and pass_ == 0:
                    totals["sampler_kl"] += float((kl_k3(sampler, old_logp) * mask).sum())
                    totals["is_tokens"] += st["tokens"]  # the behaviour ratios, for the log
                    totals["is_ratio_sum"] += st["is_ratio_sum"]
                    totals["is_corrected"] += st["is_corrected"]
                    totals["is_ratio_max"] = max(totals["is_ratio_max"], st["is_ratio_max"])
                loss.backward()
                for key in ("clipped", "kl", "tokens"):
                    totals[key] += st[key]
                if entropy is not None:
                    totals["entropy"] += float((entropy * mask).sum())
                    totals["entropy_tokens"] += float(mask.sum())
            max_norm = cfg.max_grad_norm if cfg.max_grad_norm > 0 else float("inf")
            if self.fsdp is not None:  # FSDP reduce-scatters in backward: every rank runs as many as the busiest
                for _ in range(int(distributed.max_value(len(batch))) - len(batch)):
                    self.fsdp.idle_pass(self.device)
                totals["grad_norm"] += self.fsdp.clip_grad_norm(self.params, max_norm)
            else:
                densify_gradients(self.params)
                distributed.sum_gradients(self.params)
                totals["grad_norm"] += float(torch.nn.utils.clip_grad_norm_(self.params, max_norm))
            checkpoint.wait()  # the last checkpoint's tensors are on disk before the step changes them
            self.optimizer.step()
            self.scheduler.step()
            totals["updates"] += 1
        self.optimizer.zero_grad(set_to_none=True)
        release_freed_memory()
        return totals

    # --- logging ------------------------------------------------------------------------

    def _record(self, groups, kept, stats, lr, step_s, gen_s, cfg) -> dict:
        rows = [
            (r, c, len(ids), cut, info.get("score", {}).get("components", {}) if isinstance(info, dict) else {})
            for g in groups for r, c, ids, cut, info in zip(g.rewards, g.correct, g.completion_ids, g.truncated, g.infos)
        ]
        rows = distributed.gather_lists(rows) or [(0.0, False, 0, False, {})]
        sums = distributed.sum_values([
            len(groups), len(kept), stats["clipped"], stats["kl"], stats["tokens"], stats["entropy"],
            stats["entropy_tokens"], sum(len(c) for g in groups for c in g.completion_ids), stats["sampler_kl"]])
        n_groups, n_kept, clipped, kl, tokens, entropy, entropy_tokens, gen_tokens, sampler_kl = sums
        rewards = [r[0] for r in rows]
        # seconds of the step in the envs (sandbox scoring, tools; the slowest rank's): scoring is never unseen
        env_s = distributed.max_value(sum(g.env_s for g in groups))
        record = {
            "step": self.step,
            "lr": lr,
            "reward_mean": statistics.fmean(rewards),
            "reward_std": statistics.pstdev(rewards),
            "accuracy": statistics.fmean(float(r[1]) for r in rows),
        }
        for name in sorted({k for r in rows for k in r[4]}):
            values = [float(r[4].get(name, 0.0)) for r in rows]
            record[f"reward/{name}_mean"] = statistics.fmean(values)
            record[f"reward/{name}_std"] = statistics.pstdev(values)
        record.update({
            "completion_len": statistics.fmean(r[2] for r in rows),
            "truncated_frac": statistics.fmean(float(r[3]) for r in rows),
            "kl": kl / tokens if tokens else 0.0,
            "clip_frac": clipped / tokens if tokens else 0.0,
            "entropy": entropy / entropy_tokens if entropy_tokens else None,
            "zero_var_frac": 1.0 - n_kept / n_groups if n_groups else 0.0,
            "groups_trained": int(n_kept),
            "replayed": self._replayed,  # prompts of this step asked again (replay_fraction)
            "grad_norm": stats["grad_norm"] / stats["updates"] if stats["updates"] else 0.0,
            # KL(sampler || trained policy) per token when sampling runs in another precision (k3 estimate)
            "sampler_kl": sampler_kl / entropy_tokens if self.correct_sampler and entropy_tokens else None,
            "env_kwargs": self.env_kwargs,
            "step_s": step_s,
            "gen_s": gen_s,
            "env_s": env_s,
            "env_share": env_s / step_s if step_s else 0.0,
            "tokens_per_s": gen_tokens / step_s if step_s else 0.0,
            "errors": int(distributed.sum_values([sum(g.errors for g in groups)])[0]),  # left out: sandbox etc. failed
            **episode_metrics(groups),
        })
        return record

    def _evaluate(self) -> dict | None:
        cfg = self.config
        result = None
        with self._gathered():
            if self.rank == 0:  # only this rank evaluates, so only it packs weights
                env, kwargs = cfg.eval_target(max(self.step - 1, 0))
                with self._packed(cfg.eval_batch_size):
                    result = evaluate_held_out(self.model, self.tokenizer, env, kwargs, cfg.eval_prompts, seed=cfg.eval_seed,
                                      max_new_tokens=cfg.eval_max_new_tokens or cfg.max_new_tokens,
                                      batch=cfg.eval_batch_size, max_episode_tokens=cfg.max_episode_tokens)
                result = {"step": self.step, **result}
                self.evals.append(result)
                self.reporter.log_eval(result)
        distributed.barrier()
        return result

    def _progress_bar(self):
        if not self.config.progress or self.rank != 0:
            return None
        return ProgressBar(self.config.steps, self.config.max_minutes, self.step, self.train_seconds)
