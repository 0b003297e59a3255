"""Process supervision: an env's per-step rewards turned into per-token advantages.

An env that grades the steps of a completion puts `info["step_rewards"]`, a list of
`[end, reward]` pairs, into each completion's info: the step ends at character `end` (exclusive)
of the completion text it scored. Each end is mapped to the completion token whose decoded
prefix first reaches it, then `loss.process_advantages` normalises all step rewards of the group
together and gives each token the sum of the normalised rewards of the steps ending at or after
it (DeepSeekMath). A completion without steps gets no advantage.
"""

from __future__ import annotations

import torch

from rlvr.trainer.loss import process_advantages


def token_ends(tokenizer, completion_ids: list[int], char_ends: list[int]) -> list[int]:
    """For each character offset, the index of the first token whose decoded prefix reaches it."""
    decoded: dict[int, int] = {}

    def prefix_len(k: int) -> int:  # characters of the text decoded from tokens 0..k
        if k not in decoded:
            decoded[k] = len(tokenizer.decode(completion_ids[:k + 1], skip_special_tokens=True))
        return decoded[k]

    ends = []
    for end in char_ends:
        lo, hi = 0, max(len(completion_ids) - 1, 0)
        while lo < hi:  # binary search: prefixes only grow
            mid = (lo + hi) // 2
            if prefix_len(mid) >= end:
                hi = mid
            else:
                lo = mid + 1
        ends.append(lo)
    return ends


def step_rewards(infos: list[dict]) -> list[list[float]]:
    return [[float(r) for _, r in (info.get("step_rewards") or [])] for info in infos]


def group_token_advantages(tokenizer, completion_ids: list[list[int]], infos: list[dict], std: str,
                           eps: float) -> torch.Tensor:
    """(G x longest completion) token advantages of one group from its completions' step rewards."""
    steps = [info.get("step_rewards") or [] for info in infos]
    ends = [token_ends(tokenizer, ids, [int(end) for end, _ in s]) for ids, s in zip(completion_ids, steps)]
    lengths = [len(ids) for ids in completion_ids]
    per_completion = process_advantages(step_rewards(infos), ends, lengths, std, eps)
    out = torch.zeros((len(completion_ids), max(lengths)))
    for i, adv in enumerate(per_completion):
        out[i, :len(adv)] = adv
    return out
