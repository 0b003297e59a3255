"""One step's sampling: its prompts, their episodes, refill rounds and the advantages of what trains.

The synchronous trainer (trainer/grpo.py) and every async generation worker (trainer/async_workers.py)
call `StepSampler.collect`, so a step is sampled by one piece of code wherever it runs. A worker builds
a sampler around its own model and generator: no optimizer, no reference model, no logs.

A step's prompts are the replays the buffer gives back first (`replay_fraction`), then fresh ones from
the prompt stream's position; each is played `group_size` times through the episode loop
(trainer/rollout/loop.py) and scored through the env API. Groups whose rewards are all alike carry no
signal; with `refill_rounds` > 0 fresh prompts replace them (DAPO's dynamic sampling). Under several
processes each rank samples its shard of every round; the ranks stop refilling together.
"""

from __future__ import annotations

import contextlib
import math
from dataclasses import dataclass

import torch

from rlvr.trainer import devices, distributed
from rlvr.trainer.loss import group_advantages
from rlvr.trainer.packed_weights import packed_linears, packs_bf16
from rlvr.trainer.process_rewards import group_token_advantages, step_rewards
from rlvr.trainer.replay import ReplayBuffer
from rlvr.trainer.rollout import registry as generators
from rlvr.trainer.rollout.envs import is_multiturn, make_envs
from rlvr.trainer.rollout.groups import Group, drop_errors
from rlvr.trainer.rollout.loop import local_rollout

EPS = 1e-4


@dataclass
class SampledStep:
    """A step's groups (this rank's), the ones that train with their advantages, and where the prompt
    stream stands after it."""

    groups: list[Group]
    kept: list[tuple[Group, torch.Tensor]]
    data_position: int
    replayed: int  # prompts of the step asked again (replay_fraction)
    env_kwargs: dict


def precision(config, device: torch.device) -> tuple[bool, bool]:
    """(train in bf16, sample in bf16): bf16 autocast when asked, or on a CUDA device that has it
    (`autocast: auto`); sampling in bf16 too when training does, or when `sample_dtype: bf16` and the
    device computes bf16 natively (`devices.sampling_bf16`)."""
    cuda_bf16 = device.type == "cuda" and torch.cuda.is_bf16_supported()
    use_bf16 = config.autocast == devices.BF16_KEY or (config.autocast == "auto" and cuda_bf16)
    native = cuda_bf16 if device.type == "cuda" else device.type == "cpu" and packs_bf16()
    return use_bf16, devices.sampling_bf16(use_bf16, config.sample_dtype, native)


@contextlib.contextmanager
def sampling_region(model, rows: int, *, pack: bool, bf16: bool, device_type: str):
    """A step's sampling, through weights packed for oneDNN (`pack`, CPU only) in fp32, or in bf16 for an
    fp32 model that samples in bf16 (corrected by the loss) where oneDNN computes in bf16; bf16 sampling
    that is not packed runs under autocast."""
    with packed_linears(model, enabled=pack, rows=rows, dtype=torch.bfloat16 if bf16 else torch.float32) as packed:
        with torch.autocast(device_type, dtype=torch.bfloat16) if bf16 and not packed else contextlib.nullcontext():
            yield


class StepSampler:
    """Samples and scores steps of `config` with `generator` on `model`.

    `region(rows)`: the context sampling `rows` episodes runs in with the local generator (packed
    weights, autocast); `gathered()`: whole weights on every rank for the sampling rounds (FSDP).
    `replay`: the run's replay buffer (its state is checkpointed by the trainer)."""

    def __init__(self, config, model, tokenizer, generator, *, rank: int = 0, world: int = 1,
                 replay: ReplayBuffer | None = None, region=None, gathered=None):
        self.config, self.model, self.tokenizer, self.generator = config, model, tokenizer, generator
        self.rank, self.world = rank, world
        self.replay = replay if replay is not None else ReplayBuffer(config.replay_capacity, config.seed)
        self.region = region or (lambda rows: contextlib.nullcontext())
        self.gathered = gathered or contextlib.nullcontext
        self.envs, self.env_kwargs = [], None

    def collect(self, step: int, data_position: int, part: slice | None = None) -> SampledStep:
        """Step `step`'s groups of this rank, from prompt `data_position` of the stream on. `part`: only these
        of the step's prompts (an async run splits a step between its workers and the trainer; no refill
        rounds then)."""
        cfg = self.config
        shard = cfg.prompts_per_step // self.world
        self._set_envs(step, shard)
        if is_multiturn(self.envs[0]):  # G copies of the env per prompt, one per episode
            self._set_envs(step, shard * cfg.group_size)
        # this step's prompts for every rank (replays first, then fresh ones), as (index, draw number)
        if step and cfg.env_kwargs_at(step) != cfg.env_kwargs_at(step - 1):
            self.replay.load([])  # a new curriculum stage: the old stage's prompts are not asked again
        replays = self.replay.take(step, round(cfg.replay_fraction * cfg.prompts_per_step))
        fresh = cfg.prompts_per_step - len(replays)
        prompts = replays + [(data_position + i, 0) for i in range(fresh)]
        groups, candidates, need = [], [], 0
        for round_ in range(1 + cfg.refill_rounds):
            need = shard - len(candidates)
            # the ranks stop together: under FSDP a round all-gathers the weights, so a rank that stopped
            # alone would leave the others waiting in that collective forever
            if round_ and distributed.max_value(need) == 0:
                break
            if round_ == 0:
                mine = prompts[self.rank * shard:(self.rank + 1) * shard][part or slice(None)]
                need = len(mine)
            else:  # refills are fresh prompts
                base = data_position + fresh + (round_ - 1) * cfg.prompts_per_step + self.rank * shard
                mine = [(base + i, 0) for i in range(need)]
            new = self._play([i for i, _ in mine], [d for _, d in mine])
            new = [drop_errors(g) for g in new]  # infrastructure failures are no training signal
            groups += new
            candidates += [g for g in new if self.has_signal(g)]
        if cfg.replay_fraction:  # every rank adds the same prompts: those of the whole step that carried signal
            draw = dict(replays)
            self.replay.add(distributed.gather_lists([(g.index, draw.get(g.index, 0) + 1) for g in groups
                                                      if len(g.rewards) > 1 and not self.no_signal(g)]))
        kept = list(zip(candidates, self.advantages(candidates, groups)))
        return SampledStep(groups, kept, data_position + fresh + cfg.prompts_per_step * cfg.refill_rounds,
                           len(replays), self.env_kwargs)

    def _play(self, indices: list[int], draws: list[int]) -> list[Group]:
        cfg = self.config
        with self.gathered():  # every rank enters, one with its groups complete too
            if not indices:
                return []
            # the local sampler runs in one region: each weight is cast or packed once for the whole loop
            region = self.region(len(indices) * cfg.group_size) if generators.is_exact(cfg.generator) \
                else contextlib.nullcontext()
            with region:
                return local_rollout(self.model, self.tokenizer, self.envs, indices, seed=cfg.seed,
                                     group_size=cfg.group_size, max_new_tokens=cfg.max_new_tokens,
                                     temperature=cfg.temperature, top_p=cfg.top_p, draws=draws,
                                     budget=cfg.max_episode_tokens, episode_return=cfg.episode_return,
                                     generator=self.generator)

    def _set_envs(self, step: int, count: int) -> None:
        kwargs = self.config.env_kwargs_at(step)
        if kwargs != self.env_kwargs or len(self.envs) < count:
            self.close()
            self.envs, self.env_kwargs = make_envs(self.config.env, kwargs, count), kwargs

    def close(self) -> None:
        for env in self.envs:
            env.close()
        self.envs = []

    def has_signal(self, group: Group) -> bool:
        """Whether the group trains: more than one completion, and not all rewarded alike (when skipped)."""
        return len(group.rewards) > 1 and not (self.config.skip_zero_variance and self.no_signal(group))

    def no_signal(self, group: Group) -> bool:
        if self.config.advantage == "rft":
            return not any(group.correct)
        if self.config.advantage == "process":
            flat = [r for rewards in step_rewards(group.infos) for r in rewards]
            return not flat or max(flat) == min(flat)
        return max(group.rewards) == min(group.rewards)

    def advantages(self, kept: list[Group], everything: list[Group]) -> list[torch.Tensor]:
        """The advantages of the `kept` groups; `everything`: the step's groups (for `scale_rewards: batch`)."""
        cfg = self.config
        if cfg.advantage == "rft":
            return [torch.tensor([float(c) for c in g.correct]) for g in kept]
        if cfg.advantage == "process":
            return [group_token_advantages(self.tokenizer, g.completion_ids, g.infos, cfg.std, EPS) for g in kept]
        batch_std = None
        if cfg.scale_rewards == "batch":  # the std of every reward of the batch; every rank takes part
            flat = [r for g in everything for r in g.rewards]
            n, s, sq = distributed.sum_values([len(flat), sum(flat), sum(r * r for r in flat)])
            batch_std = math.sqrt(max(0.0, sq - s * s / n) / (n - 1 if cfg.std == "sample" else n))
        if not kept:
            return []
        if len({len(g.rewards) for g in kept}) > 1:  # groups that lost `error` completions: one at a time
            out = []
            for g in kept:
                r = torch.tensor(g.rewards, dtype=torch.float32)
                a = group_advantages(r[None], cfg.scale_rewards, cfg.std, EPS)[0] if batch_std is None else (
                    (r - r.mean()) / (batch_std + EPS))
                out.append(torch.zeros_like(r) if max(g.rewards) == min(g.rewards) else a)
            return out
        rewards = torch.tensor([g.rewards for g in kept], dtype=torch.float32)
        if batch_std is None:
            adv = group_advantages(rewards, cfg.scale_rewards, cfg.std, EPS)
        else:
            adv = (rewards - rewards.mean(1, keepdim=True)) / (batch_std + EPS)
        for i, g in enumerate(kept):  # equal rewards give exactly zero, whatever the rounding of the mean
            if max(g.rewards) == min(g.rewards):
                adv[i] = 0.0
        return list(adv)
