"""RemoteVerifier against a real `rlvr serve`: same scores as in-process, and failures said as such."""

import pickle
import socket
import sys
from pathlib import Path

import pytest

from rlvr.integrations.client import RemoteVerifier
from rlvr.integrations.trl import RewardFunc
from rlvr.registry import make_verifier

sys.path.insert(0, str(Path(__file__).resolve().parent))
from test_serve import TOKEN, start_server, stop  # noqa: E402

COMPLETIONS = ["<think>a</think> \\boxed{12}", "\\boxed{13}", "no answer", [{"role": "assistant", "content": "\\boxed{12}"}],
               "<think>x</think> \\boxed{12} or \\boxed{14}"]


@pytest.fixture(scope="module")
def url():
    proc, url = start_server("--register", "broken=test_serve:Broken", "--max-batch", "2")
    yield url
    stop(proc)


def test_remote_scores_match_in_process_ones(url):
    remote = RemoteVerifier(url, "math", token=TOKEN, chunk=2)  # 5 items: three requests under max-batch 2
    local = make_verifier("math")
    references = ["12"] * len(COMPLETIONS)
    assert remote.score_batch(COMPLETIONS, references) == local.score_batch(COMPLETIONS, references)
    assert remote.score("\\boxed{12}", "12").value == 1.0
    clone = pickle.loads(pickle.dumps(remote))
    assert clone._client is None and clone.score("\\boxed{1}", "12").reason == "wrong"


def test_remote_verifier_inside_a_trl_reward(url):
    reward = RewardFunc(RemoteVerifier(url, "think_format", options={"answer_tags": True}, token=TOKEN))
    assert reward(prompts=["q", "q"], completions=["<think>a</think><answer>1</answer>", "<think>a</think> 1"]) == [1.0, 0.0]


def test_infrastructure_failures_score_error_and_mistakes_raise(url, monkeypatch):
    crashed = RemoteVerifier(url, "broken", token=TOKEN).score_batch(["x", "y"])
    assert [(s.value, s.reason) for s in crashed] == [(0.0, "error")] * 2
    assert "RuntimeError: verifier bug" in crashed[0].info["why"]
    free = socket.socket()
    free.bind(("127.0.0.1", 0))
    port = free.getsockname()[1]
    free.close()
    down = RemoteVerifier(f"http://127.0.0.1:{port}", "math", timeout=5).score("\\boxed{1}", "1")
    assert (down.value, down.reason) == (0.0, "error") and "unreachable" in down.info["why"]
    monkeypatch.delenv("RLVR_SERVE_TOKEN", raising=False)
    with pytest.raises(ValueError, match="401"):
        RemoteVerifier(url, "math").score("\\boxed{1}", "1")
    with pytest.raises(ValueError, match="unknown verifier 'nope'"):
        RemoteVerifier(url, "nope", token=TOKEN).score("x")
    with pytest.raises(ValueError, match="http://"):
        RemoteVerifier("localhost:8000", "math")
