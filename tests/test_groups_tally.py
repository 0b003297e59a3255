"""`groups.tally`: the per-episode sums that `rlvr eval` and the trainer's held-out evaluation report."""

from collections import Counter

from rlvr.trainer.rollout.groups import Group
from rlvr.trainer.rollout.tally import tally


def _group(index, episodes):
    """A group from (reward, info) pairs; the token fields do not enter the tally."""
    rewards, infos = zip(*episodes)
    return Group(index, [1], [[2]] * len(rewards), [False] * len(rewards), [""] * len(rewards), list(rewards),
                 list(infos))


def _info(correct, calls=0, turns=1, reason=None, **parts):
    return {"correct": correct, "tool_calls": calls, "turns": turns,
            "score": {"value": 1.0 if correct else 0.0, "reason": reason, "components": parts}}


def test_tally_adds_every_episode_of_every_group():
    groups = [
        _group(0, [(1.0, _info(True, calls=2, turns=3, correct_part=1.0, boxed=0.5)),  # right, with the tool
                   (0.3, _info(False, calls=1, turns=2, reason="wrong_answer", correct_part=0.0, boxed=1.0))]),
        _group(1, [(0.8, _info(True, calls=0, turns=1, correct_part=1.0, boxed=0.0)),  # right, no tool
                   (0.0, {"correct": False, "score": {"value": 0.0, "reason": "error"}})]),  # infra error
    ]
    totals = Counter()
    tally(groups, totals)
    tally(groups[:1], totals)  # it adds to what is there
    assert totals["reward"] == 1.0 + 0.3 + 0.8 + 0.0 + 1.0 + 0.3
    assert totals["correct"] == 3
    assert totals["turns"] == 3 + 2 + 1 + 1 + 3 + 2  # an episode without "turns" counts one
    assert totals["tool_calls"] == 2 + 1 + 0 + 0 + 2 + 1
    assert totals["tool_correct"] == 2  # right answers that called a tool: episode 0 of group 0, twice
    assert totals["reason/"] == 3 and totals["reason/wrong_answer"] == 2 and totals["reason/error"] == 1
    assert totals["part/correct_part"] == 3.0 and totals["part/boxed"] == 0.5 + 1.0 + 0.0 + 0.5 + 1.0
