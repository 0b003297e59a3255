"""The rules-then-judge cascade (#52), against the real llama.cpp server through a recording relay."""

from __future__ import annotations

import pytest
from llama_server import Relay

import rlvr.verifiers.judge as judge_module
from rlvr.verifiers.judge import JudgeVerifier
from rlvr.verifiers.math import MathVerifier
from rlvr.verifiers.math.cascade import MathJudgeCascade

QUESTION = "How many apples are left?"
# A rubric the small test model follows: it lets the judge's acceptance be seen. Real use passes rubric="math".
GENEROUS = "Whatever the response says, give it the top score."


def _cascade(url: str, model: str, **kw) -> MathJudgeCascade:
    kw.setdefault("rubric", "math")
    judge = JudgeVerifier(url, model, cache_dir=False, retries=0, timeout=60, **kw)
    return MathJudgeCascade(judge, rules=MathVerifier(timeout=5.0))


@pytest.fixture
def relay(llama_server):
    relay = Relay(llama_server.port)
    yield relay
    relay.close()


def test_only_answers_the_rules_call_wrong_reach_the_judge(llama_server, relay):
    cascade = _cascade(relay.url, llama_server.model)
    completions = ["So \\boxed{12}.", "It is \\boxed{12} or \\boxed{13}.", "\\boxed{2^{2^{2^{2^{2^{2}}}}}}",
                   "I am not sure.", "The reasoning goes here. So \\boxed{13}."]
    scores = cascade.score_batch(completions, ["12", "12", "5", "12", "12"], [{"question": QUESTION}] * 5)
    assert [s.reason for s in scores[:4]] == [None, "hedge", "timeout", "no_answer"]
    assert all(s.info["decided_by"] == "rules" and "judge" not in s.info for s in scores[:4])
    assert relay.requests  # the one `wrong` pair, and only it (a second request may renegotiate the reply format)
    for request in relay.requests:
        user = request["messages"][1]["content"]
        assert QUESTION in user and "RESPONSE TO GRADE>>>\n13\n" in user and "REFERENCE ANSWER>>>\n12\n" in user
        assert "reasoning goes here" not in user  # the judge sees the extracted answer, not the completion
    judged = scores[4]
    assert judged.info["rules_reason"] == "wrong" and "judge_score" in judged.info["judge"], judged.info
    accepted = judged.info["judge"]["judge_score"] == judged.info["judge"]["scale"]
    assert (judged.value, judged.reason, judged.info["decided_by"]) == (
        (1.0, None, "judge") if accepted else (0.0, "wrong", "rules"))


def test_the_judges_acceptance_is_marked_in_info(llama_server, relay, monkeypatch):
    monkeypatch.setattr(judge_module.secrets, "token_hex", lambda _: "5eed0001")  # one prompt: a repeatable reply
    cascade = _cascade(relay.url, llama_server.model, rubric=GENEROUS, scale=1)
    score = cascade.score("So the answer is \\boxed{\\text{twelve}}.", "12", question=QUESTION)
    assert relay.requests
    assert score.value == 1.0 and score.reason is None, score.info
    assert score.info["decided_by"] == "judge" and score.info["rules_reason"] == "wrong"
    assert score.info["judge"]["judge_score"] == 1 and score.info["answer"] == "\\text{twelve}"


def test_a_deliberate_zero_of_the_rules_is_never_judged(llama_server, relay):
    cascade = _cascade(relay.url, llama_server.model, rubric=GENEROUS, scale=1)
    simplified = cascade.score("\\boxed{1+1}", "2", simplified=True)
    echo = cascade.score("\\boxed{623 \\times 685}", "426755", question="Compute 623 * 685.")
    assert (simplified.value, echo.value) == (0.0, 0.0) and not relay.requests
    assert simplified.info["decided_by"] == echo.info["decided_by"] == "rules"


def test_a_failed_judge_leaves_the_rules_verdict(llama_server):
    relay = Relay(llama_server.port)
    relay.close()  # an outage
    cascade = _cascade(relay.url, llama_server.model, rubric=GENEROUS, scale=1)
    score = cascade.score("\\boxed{13}", "12")
    assert (score.value, score.reason, score.info["decided_by"]) == (0.0, "wrong", "rules")
    assert score.info["judge"]["error"], score.info


def test_a_hedge_or_a_timeout_cannot_be_sent_to_the_judge():
    with pytest.raises(ValueError, match="hedge"):
        MathJudgeCascade(object(), judged_reasons=("wrong", "hedge"))
