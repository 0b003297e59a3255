"""The reward core: Score, the Verifier protocol, Composite weighting and breakdown."""

import pickle
import subprocess
import sys

import pytest

from rlvr.verifiers import (
    FORMAT,
    HEDGE,
    NO_ANSWER,
    Composite,
    FinalBoxed,
    OverlongPenalty,
    Score,
    ThinkFormat,
    Verifier,
    completion_text,
)


class Exact(Verifier):
    """A tiny verifier of our own: 1 when the last word equals the reference."""

    name = "exact"

    def score(self, completion, reference=None, **fields):
        words = completion_text(completion).split()
        if not words:
            return Score(0.0, NO_ANSWER)
        return Score(1.0) if words[-1] == str(reference) else Score(0.0, "wrong")


def test_completion_text_forms():
    assert completion_text("plain") == "plain"
    chat = [
        {"role": "system", "content": "s"},
        {"role": "assistant", "content": "first"},
        {"role": "user", "content": "u"},
        {"role": "assistant", "content": "last"},
        {"role": "tool", "content": "t"},
    ]
    assert completion_text(chat) == "last"
    assert completion_text({"role": "assistant", "content": "one"}) == "one"
    assert completion_text([{"role": "assistant", "content": [{"type": "text", "text": "a"},
                                                              {"type": "image"},
                                                              {"type": "text", "text": "b"}]}]) == "ab"
    assert completion_text([]) == ""
    assert completion_text(None) == ""
    assert completion_text([{"role": "user", "content": "q"}]) == ""


def test_composite_weighted_sum_and_breakdown():
    comp = Composite({
        "correct": (Exact(), 1.0),
        "format": (ThinkFormat(), 0.2),
        "boxed": (FinalBoxed(), 0.0),  # metric only
    })
    good = comp.score("<think>sum</think> 4", reference=4)
    assert good.value == pytest.approx(1.2)
    assert good.components == {"correct": 1.0, "format": 1.0, "boxed": 0.0}
    assert good.reason is None  # the weight-0 component does not make a headline reason
    assert good.reasons == {"boxed": NO_ANSWER}

    wrong = comp.score("<think>sum</think> 5", reference=4)
    assert wrong.value == pytest.approx(0.2)
    assert wrong.reason == "wrong"
    assert wrong.reasons["correct"] == "wrong"

    bad_format = comp.score("4", reference=4)
    assert bad_format.value == pytest.approx(1.0)
    assert bad_format.reason == FORMAT
    assert comp.best == pytest.approx(1.2)


def test_composite_with_penalty_and_batch_matches_single():
    comp = Composite({"boxed": (FinalBoxed(), 1.0), "len": (OverlongPenalty(max_length=30, buffer=10), 1.0)})
    texts = ["\\boxed{1}", "\\boxed{1} \\boxed{2}", "x" * 15 + "\\boxed{3}", ""]
    batch = comp.score_batch(texts, [None] * 4, [{}] * 4)
    single = [comp.score(t) for t in texts]
    assert batch == single
    assert batch[0].value == 1.0
    assert batch[1].reason == HEDGE
    assert batch[2].value == pytest.approx(1.0 - 0.4)
    assert batch[2].reasons == {"len": "overlong"}


def test_composite_rejects_bad_components():
    with pytest.raises(ValueError):
        Composite({})
    with pytest.raises(TypeError):
        Composite({"x": Exact()})
    with pytest.raises(ValueError):
        Composite({"x": (Exact(), float("nan"))})


def test_score_batch_checks_lengths():
    with pytest.raises(ValueError, match="2 completions but 1 references"):
        Exact().score_batch(["a", "b"], ["a"])


def test_verifiers_are_picklable_and_callable():
    comp = Composite({"format": (ThinkFormat(answer_tags=True), 0.5), "boxed": (FinalBoxed(), 1.0)})
    clone = pickle.loads(pickle.dumps(comp))
    text = "<think>x</think><answer>\\boxed{2}</answer>"
    assert clone.score(text) == comp.score(text)
    assert comp(text) == pytest.approx(1.5)


def test_score_to_dict_is_json_ready():
    import json

    s = Score(0.0, "wrong", {"a": 0.0}, {"a": "wrong"}, {"answer": ("x", 1), "obj": object()})
    d = json.loads(json.dumps(s.to_dict()))
    assert d["score"] == 0.0 and d["reason"] == "wrong" and d["info"]["answer"] == ["x", 1]


def test_importing_verifiers_does_not_import_torch():
    code = "import sys, rlvr, rlvr.verifiers, rlvr.verifiers.format, rlvr.registry; print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
