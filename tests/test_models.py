"""The embedded SmolLM2 is converted from its GGUF once and kept as a transformers folder: what loads from that
folder must be exactly what the GGUF converts to, and the conversion must run once however many processes ask."""

from __future__ import annotations

import os

import pytest
import torch

from rlvr.trainer import models

TEXTS = ["Hello, world!", "def add(a, b):\n    return a + b\n", "  leading spaces\tand\ttabs",
         "ünïcödé — 数学 🙂", "<|im_start|>user\nhi<|im_end|>", "12345 + 678 = 13023", ""]
CHAT = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "What is 2+2?"},
        {"role": "assistant", "content": "4"}]


def test_the_kept_folder_loads_what_the_gguf_converts_to():
    """Same weights bit for bit, the head still tied, same config, generation config and tokenization."""
    gguf_model, gguf_tok = models.convert_smollm2_gguf()
    model, tok = models.load_model("smollm2")
    mine, theirs = model.state_dict(), gguf_model.state_dict()
    assert mine.keys() == theirs.keys()
    assert all(torch.equal(mine[k], theirs[k]) for k in mine)
    assert all(v.dtype == torch.float32 for v in mine.values())
    assert model.lm_head.weight.data_ptr() == model.get_input_embeddings().weight.data_ptr()
    assert not hasattr(model.config, "quantization_config")
    skip = {"transformers_version", "_name_or_path", "architectures"}  # set by any save_pretrained
    assert ({k: v for k, v in model.config.to_dict().items() if k not in skip}
            == {k: v for k, v in gguf_model.config.to_dict().items() if k not in skip})
    assert model.generation_config.to_dict() == {**gguf_model.generation_config.to_dict(),
                                                 "pad_token_id": tok.pad_token_id}
    ids = torch.tensor([tok("The capital of France is")["input_ids"]])
    with torch.no_grad():
        assert torch.equal(model(ids).logits, gguf_model(ids).logits)
    assert len(tok) == len(gguf_tok) and tok.all_special_tokens == gguf_tok.all_special_tokens
    assert (tok.bos_token_id, tok.eos_token_id) == (gguf_tok.bos_token_id, gguf_tok.eos_token_id)
    assert [tok(t)["input_ids"] for t in TEXTS] == [gguf_tok(t)["input_ids"] for t in TEXTS]
    for prompt in (False, True):
        assert (tok.apply_chat_template(CHAT, tokenize=False, add_generation_prompt=prompt)
                == gguf_tok.apply_chat_template(CHAT, tokenize=False, add_generation_prompt=prompt))


@pytest.fixture
def tiny_conversion(monkeypatch, tmp_path):
    """The cache pointed at an empty folder, and a conversion that counts its calls and yields the tiny model
    (what is converted does not matter here, only how often and where it lands)."""
    tiny = models.load_model("tiny")
    monkeypatch.setenv("RLVR_MODEL_CACHE", str(tmp_path))
    calls = []

    def convert():
        calls.append(1)
        if hasattr(convert, "during"):
            convert.during()
        return tiny

    monkeypatch.setattr(models, "convert_smollm2_gguf", convert)
    return convert, calls


def test_the_conversion_runs_once(tiny_conversion, tmp_path):
    _, calls = tiny_conversion
    folder = models.smollm2_folder()
    assert os.path.dirname(folder) == str(tmp_path) and os.path.exists(os.path.join(folder, "model.safetensors"))
    assert models.smollm2_folder() == folder and len(calls) == 1
    assert os.listdir(tmp_path) == [os.path.basename(folder)]  # no half-written folder left behind
    assert models.load_model("smollm2")[0].config.hidden_size == 128  # loaded from the kept folder


def test_a_process_that_loses_the_race_keeps_the_winners_folder(tiny_conversion, tmp_path):
    convert, calls = tiny_conversion
    target = models.smollm2_folder()
    os.rename(target, tmp_path / "winner")
    (tmp_path / "winner" / "won").write_text("")

    def another_process_finishes_first():
        os.rename(tmp_path / "winner", target)

    convert.during = another_process_finishes_first
    assert models.smollm2_folder() == target and len(calls) == 2
    assert os.path.exists(os.path.join(target, "won"))
    assert os.listdir(tmp_path) == [os.path.basename(target)]


def test_a_new_gguf_or_transformers_converts_again(tiny_conversion, monkeypatch, tmp_path):
    import transformers

    _, calls = tiny_conversion
    gguf = tmp_path / "package" / models.SMOLLM2_GGUF  # the conversion is the tiny one: any bytes will do
    gguf.parent.mkdir()
    gguf.write_bytes(b"v1")
    monkeypatch.setattr(models, "smollm2_files", lambda: (str(gguf.parent), gguf.name))
    seen = [models.smollm2_folder()]
    assert models.smollm2_folder() == seen[0] and len(calls) == 1
    os.utime(gguf, ns=(0, gguf.stat().st_mtime_ns + 10**9))  # the package reinstalled
    seen.append(models.smollm2_folder())
    gguf.write_bytes(b"version 2")
    seen.append(models.smollm2_folder())
    monkeypatch.setattr(transformers, "__version__", transformers.__version__ + ".post1")
    seen.append(models.smollm2_folder())
    assert len(set(seen)) == 4 and len(calls) == 4
