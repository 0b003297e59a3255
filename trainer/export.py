"""`rlvr export RUN_DIR --out FOLDER`: a run's trained model as a plain transformers folder.

The base model is rebuilt from the run's config and the checkpoint's weights loaded into it;
LoRA adapters are merged into the base weights (`merge_and_unload`), so the folder loads with
`AutoModelForCausalLM.from_pretrained` and needs no peft.
"""

from __future__ import annotations

from pathlib import Path


def export(run_dir: str | Path, out_dir: str | Path) -> Path:
    from rlvr.trainer import checkpoint, lora
    from rlvr.trainer.config import from_dict
    from rlvr.trainer.models import load_model

    state = checkpoint.read(run_dir)
    config = from_dict(state["config"])
    model, tokenizer = load_model(config.model, seed=config.seed)
    if config.lora:
        model = lora.wrap(model, config.lora)
        lora.load_adapter_state(model, state["model"])
        model = model.merge_and_unload()
    else:
        model.load_state_dict(state["model"])
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out)
    tokenizer.save_pretrained(out)
    return out


def add_arguments(parser) -> None:
    parser.add_argument("run_dir", help="a training run folder that holds a checkpoint")
    parser.add_argument("--out", required=True, help="folder to write the transformers model to")


def run(args) -> int:
    from rlvr.cli import UsageError
    from rlvr.trainer import checkpoint

    if not (Path(args.run_dir) / checkpoint.NAME).exists():
        raise UsageError(f"rlvr export: no checkpoint in {args.run_dir}")
    print(f"model written to {export(args.run_dir, args.out)}")
    return 0
