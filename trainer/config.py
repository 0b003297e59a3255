"""Run configuration: a dataclass read from YAML, with `--set key=value` overrides.

Unknown keys are errors (a typo must not silently fall back to a default). A `base:` key names a
config whose keys this one's replace. Override values are parsed as YAML, so `--set lr=1e-6`,
`--set env_kwargs.digits=2` and `--set curriculum=[]` all do what they look like.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from rlvr.trainer.loss import AGGREGATIONS, SCALES
from rlvr.trainer.reporting import check_backends
from rlvr.trainer.rollout import registry as generators


@dataclass
class TrainConfig:
    # what to train, on what
    model: str = "smollm2"  # "smollm2", "tiny", a transformers folder or hub id
    env: str = "rlvr/Arithmetic-v0"  # a gymnasium id ("module:Id-v0" imports the module first)
    env_kwargs: dict = field(default_factory=dict)
    # stages [{"until_step": 20, "env_kwargs": {...}}, ...]: kwargs merged over env_kwargs while step < until_step;
    # a stage without until_step lasts to the end
    curriculum: list = field(default_factory=list)
    seed: int = 0
    steps: int = 100
    # rollouts
    prompts_per_step: int = 4
    group_size: int = 8
    max_new_tokens: int = 64
    temperature: float = 1.0
    top_p: float = 1.0
    mask_truncated: bool = False  # truncated completions take no part in the loss
    # what samples the turns (a name in trainer/rollout/registry.py): "local" (the KV-cache sampler on the trainer's model) or
    # "vllm" (an engine in this process, weights synced after every step; the loss corrects its numerics
    # with tis_cap and logs sampler_kl every step)
    generator: str = "local"
    vllm_kv_cache_gib: float = 1.0  # the engine's KV cache (CPU RAM or GPU memory)
    vllm_max_model_len: int = 2048  # the longest prompt + episode the engine holds
    vllm_gpu_memory_utilization: float = 0.3  # CUDA: the share of GPU memory the engine may take
    vllm_sleep: bool = False  # CUDA: free the engine's memory during the optimizer step (vLLM's sleep mode)
    vllm_enforce_eager: bool = True  # False: torch.compile and CUDA graphs (slower start, faster decoding on GPU)
    vllm_dtype: str = "auto"  # the engine's weights: "auto" (bf16 on a GPU that has it, else fp32), "float32", "bfloat16"
    # multi-turn envs (trainer/episodes.py): max_new_tokens is per assistant turn
    max_episode_tokens: int = 512  # tokens after the prompt (sampled + env) before an episode is cut
    episode_return: str = "final"  # an episode's reward: "final" (its last reward) or "sum" (of its turn rewards)
    # objective (see loss.py)
    # "grpo", "rft" (Online RFT: advantage 1 if correct, else 0) or "process" (per-step rewards, trainer/process_rewards.py)
    advantage: str = "grpo"
    scale_rewards: str = "group"
    std: str = "sample"
    aggregation: str = "token-mean"
    ratio_level: str = "token"  # "token" or "sequence" (GSPO)
    epsilon_low: float = 0.2
    epsilon_high: float = 0.28
    beta: float = 0.0  # k3 KL weight; 0 = no reference model
    skip_zero_variance: bool = True  # groups whose advantages are all 0 get no forward/backward
    # the loss's denominators count every sampled group (TRL's and verl's scale: skipping is then only a
    # saving), not just the trained ones (each step's gradient then has one scale, however few groups trained)
    count_skipped: bool = False
    refill_rounds: int = 0  # rounds of fresh prompts drawn to replace skipped groups
    replay_fraction: float = 0.0  # share of a step's prompts asked again from recent groups with signal (replay.py)
    replay_capacity: int = 32  # recent prompts with signal kept for replay
    # optimisation
    mu: int = 1  # optimisation passes per batch
    lr: float = 1e-6
    weight_decay: float = 0.0
    adam_betas: list = field(default_factory=lambda: [0.9, 0.99])
    warmup_steps: int = 0
    min_lr_ratio: float = 0.1  # the cosine decays to lr * min_lr_ratio at `steps`, or at max_minutes if sooner
    decay_start: float = 0.0  # share of the run (steps or max_minutes) at full lr before the cosine begins
    max_grad_norm: float = 1.0
    # machinery
    chunk_tokens: int = 256  # rows of the output projection computed at once
    pack_tokens: int = 1024  # a group's completions share one copy of the prompt in rows of up to this many tokens
    autocast: str = "auto"  # "auto" (bf16 where supported, on GPU), "bf16" or "off"; sampling and training
    sample_dtype: str = "auto"  # "auto" (sample as training computes) or "bf16" (sample in bf16 even if training is fp32)
    tis_cap: float = 2.0  # truncated importance weight for tokens sampled in another precision than training's
    correction: str = "tis"  # tokens of another behaviour policy: "tis" truncates their weight at tis_cap, "mis" masks
    # asynchronous GRPO (trainer/async_grpo.py): {workers: N, max_staleness: k, ...}; null = synchronous
    async_: dict | None = None
    threads: int = 0  # torch threads (0 = torch's default)
    checkpoint_every: int = 0
    # LoRA through peft: {rank: 16, alpha: 32, dropout: 0.0, target_modules: all-linear}; null = full fine-tuning
    lora: dict | None = None
    # "replicate" (every process holds the whole model; gradients all-reduced) or "fsdp" (FSDP2 shards weights,
    # gradients and optimizer states across processes; see trainer/fsdp.py)
    parallel: str = "replicate"
    # stop after this much wall time, evaluations not counted, a resumed run counting its earlier time
    # (0 = no limit); the final eval still runs
    max_minutes: float = 0.0
    eval_prompts: int = 0  # held-out prompts evaluated greedily before, during and after training
    eval_every: int = 0
    eval_seed: int = 1_000_000  # held-out env seeds start here; training seeds start at `seed`
    eval_env_kwargs: dict = field(default_factory=dict)  # merged over env_kwargs for evaluation
    eval_env: str = ""  # another env to evaluate on ("" = env), made with eval_env_kwargs alone
    eval_max_new_tokens: int = 0  # 0 = max_new_tokens
    eval_batch_size: int = 32
    progress: bool = True
    report_to: list = field(default_factory=list)  # live metrics: "tensorboard", "wandb" (offline unless WANDB_MODE)

    def __post_init__(self):
        checks = [
            (self.advantage in ("grpo", "rft", "process"), "advantage must be 'grpo', 'rft' or 'process'"),
            (self.scale_rewards in SCALES, f"scale_rewards must be one of {SCALES}"),
            (self.std in ("sample", "population"), "std must be 'sample' or 'population'"),
            (self.aggregation in AGGREGATIONS, f"aggregation must be one of {AGGREGATIONS}"),
            (self.ratio_level in ("token", "sequence"), "ratio_level must be 'token' or 'sequence'"),
            (self.autocast in ("auto", "bf16", "off"), "autocast must be 'auto', 'bf16' or 'off'"),
            (self.sample_dtype in ("auto", "bf16"), "sample_dtype must be 'auto' or 'bf16'"),
            (self.tis_cap >= 1, "tis_cap must be at least 1"),
            (self.correction in ("tis", "mis"), "correction must be 'tis' or 'mis'"),
            (0 <= self.decay_start < 1, "decay_start must be in [0, 1)"),
            (0 <= self.replay_fraction <= 1 and self.replay_capacity >= 0,
             "replay_fraction must be in [0, 1] and replay_capacity at least 0"),
            (self.group_size >= 2, "group_size must be at least 2"),
            (self.prompts_per_step >= 1 and self.steps >= 0 and self.mu >= 1, "prompts_per_step, mu >= 1"),
            (self.max_new_tokens >= 1, "max_new_tokens must be at least 1"),
            (self.max_episode_tokens >= 1, "max_episode_tokens must be at least 1"),
            (self.episode_return in ("final", "sum"), "episode_return must be 'final' or 'sum'"),
            (self.temperature > 0 and 0 < self.top_p <= 1, "temperature > 0 and 0 < top_p <= 1"),
            (isinstance(self.curriculum, list), "curriculum must be a list of stages"),
        ]
        checks.append((self.parallel in ("replicate", "fsdp"), "parallel must be 'replicate' or 'fsdp'"))
        checks.append((self.generator in generators.names(),
                       f"generator must be one of {', '.join(map(repr, generators.names()))}"))
        checks.append((self.generator == "local" or self.parallel == "replicate",
                       "generator: vllm runs with parallel: replicate (one engine per process)"))
        checks.append((self.generator == "vllm" or not self.vllm_sleep, "vllm_sleep needs generator: vllm"))
        checks.append((self.vllm_dtype in ("auto", "float32", "bfloat16"),
                       "vllm_dtype must be 'auto', 'float32' or 'bfloat16'"))
        checks.append((self.vllm_kv_cache_gib > 0 and self.vllm_max_model_len >= 1,
                       "vllm_kv_cache_gib must be positive and vllm_max_model_len at least 1"))
        for ok, message in checks:
            if not ok:
                raise ValueError(f"config: {message}")
        from rlvr.trainer.lora import check_options

        self.lora = check_options(self.lora)
        from rlvr.trainer.async_workers import check_async

        self.async_ = check_async(self.async_, self)
        if self.lora and self.parallel == "fsdp":
            raise ValueError("config: lora with parallel: fsdp is not supported (LoRA adapters are small: replicate)")
        check_backends(self.report_to)
        for stage in self.curriculum:
            if not isinstance(stage, dict) or set(stage) - {"until_step", "env_kwargs"}:
                raise ValueError("config: a curriculum stage is {until_step: int, env_kwargs: {...}}")

    def eval_target(self, step: int) -> tuple[str, dict]:
        """The env held-out evaluation plays after `step` steps, and its kwargs: `env` with the kwargs of
        that step's curriculum stage and `eval_env_kwargs` over them, or `eval_env` with `eval_env_kwargs`."""
        if self.eval_env:
            return self.eval_env, dict(self.eval_env_kwargs)
        return self.env, {**self.env_kwargs_at(step), **self.eval_env_kwargs}

    def env_kwargs_at(self, step: int) -> dict:
        """Env kwargs of the curriculum stage that covers `step`."""
        for stage in self.curriculum:
            until = stage.get("until_step")
            if until is None or step < until:
                return {**self.env_kwargs, **stage.get("env_kwargs", {})}
        return dict(self.env_kwargs)

    def generator_options(self) -> dict:
        """The engine options given to the generator's `create` (rollout/registry.py); the local sampler
        takes none of them."""
        return dict(seed=self.seed, max_model_len=self.vllm_max_model_len, kv_cache_gib=self.vllm_kv_cache_gib,
                    sleep=self.vllm_sleep, gpu_memory_utilization=self.vllm_gpu_memory_utilization,
                    enforce_eager=self.vllm_enforce_eager, dtype=self.vllm_dtype)

    def to_dict(self) -> dict:
        data = dataclasses.asdict(self)
        data["async"] = data.pop("async_")  # `async` is a Python keyword, not a field name
        return data


def _set_dotted(data: dict, key: str, value: Any) -> None:
    head, _, rest = key.partition(".")
    if not rest:
        data[head] = value
        return
    inner = data.setdefault(head, {})
    if not isinstance(inner, dict):
        raise ValueError(f"config: {head} is not a mapping, cannot set {key}")
    _set_dotted(inner, rest, value)


def _read_yaml(path: Path, seen: tuple = ()) -> dict:
    """A config file's mapping; a `base: other.yaml` key (relative to the file) reads that file first and
    puts this file's top-level keys over its keys, so a variant config names only what it changes."""
    if path.resolve() in seen:
        raise ValueError(f"config: {path} is its own base")
    if not path.is_file():
        raise ValueError(f"config: no such config file: {path}")
    with open(path, encoding="utf-8") as fh:
        data = yaml.safe_load(fh) or {}
    if not isinstance(data, dict):
        raise ValueError(f"config: {path} does not hold a mapping")
    base = data.pop("base", None)
    if base is None:
        return data
    return {**_read_yaml(path.parent / str(base), (*seen, path.resolve())), **data}


def load_config(path: str | Path | None = None, overrides: list[str] = ()) -> TrainConfig:
    """A TrainConfig from a YAML file (or the defaults) with `key=value` overrides applied in order."""
    data = _read_yaml(Path(path)) if path is not None else {}
    for item in overrides:
        key, sep, raw = item.partition("=")
        if not sep or not key:
            raise ValueError(f"config: --set expects key=value, got {item!r}")
        _set_dotted(data, key.strip(), yaml.safe_load(raw))
    return from_dict(data)


def from_dict(data: dict) -> TrainConfig:
    known = {f.name for f in dataclasses.fields(TrainConfig)} | {"async"}
    unknown = sorted(set(data) - known)
    if unknown:
        raise ValueError(f"config: unknown key(s) {', '.join(unknown)}")
    data = dict(data)
    if "async" in data:
        data["async_"] = data.pop("async")
    for f in dataclasses.fields(TrainConfig):
        if f.name in data and f.type in ("float", "int"):  # YAML reads 1e-6 as a string
            value = data[f.name]
            if isinstance(value, bool) or not isinstance(value, (int, float, str)):
                raise ValueError(f"config: {f.name} must be a number, not {value!r}")
            try:
                data[f.name] = float(value) if f.type == "float" else int(value)
            except ValueError:
                raise ValueError(f"config: {f.name} must be a number, not {value!r}") from None
    try:
        return TrainConfig(**data)
    except TypeError as exc:
        raise ValueError(f"config: {exc}") from None
