"""`report_to`: a tiny run mirrors its metrics, evaluations and sample completions to TensorBoard
(read back from the event files) and to wandb in offline mode (read back from the run files it
writes). Nothing is sent anywhere: wandb's mode is offline unless WANDB_MODE says otherwise."""

from __future__ import annotations

import needs
import pytest

from rlvr.trainer.config import TrainConfig
from rlvr.trainer.grpo import GRPOTrainer
from rlvr.trainer.metrics import read_jsonl

TOY = dict(model="tiny", env="test_trainer_toy_env:Letters-v0", prompts_per_step=2, group_size=4,
           max_new_tokens=6, lr=3e-2, threads=1, progress=False, steps=3, eval_prompts=4)


def test_unknown_backend_is_a_config_error():
    with pytest.raises(ValueError, match="report_to"):
        TrainConfig(**TOY, report_to=["mlflow"])


def test_tensorboard_events_hold_the_jsonl_metrics(tmp_path):
    event_accumulator = needs.module("tensorboard.backend.event_processing.event_accumulator")
    GRPOTrainer(TrainConfig(**TOY, report_to=["tensorboard"]), tmp_path).train()
    metrics, evals = read_jsonl(tmp_path / "metrics.jsonl"), read_jsonl(tmp_path / "eval.jsonl")
    events = event_accumulator.EventAccumulator(str(tmp_path / "tensorboard"),
                                                size_guidance={event_accumulator.TENSORS: 0})
    events.Reload()
    rewards = [(e.step, e.value) for e in events.Scalars("train/reward_mean")]
    assert rewards == [(r["step"], pytest.approx(r["reward_mean"])) for r in metrics]
    assert [e.step for e in events.Scalars("eval/accuracy")] == [e["step"] for e in evals] == [0, 3]
    texts = events.Tensors("samples/text_summary")
    assert [t.step for t in texts] == [1, 2, 3]
    last = read_jsonl(tmp_path / "samples.jsonl")[-1]["text"]
    assert last.replace("|", "\\|").replace("\n", " ") in texts[-1].tensor_proto.string_val[0].decode()


def test_wandb_offline_run_files_hold_the_metrics(tmp_path, monkeypatch):
    wandb = needs.module("wandb")
    monkeypatch.delenv("WANDB_MODE", raising=False)
    monkeypatch.setenv("WANDB_SILENT", "true")
    GRPOTrainer(TrainConfig(**TOY, report_to=["wandb"]), tmp_path).train()
    metrics, samples = read_jsonl(tmp_path / "metrics.jsonl"), read_jsonl(tmp_path / "samples.jsonl")
    runs = list((tmp_path / "wandb").glob("offline-run-*"))
    assert len(runs) == 1  # offline by default: the run exists only on disk
    records = _history(wandb, next(runs[0].glob("*.wandb")))
    by_step = {r["_step"]: r for r in records if "train/reward_mean" in r}
    assert sorted(by_step) == [r["step"] for r in metrics]
    for r in metrics:
        assert by_step[r["step"]]["train/reward_mean"] == pytest.approx(r["reward_mean"])
        texts = [s["text"] for s in samples if s["step"] == r["step"]]
        assert len(texts) == TOY["prompts_per_step"]
        for text in texts:  # the completions' text, in that step's row
            assert text.replace("|", "\\|").replace("\n", " ") in by_step[r["step"]]["samples"]
    assert any("eval/accuracy" in r for r in records)


def _history(wandb, path) -> list[dict]:
    """The history rows of an offline .wandb file: a 7-byte file header, then LevelDB-style log
    records (4-byte crc, 2-byte length, 1-byte kind) in 32 KiB blocks, each payload a wandb protobuf
    `Record` (parsed with wandb's own message class)."""
    import json

    from wandb.proto import wandb_internal_pb2

    data = path.read_bytes()
    assert data[:4] == b":W&B"
    rows, pos, block, payload = [], 7, 32768, b""
    while pos + 7 <= len(data):
        if block - pos % block < 7:  # a block's tail too short for a header is padding
            pos += block - pos % block
            continue
        length, kind = int.from_bytes(data[pos + 4:pos + 6], "little"), data[pos + 6]
        payload += data[pos + 7:pos + 7 + length]
        pos += 7 + length
        if kind in (1, 4):  # a full record, or the last piece of one
            record = wandb_internal_pb2.Record()
            record.ParseFromString(payload)
            payload = b""
            if record.WhichOneof("record_type") == "history":
                rows.append({item.key or "/".join(item.nested_key): json.loads(item.value_json)
                             for item in record.history.item})
    return rows
