"""LoRA training through `peft`: the base weights stay frozen, only low-rank adapters learn.

`lora: {rank: 16, alpha: 32}` in a run config wraps the model with `peft.get_peft_model`, so
- the optimizer is built from the parameters that require grad, which are the adapters only;
- the KL reference is the same model inside `disable_adapter()` (the frozen base): no second copy;
- sampling calls the wrapped model, whose LoRA layers add `B A x` on the fly, except fp32 sampling
  on a CPU, whose packed copy of each layer's weight (trainer/packed_weights.py) is the merged
  W + B A: one product per layer instead of three;
- checkpoints hold the adapter weights (`get_peft_model_state_dict`), not the base model, which is
  rebuilt from the config on resume;
- `rlvr export` (trainer/export.py) merges the adapters into the base weights.
"""

from __future__ import annotations

DEFAULTS = {"rank": 16, "alpha": 32, "dropout": 0.0, "target_modules": "all-linear"}


def base_model(model):
    """The transformers model inside a peft wrapper, or `model` itself when it has none."""
    return model.get_base_model() if hasattr(model, "get_base_model") else model


def check_options(options: dict | None) -> dict | None:
    """The `lora:` config section with defaults filled in, or None when LoRA is off."""
    if options is None or options is False:
        return None
    if options is True:
        options = {}
    if not isinstance(options, dict):
        raise ValueError("config: lora is a mapping {rank, alpha, dropout, target_modules} or null")
    unknown = sorted(set(options) - set(DEFAULTS))
    if unknown:
        raise ValueError(f"config: unknown lora key(s) {', '.join(unknown)}")
    merged = {**DEFAULTS, **options}
    if not (isinstance(merged["rank"], int) and merged["rank"] >= 1):
        raise ValueError("config: lora.rank must be a positive integer")
    if not (isinstance(merged["alpha"], (int, float)) and merged["alpha"] > 0):
        raise ValueError("config: lora.alpha must be a positive number")
    if not (isinstance(merged["dropout"], (int, float)) and 0 <= merged["dropout"] < 1):
        raise ValueError("config: lora.dropout must be in [0, 1)")
    targets = merged["target_modules"]
    if not (targets == "all-linear" or (isinstance(targets, list) and targets and all(isinstance(t, str) for t in targets))):
        raise ValueError("config: lora.target_modules is 'all-linear' or a list of module names")
    return merged


def wrap(model, options: dict):
    """The model with fresh LoRA adapters (peft's initialisation: B = 0, so it starts as the base model)."""
    from peft import LoraConfig, get_peft_model

    config = LoraConfig(r=options["rank"], lora_alpha=options["alpha"], lora_dropout=options["dropout"],
                        target_modules=options["target_modules"], bias="none")
    return get_peft_model(model, config)


def adapter_state(model) -> dict:
    """The adapter weights only (what a checkpoint needs: the base is rebuilt from the config)."""
    from peft import get_peft_model_state_dict

    return get_peft_model_state_dict(model)


def load_adapter_state(model, state: dict) -> None:
    from peft import set_peft_model_state_dict

    result = set_peft_model_state_dict(model, state)
    unexpected = list(getattr(result, "unexpected_keys", []))
    if unexpected:
        raise RuntimeError(f"checkpoint adapters do not fit this model: {unexpected[:5]}")
