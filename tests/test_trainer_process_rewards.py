"""Process supervision: env step rewards (character offsets) mapped to tokens and token advantages."""

from __future__ import annotations

import pytest
import torch

from rlvr.trainer.models import load_tokenizer
from rlvr.trainer.process_rewards import group_token_advantages, token_ends


@pytest.fixture(scope="module")
def tok():
    return load_tokenizer("tiny")


def test_each_step_end_maps_to_the_token_that_completes_it(tok):
    text = "Paris is big. Then 12+30=42, done"
    ids = tok(text, add_special_tokens=False)["input_ids"]
    ends = [text.index(".") + 1, text.index(",") + 1, len(text)]
    for end, k in zip(ends, token_ends(tok, ids, ends)):
        assert len(tok.decode(ids[:k + 1])) >= end  # this token completes the step ...
        assert k == 0 or len(tok.decode(ids[:k])) < end  # ... and the one before does not
    assert token_ends(tok, ids, [10_000]) == [len(ids) - 1]  # past the end: the last token


def test_group_token_advantages_by_hand(tok):
    a = tok("one two", add_special_tokens=False)["input_ids"]
    b = tok("three", add_special_tokens=False)["input_ids"]
    infos = [{"step_rewards": [[3, 1.0], [7, 0.0]]}, {"step_rewards": [[5, 0.5]]}]
    adv = group_token_advantages(tok, [a, b], infos, std="population", eps=0.0)
    assert adv.shape == (2, max(len(a), len(b)))
    # step rewards 1, 0, 0.5: mean 0.5, population std sqrt(1/6); normalised +-sqrt(1.5) and 0
    z = 0.5 / (1 / 6) ** 0.5
    first_end = token_ends(tok, a, [3])[0]
    assert 0 <= first_end < len(a) - 1  # "one" ends before the last token: neither slice below is empty
    assert torch.allclose(adv[0, :first_end + 1], torch.tensor(z - z))  # steps 1 and 2 both end after these
    assert torch.allclose(adv[0, first_end + 1:len(a)], torch.tensor(-z))  # only step 2 ends after these
    assert torch.all(adv[1] == 0)  # its one step is the group mean; padding stays 0
    assert not group_token_advantages(tok, [a], [{}], std="sample", eps=1e-4).any()  # no steps: no advantage
