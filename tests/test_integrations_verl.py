"""verl adapter, against the interface verl 0.9 documents and calls.

verl itself cannot be installed here (it pins transformers<5.11 and needs ray and tensordict),
so these tests load the reward function the two ways verl's `load_extern_object` does
(`pkg://` module and a file path under a fresh module name), merge `reward_kwargs` as its
`_call_with_kwargs` does, and call it with the keyword arguments and `extra_info` additions
of its naive and batch reward managers, on real GSM8K and MATH-500 rows.
"""

import importlib
import importlib.util
import json
from functools import partial
from pathlib import Path

import needs
import pytest

DATA = Path(__file__).resolve().parents[1].parent / "shared" / "datasets"
MODULE_FILE = Path(__file__).resolve().parents[1] / "rlvr" / "integrations" / "verl.py"
KEYS = {"score", "acc", "pred", "reason", "components"}


def load_like_verl(path: str, name: str):
    """verl's `load_extern_object`: `pkg://a.b` imports the module, anything else is a file."""
    if path.startswith("pkg://"):
        module = importlib.import_module(path[len("pkg://"):].replace("/", "."))
    else:
        spec = importlib.util.spec_from_file_location(f"custom_module_{hash(path)}", path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    return getattr(module, name)


def call_with_kwargs(raw_fn, extra_kwargs, *args, **kwargs):
    """verl's `_call_with_kwargs`: reward_kwargs from the config win over call-time kwargs."""
    return raw_fn(*args, **{**kwargs, **extra_kwargs})


def naive_manager_call(fn, data_source, response, ground_truth, extra_info=None):
    extra_info = dict(extra_info or {})
    extra_info["num_turns"] = None
    extra_info["rollout_reward_scores"] = {}
    return fn(data_source=data_source, solution_str=response, ground_truth=ground_truth, extra_info=extra_info)


def gsm8k_rows(n):
    path = DATA / "gsm8k" / "test.jsonl"
    if not path.exists():
        needs.skip(f"{path} is missing")
    rows = [json.loads(line) for line in path.open()][:n]
    return [(row["question"], row["answer"].split("####")[-1].strip().replace(",", "")) for row in rows]


@pytest.mark.parametrize("path", ["pkg://rlvr.integrations.verl", str(MODULE_FILE)])
def test_verl_loads_and_calls_compute_score_on_gsm8k(path):
    fn = partial(call_with_kwargs, load_like_verl(path, "compute_score"), {})
    for _, answer in gsm8k_rows(5):
        right = naive_manager_call(fn, "openai/gsm8k", f"Let me think. The total is \\boxed{{{answer}}}.", answer)
        wrong = naive_manager_call(fn, "openai/gsm8k", f"So it is \\boxed{{{int(answer) + 1}}}.", answer)
        silent = naive_manager_call(fn, "openai/gsm8k", "I am not sure.", answer)
        assert right == {"score": 1.0, "acc": True, "pred": answer, "reason": "", "components": "{}"}
        assert (wrong["score"], wrong["acc"], wrong["reason"], wrong["pred"]) == (0.0, False, "wrong", str(int(answer) + 1))
        assert (silent["score"], silent["reason"], silent["pred"]) == (0.0, "no_answer", "")
        assert set(right) == set(wrong) == set(silent) == KEYS  # verl stacks these per batch


def test_math500_latex_answers_through_the_batch_manager():
    path = DATA / "math500" / "test.jsonl"
    if not path.exists():
        needs.skip(f"{path} is missing")
    rows = [json.loads(line) for line in path.open()][:6]
    fn = partial(call_with_kwargs, load_like_verl("pkg://rlvr.integrations.verl", "compute_score_batch"), {})
    responses = [f"<think>work</think> The answer is $\\boxed{{{r['answer']}}}$" for r in rows]
    out = fn(data_sources=["HuggingFaceH4/MATH-500"] * 6, solution_strs=responses,
             ground_truths=[r["answer"] for r in rows],
             extra_infos=[{"index": i, "rollout_reward_scores": {}} for i in range(6)])
    assert [o["score"] for o in out] == [1.0] * 6
    swapped = fn(data_sources=["HuggingFaceH4/MATH-500"] * 2, solution_strs=responses[:2],
                 ground_truths=[rows[1]["answer"], rows[0]["answer"]], extra_infos=[{}, {}])
    assert [o["acc"] for o in swapped] == [False, False]


def test_reward_kwargs_and_extra_info_choose_the_verifier():
    raw = load_like_verl("pkg://rlvr.integrations.verl", "compute_score")
    think = partial(call_with_kwargs, raw, {"verifier": "think_format"})
    good = naive_manager_call(think, "my_dataset", "<think>a</think> 4", None)
    bad = naive_manager_call(think, "my_dataset", "4", None)
    assert (good["score"], bad["score"], bad["reason"]) == (1.0, 0.0, "format")
    plain = partial(call_with_kwargs, raw, {})
    chosen = naive_manager_call(plain, "my_dataset", "4", None, extra_info={"rlvr_verifier": "think_format"})
    assert chosen["reason"] == "format"
    with pytest.raises(ValueError, match="no rlvr verifier for data_source 'my_dataset'"):
        naive_manager_call(plain, "my_dataset", "4", "4")


def test_unusable_code_ground_truths_are_bad_reference_without_running_anything():
    fn = load_like_verl("pkg://rlvr.integrations.verl", "compute_score_batch")
    truths = ["not json", json.dumps({"fn_name": "f", "inputs": [[1]], "outputs": [2]}), json.dumps({"x": 1}), [1, 2]]
    out = fn(data_sources=["codecontests"] * 4, solution_strs=["print(1)"] * 4, ground_truths=truths,
             extra_infos=None)
    assert [(o["score"], o["reason"], o["acc"]) for o in out] == [(0.0, "bad_reference", False)] * 4
    assert all(set(o) == KEYS for o in out)


def test_mismatched_batch_lengths_are_refused():
    fn = load_like_verl("pkg://rlvr.integrations.verl", "compute_score_batch")
    with pytest.raises(ValueError, match="2 responses but 1 data sources"):
        fn(data_sources=["openai/gsm8k"], solution_strs=["a", "b"], ground_truths=["1", "2"], extra_infos=None)


def test_inside_verls_own_reward_managers():
    """Runs only where verl imports (not in CI: see docs/integrations.md for the scratch install)."""
    pytest.importorskip("verl", reason="verl is not installable here; the contract tests above stand in")
    import numpy as np
    import torch
    from omegaconf import OmegaConf
    from transformers import AutoTokenizer
    from verl import DataProto
    from verl.trainer.ppo.reward import get_custom_reward_fn
    from verl.workers.reward_manager.batch import BatchRewardManager
    from verl.workers.reward_manager.naive import NaiveRewardManager

    from rlvr.trainer.models import smollm2_folder

    tokenizer = AutoTokenizer.from_pretrained(smollm2_folder())  # SmolLM2's own, as the user would load it
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
    prompts = [tokenizer(p, add_special_tokens=False)["input_ids"] for p in ["3*4?", "10-7?", "2+2?"]]
    responses = [tokenizer(r, add_special_tokens=False)["input_ids"]
                 for r in ["<think>3*4</think> \\boxed{12}", "It is \\boxed{4}", "no idea"]]
    width = max(map(len, prompts + responses))
    data = DataProto.from_dict(
        tensors={
            "prompts": torch.tensor([[pad] * (width - len(p)) + p for p in prompts]),
            "responses": torch.tensor([r + [pad] * (width - len(r)) for r in responses]),
            "attention_mask": torch.tensor([[0] * (width - len(p)) + [1] * (len(p) + len(r)) + [0] * (width - len(r))
                                            for p, r in zip(prompts, responses)]),
        },
        non_tensors={"data_source": np.array(["openai/gsm8k"] * 3, dtype=object),
                     "reward_model": np.array([{"ground_truth": t} for t in ["12", "3", "4"]], dtype=object),
                     "extra_info": np.array([{"index": i} for i in range(3)], dtype=object)})
    for name, manager in [("compute_score", NaiveRewardManager), ("compute_score_batch", BatchRewardManager)]:
        config = OmegaConf.create({"reward": {"custom_reward_function": {
            "path": "pkg://rlvr.integrations.verl", "name": name, "reward_kwargs": {}}}})
        out = manager(tokenizer=tokenizer, num_examine=0, compute_score=get_custom_reward_fn(config))(
            data, return_dict=True)
        assert [float(row.sum()) for row in out["reward_tensor"]] == [1.0, 0.0, 0.0]
        assert list(out["reward_extra_info"]["reason"]) == ["", "wrong", "no_answer"]
        assert list(out["reward_extra_info"]["pred"]) == ["12", "4", ""]
