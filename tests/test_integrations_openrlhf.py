"""OpenRLHF adapter, against the interface OpenRLHF 0.11 documents and calls.

OpenRLHF cannot be installed here (it pins flash-attn and deepspeed, CUDA-only builds), so
these tests do what its `SingleTurnAgentExecutor` does: load `reward_func` from a file under
the module name "reward_func", call it from a worker thread with one query at a time (the
query decoded from prompt + response tokens with special tokens kept), or POST
`{"query", "prompts", "labels"}` to the remote reward-model URL; then turn the answer into
tensors as its `_process_response_into_experience` does. The query is built with the real
SmolLM2 chat template, and the labels are real GSM8K answers.
"""

import asyncio
import importlib.util
import json
import sys
from pathlib import Path

import needs
import pytest

from rlvr.integrations.openrlhf import RewardFunc, parse_label, response_text, score_queries

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT.parent / "shared" / "datasets"
MODULE_FILE = ROOT / "rlvr" / "integrations" / "openrlhf.py"
sys.path.insert(0, str(Path(__file__).resolve().parent))
from test_serve import start_server, stop  # noqa: E402


def load_reward_func(path):
    """OpenRLHF: spec_from_file_location("reward_func", url) and its `reward_func` attribute."""
    spec = importlib.util.spec_from_file_location("reward_func", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.reward_func


def to_experience_info(rewards_info):
    """What OpenRLHF's experience maker does with one answer (torch.tensor([value]) per field)."""
    import torch

    reward_val = rewards_info.get("rewards")
    score_val = rewards_info.get("scores")
    if score_val is None:
        score_val = reward_val
    info = {"reward": torch.tensor([reward_val]), "score": torch.tensor([score_val])}
    for key, value in (rewards_info.get("extra_logs") or {}).items():
        if isinstance(value, torch.Tensor):
            value = value.flatten()[0].item()
        info[key] = torch.tensor([value])
    return info


@pytest.fixture(scope="module")
def chat_queries():
    """(query, prompt, label) triples as OpenRLHF builds them with SmolLM2's chat template."""
    from transformers import AutoTokenizer

    path = DATA / "gsm8k" / "test.jsonl"
    if not path.exists():
        needs.skip(f"{path} is missing")
    rows = [json.loads(line) for line in path.open()][:3]
    from rlvr.trainer.models import smollm2_folder

    tokenizer = AutoTokenizer.from_pretrained(smollm2_folder())  # SmolLM2's own, as the user would load it
    triples = []
    for row in rows:
        answer = row["answer"].split("####")[-1].strip()
        prompt = tokenizer.apply_chat_template([{"role": "user", "content": row["question"]}], tokenize=False,
                                               add_generation_prompt=True)
        response = f"<think>Adding up.</think> The answer is \\boxed{{{answer}}}.<|im_end|>"
        ids = tokenizer(prompt, add_special_tokens=False)["input_ids"] + \
            tokenizer(response, add_special_tokens=False)["input_ids"]
        triples.append((tokenizer.decode(ids, skip_special_tokens=False), prompt, answer))
    return triples


def test_response_is_cut_out_of_the_query():
    assert response_text("<|im_start|>user\nq<|im_end|>\n<|im_start|>assistant\nA 4<|im_end|>",
                         "<|im_start|>user\nq<|im_end|>\n<|im_start|>assistant\n") == "A 4"
    assert response_text("answer 4</s>  <|endoftext|>\n", None) == "answer 4"
    assert response_text("prompt not found here", "other prompt") == "prompt not found here"
    # The prompt came back from the tokenizer with different spacing: cut at the assistant turn.
    assert response_text("<|im_start|>user\nq  ?<|im_end|>\n<|im_start|>assistant\n<think>a</think> 4<|im_end|>",
                         "<|im_start|>user\nq ?<|im_end|>\n<|im_start|>assistant\n") == "<think>a</think> 4"
    assert response_text("[INST] q [/INST] 4</s>", "[INST] q  [/INST]") == " 4"


def test_labels_are_references_or_json_tasks():
    assert parse_label("42") == ("42", {}, None)
    assert parse_label("{1, 2}") == ("{1, 2}", {}, None)  # a set answer, not JSON
    assert parse_label('{"verifier": "code", "test_list": ["assert f() == 1"]}') == (
        None, {"test_list": ["assert f() == 1"]}, "code")
    assert parse_label({"reference": "3", "level": 2}) == ("3", {"level": 2}, None)


def test_reward_func_file_scores_one_query_at_a_time_like_openrlhf(chat_queries):
    reward_func = RewardFunc("math")

    async def fetch(q, p, lab):  # OpenRLHF's _fetch_rewards_via_func: batches of one, in threads
        return await asyncio.gather(*[asyncio.to_thread(reward_func, [q[i]], [p[i]], [lab[i]]) for i in range(len(q))])

    queries, prompts, labels = map(list, zip(*chat_queries))
    wrong = [q.replace(f"\\boxed{{{a}}}", "\\boxed{-1}") for q, a in zip(queries, labels)]
    answers = asyncio.run(fetch(queries + wrong, prompts * 2, labels * 2))
    infos = [to_experience_info(a) for a in answers]
    assert [float(i["reward"].flatten()[0]) for i in infos] == [1.0] * 3 + [0.0] * 3
    assert [float(i["score"].flatten()[0]) for i in infos] == [1.0] * 3 + [0.0] * 3
    assert [float(i["rlvr/wrong"][0]) for i in infos] == [0.0] * 3 + [1.0] * 3
    assert all(set(i) == set(infos[0]) for i in infos)  # same keys for every query


def test_this_module_is_itself_a_reward_func_file(monkeypatch):
    monkeypatch.setenv("RLVR_VERIFIER", "think_format")
    monkeypatch.setenv("RLVR_VERIFIER_OPTIONS", '{"answer_tags": true}')
    reward_func = load_reward_func(MODULE_FILE)
    out = reward_func(["Q: 2+2? A: <think>4</think><answer>4</answer>", "Q: 2+2? A: <think>4</think> 4"],
                      ["Q: 2+2? A: ", "Q: 2+2? A: "], [None, None])
    assert out["rewards"].tolist() == [1.0, 0.0]
    assert out["extra_logs"]["rlvr/format"].tolist() == [0.0, 1.0]
    monkeypatch.setenv("RLVR_VERIFIER_OPTIONS", "[1]")
    with pytest.raises(ValueError, match="must be a JSON object"):
        reward_func(["x"], ["x"], [None])


def test_mixed_labels_pick_their_verifier():
    out = score_queries(["P: <think>a</think> \\boxed{7}", "P: no think"], ["P: ", "P: "],
                        ["7", '{"verifier": "think_format"}'], verifier="math")
    assert out["rewards"] == [1.0, 0.0]
    assert out["extra_logs"]["rlvr/format"] == [0.0, 1.0]


def test_remote_reward_model_over_http(chat_queries):
    import httpx

    proc, url = start_server(env_token=None)  # OpenRLHF sends no Authorization header
    try:
        queries, prompts, labels = map(list, zip(*chat_queries))
        payload = {"query": queries, "prompts": prompts, "labels": labels}
        response = httpx.post(f"{url}/openrlhf/math", json=payload, timeout=60)
        response.raise_for_status()
        body = response.json()
        assert body["rewards"] == [1.0, 1.0, 1.0] and body["scores"] == [1.0, 1.0, 1.0]
        assert body["extra_logs"]["rlvr/no_answer"] == [0.0, 0.0, 0.0]
        info = to_experience_info({k: v[:1] if isinstance(v, list) else v for k, v in body.items()})
        assert float(info["reward"].flatten()[0]) == 1.0
        bad = httpx.post(f"{url}/openrlhf/math", json={"query": "one", "labels": []})
        assert bad.status_code == 422 and "error" in bad.json()
        uneven = httpx.post(f"{url}/openrlhf/math", json={"query": ["a", "b"], "labels": ["1"]})
        assert uneven.status_code == 422 and "2 queries but" in uneven.json()["error"]
        unknown = httpx.post(f"{url}/openrlhf/nope", json={"query": ["a"]})
        assert unknown.status_code == 422 and "unknown verifier 'nope'" in unknown.json()["error"]
    finally:
        stop(proc)


def test_inside_openrlhfs_own_reward_code(monkeypatch):
    """Runs only where OpenRLHF imports (not in CI: see docs/integrations.md for the scratch install)."""
    agent = pytest.importorskip("openrlhf.utils.agent", reason="OpenRLHF is not installable here; "
                                "the contract tests above stand in")
    prompt = "<|im_start|>user\nWhat is 3*4?<|im_end|>\n<|im_start|>assistant\n"
    queries = [prompt + "<think>3*4</think> \\boxed{12}<|im_end|>", prompt + "\\boxed{13}<|im_end|>"]
    monkeypatch.setenv("RLVR_VERIFIER", "math")
    from_file = agent.SingleTurnAgentExecutor(str(MODULE_FILE))
    answers = asyncio.run(from_file._fetch_rewards_via_func(queries, [prompt] * 2, ["12", "12"]))
    assert [a["rewards"].tolist() for a in answers] == [[1.0], [0.0]]
    proc, url = start_server(env_token=None)
    try:
        over_http = agent.SingleTurnAgentExecutor(f"{url}/openrlhf/math")
        answers = asyncio.run(over_http._fetch_rewards_via_http(queries, [prompt] * 2, ["12", "12"]))
        assert answers[0]["rewards"] == [1.0, 0.0] and answers[0]["extra_logs"]["rlvr/wrong"] == [0.0, 1.0]
    finally:
        stop(proc)
