"""LoRA training through peft, CI-sized (tiny random model, toy env): the optimizer holds only the
adapters, the KL reference is the base model with its adapters disabled, fp32 CPU sampling runs
through packed merged weights W + BA that sample the same tokens, a LoRA run resumes exactly from an
adapter-only checkpoint, and `rlvr export` writes the merged model."""

from __future__ import annotations

import pytest
import torch
from padded import padded

from rlvr.cli import main as rlvr_main
from rlvr.trainer.config import TrainConfig, load_config
from rlvr.trainer.grpo import GRPOTrainer
from rlvr.trainer.logprobs import group_logprobs
from rlvr.trainer.metrics import TIMING, read_jsonl
from rlvr.trainer.models import load_model
from rlvr.trainer.packed_weights import can_pack
from rlvr.trainer.rollout.envs import make_envs
from rlvr.trainer.rollout.loop import local_rollout

TOY = dict(model="tiny", env="test_trainer_toy_env:Letters-v0", prompts_per_step=4, group_size=8,
           max_new_tokens=8, lr=3e-2, min_lr_ratio=1.0, threads=1, progress=False, lora={"rank": 8, "alpha": 16})


def _untimed(records):
    return [{k: v for k, v in r.items() if k not in TIMING} for r in records]


def _logprobs(model, completions=((5, 6, 7, 8), (9, 10, 11, 12))):
    prompt = torch.tensor([1, 2, 3, 4])
    ids = torch.tensor(completions)
    with torch.no_grad():
        return group_logprobs(model, prompt, ids, torch.ones(ids.shape))[0]


@pytest.fixture(scope="module")
def lora_run(tmp_path_factory):
    """An uninterrupted 4-step LoRA run with KL to the reference, a checkpoint every step."""
    run_dir = tmp_path_factory.mktemp("lora")
    trainer = GRPOTrainer(TrainConfig(**TOY, steps=4, beta=0.05, checkpoint_every=1), run_dir)
    start = {k: v.clone() for k, v in trainer.model.state_dict().items()}
    records = trainer.train()
    return trainer, run_dir, records, start


def test_optimizer_holds_only_the_adapters(lora_run):
    trainer, run_dir, records, start = lora_run
    names = {id(p): n for n, p in trainer.model.named_parameters()}
    optimised = [names[id(p)] for group in trainer.optimizer.param_groups for p in group["params"]]
    assert optimised and all(".lora_A." in n or ".lora_B." in n for n in optimised), optimised[:5]
    adapters = sum(p.numel() for p in trainer.params)
    total = sum(p.numel() for p in trainer.model.parameters())
    assert adapters < 0.1 * total  # the tiny model: 32k adapter weights of ~6.6M
    assert len(trainer.optimizer.state) == len(optimised)  # AdamW moments for the adapters, nothing else
    now = trainer.model.state_dict()
    for name, value in start.items():
        if "lora_" not in name:
            assert torch.equal(now[name], value), name  # the base stays frozen
    assert all(not torch.equal(now[n], start[n]) for n in now if ".lora_B." in n)
    saved = torch.load(run_dir / "checkpoint.pt", weights_only=False)
    assert saved["model"] and all("lora_" in k for k in saved["model"])  # the base model is not in the file
    assert (run_dir / "checkpoint.pt").stat().st_size < 2_000_000


def test_reference_is_the_base_model_with_adapters_disabled(lora_run):
    trainer, _, records, _ = lora_run
    assert trainer.ref_model is trainer.model  # no second copy of the weights
    base, _ = load_model("tiny", seed=0)
    with trainer.model.disable_adapter():
        reference = _logprobs(trainer.model)
    torch.testing.assert_close(reference, _logprobs(base), rtol=0, atol=1e-6)
    assert (_logprobs(trainer.model) - reference).abs().max() > 1e-3  # the adapters do change the policy
    assert records[0]["kl"] == 0.0 and records[-1]["kl"] > 0  # B = 0 at the start: policy = reference
    layer = trainer.model.base_model.model.model.layers[0].self_attn.q_proj
    assert not layer.merged  # the base weights were never merged in place (sampling packs a merged copy: below)


def test_fp32_cpu_sampling_packs_each_lora_layer_as_w_plus_scaled_ba(lora_run):
    """On a CPU in fp32 the trainer samples through one packed copy per LoRA layer of its merged weight
    W + (alpha / rank) B A: each layer computes exactly that, and sampling through it draws from the
    unpacked model's distribution: every drawn token's log-prob is the one the base layers and adapters
    give it, and (same seeds) nearly every completion is the unpacked sampler's, token for token.

    Not every one: the packed product rounds differently in the last bits (oneDNN's kernels depend on
    the CPU), so a uniform number that falls within that rounding of a bucket's edge picks the
    neighbouring token (seen on one host: one token in 256, ids 23387 and 23388)."""
    trainer, _, _, _ = lora_run
    model, tok = trainer.model, trainer.tokenizer
    layers = [m for m in model.modules() if hasattr(m, "lora_B") and hasattr(m, "base_layer")]
    assert layers and not trainer.sample_bf16 and can_pack(model)
    torch.manual_seed(0)
    with torch.no_grad(), trainer._sampling_region(32):  # the trainer's sampling region
        for m in layers:
            assert "forward" in vars(m) and not vars(m.base_layer).get("forward")  # one packed product
            a, b = m.lora_A["default"].weight, m.lora_B["default"].weight
            assert m.scaling["default"] == 2.0  # alpha 16 / rank 8
            x = torch.randn(5, a.shape[1])
            merged = m.base_layer.weight + m.scaling["default"] * (b @ a)
            torch.testing.assert_close(m(x), torch.nn.functional.linear(x, merged, m.base_layer.bias),
                                       rtol=1e-5, atol=1e-5)
            assert (m(x) - m.base_layer(x)).abs().max() > 1e-3  # the trained adapters move every layer
    envs = make_envs(TOY["env"], {}, 4)
    kwargs = dict(seed=7, group_size=8, max_new_tokens=8)
    with trainer._sampling_region(32):
        packed = local_rollout(model, tok, envs, [0, 1, 2, 3], **kwargs)
    assert not any("forward" in vars(m) for m in model.modules())  # unpacked again
    for g in packed:  # the unpacked model's log-prob of each token the packed sampler drew
        ids, mask = padded(g.completion_ids)
        with torch.no_grad():
            logp, _ = group_logprobs(model, torch.tensor(g.prompt_ids), ids, mask)
        for i, sampled in enumerate(g.sample_logps):
            assert logp[i, :len(sampled)].tolist() == pytest.approx(sampled, abs=1e-4)
    dense = local_rollout(model, tok, envs, [0, 1, 2, 3], **kwargs)
    rows = [(p, d) for gp, gd in zip(packed, dense) for p, d in zip(gp.completion_ids, gd.completion_ids)]
    assert len(rows) == 32 and sum(p == d for p, d in rows) >= 30, rows


def test_lora_run_resumes_exactly_from_an_adapter_checkpoint(lora_run, tmp_path):
    trainer, _, reference, _ = lora_run
    run_dir = tmp_path / "resumed"
    # stopped after step 2 (a constant learning rate, so the schedule does not depend on `steps`)
    GRPOTrainer(TrainConfig(**TOY, steps=2, beta=0.05, checkpoint_every=1), run_dir).train()
    resumed = GRPOTrainer(TrainConfig(**TOY, steps=4, beta=0.05, checkpoint_every=1), run_dir, resume=True)
    assert resumed.step == 2
    resumed.train()
    assert _untimed(read_jsonl(run_dir / "metrics.jsonl")) == _untimed(reference)
    end = trainer.model.state_dict()
    for name, value in resumed.model.state_dict().items():
        assert torch.equal(value, end[name]), name


def test_export_writes_the_merged_model(lora_run, tmp_path, capsys):
    from transformers import AutoModelForCausalLM

    trainer, run_dir, _, _ = lora_run
    out = tmp_path / "merged"
    assert rlvr_main(["export", str(run_dir), "--out", str(out)]) == 0
    merged = AutoModelForCausalLM.from_pretrained(out)
    assert not any("lora" in n for n, _ in merged.named_parameters())
    torch.testing.assert_close(_logprobs(merged), _logprobs(trainer.model), rtol=0, atol=1e-4)
    assert rlvr_main(["export", str(tmp_path / "nothing"), "--out", str(out)]) == 2
    assert "no checkpoint" in capsys.readouterr().err


def test_lora_config_section(tmp_path):
    config = load_config(None, ["lora={rank: 4}"])
    assert config.lora == {"rank": 4, "alpha": 32, "dropout": 0.0, "target_modules": "all-linear"}
    assert load_config(None, ["lora.rank=2"]).lora["rank"] == 2
    assert load_config(None, []).lora is None
    with pytest.raises(ValueError, match="unknown lora key"):
        load_config(None, ["lora={r: 4}"])
    with pytest.raises(ValueError, match="lora.rank"):
        load_config(None, ["lora={rank: 0}"])

