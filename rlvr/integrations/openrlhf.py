"""OpenRLHF: the reward-function file (`--remote_rm_url reward.py`) and the remote reward-model format.

OpenRLHF hands a reward function, or POSTs to a reward server, three parallel lists:
`query` (prompt and response decoded together, special tokens kept), `prompts` (the prompt
text) and `labels` (the dataset's `--label_key` column). It reads back `rewards` (for the
advantages), `scores` (0/1, for dynamic filtering) and `extra_logs` (per-query metrics).

Here the response is the query with its prompt prefix (or, when the prompt text is not
found verbatim, everything up to the last assistant-turn marker of a common chat template)
and trailing end-of-turn tokens removed. A label is the reference answer; a label that is a JSON object may instead carry
`reference`, a `verifier` name for mixed datasets, and any task fields (e.g. `test_list`).
`scores` is 1 where the reward reached the verifier's best. `extra_logs` has one list per
component and per reason (`rlvr/<reason>`, 0 or 1), the same keys for every query.

Use it as the file itself (`--remote_rm_url .../rlvr/integrations/openrlhf.py`, verifier from
$RLVR_VERIFIER, default `math`, options from $RLVR_VERIFIER_OPTIONS as JSON), from a
two-line file of your own (`reward_func = RewardFunc("code")`), or over HTTP with
`rlvr serve` at `http://host:port/openrlhf/<verifier>`.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from typing import Any

from rlvr.integrations.scoring import Item, ItemError, get_verifier, score_items
from rlvr.verifiers.core import REASONS

END_MARKERS = ("<|im_end|>", "<|endoftext|>", "<|eot_id|>", "<|end_of_text|>", "<|end|>", "</s>", "<eos>")


# Where common chat templates start the assistant's turn: the fallback when the decoded query
# does not contain the prompt text verbatim (a tokenizer round trip can change whitespace).
ASSISTANT_STARTS = ("<|im_start|>assistant\n", "<|start_header_id|>assistant<|end_header_id|>\n\n",
                    "<|assistant|>\n", "[/INST]")


def response_text(query: str, prompt: str | None) -> str:
    """The model's response: `query` after its prompt, without trailing end-of-turn tokens."""
    text = query
    at = query.find(prompt) if prompt else -1
    if at >= 0:
        text = query[at + len(prompt):]
    else:
        starts = [(query.rfind(m), m) for m in ASSISTANT_STARTS]
        at, marker = max(starts)
        if at >= 0:
            text = query[at + len(marker):]
    while True:
        stripped = text.rstrip()
        for marker in END_MARKERS:
            if stripped.endswith(marker):
                text = stripped[: -len(marker)]
                break
        else:
            return text


def parse_label(label: Any) -> tuple[Any, dict[str, Any], str | None]:
    """(reference, task fields, verifier override) from one OpenRLHF label."""
    data = label
    if isinstance(label, str) and label.lstrip().startswith("{"):
        try:
            data = json.loads(label)
        except json.JSONDecodeError:
            data = label
    if isinstance(data, Mapping):
        fields = {str(k): v for k, v in data.items() if k not in ("reference", "verifier")}
        verifier = data.get("verifier")
        return data.get("reference"), fields, verifier if isinstance(verifier, str) else None
    return label, {}, None


def score_queries(queries: Sequence[str], prompts: Sequence[str] | None = None,
                  labels: Sequence[Any] | None = None, *, verifier: str = "math",
                  options: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """OpenRLHF's response body for one request: `rewards`, `scores` and `extra_logs`, as lists."""
    n = len(queries)
    prompts = [None] * n if prompts is None else list(prompts)
    labels = [None] * n if labels is None else list(labels)
    if len(prompts) != n or len(labels) != n:
        raise ItemError(f"{n} queries but {len(prompts)} prompts and {len(labels)} labels")
    options = dict(options or {})
    items, names = [], []
    for query, prompt, label in zip(queries, prompts, labels):
        reference, fields, override = parse_label(label)
        name = override or verifier
        names.append(name)
        items.append(Item(completion=response_text(query, prompt), reference=reference, fields=fields,
                          verifier=name, options=options if name == verifier else {}))
    results = score_items(items)
    best = {name: get_verifier(name, options if name == verifier else {}).best for name in set(names)}
    rewards = [float(r["score"]) for r in results]
    scores = [1.0 if reward >= best[name] - 1e-9 else 0.0 for reward, name in zip(rewards, names)]
    components = sorted({k for r in results for k in r["components"]})
    extra_logs: dict[str, list[float]] = {f"rlvr/{c}": [float(r["components"].get(c, 0.0)) for r in results]
                                          for c in components}
    for reason in REASONS:
        extra_logs[f"rlvr/{reason}"] = [1.0 if r["reason"] == reason else 0.0 for r in results]
    return {"rewards": rewards, "scores": scores, "extra_logs": extra_logs}


class RewardFunc:
    """OpenRLHF's `reward_func(queries, prompts, labels)`, returning torch tensors as its template does."""

    def __init__(self, verifier: str = "math", **options: Any):
        self.verifier = verifier
        self.options = options

    def __call__(self, queries, prompts, labels) -> dict[str, Any]:
        import torch

        out = score_queries(queries, prompts, labels, verifier=self.verifier, options=self.options)
        return {
            "rewards": torch.tensor(out["rewards"], dtype=torch.float32),
            "scores": torch.tensor(out["scores"], dtype=torch.float32),
            "extra_logs": {k: torch.tensor(v, dtype=torch.float32) for k, v in out["extra_logs"].items()},
        }

    def __repr__(self) -> str:
        return f"RewardFunc({self.verifier!r}, **{self.options!r})"


def _from_environment() -> RewardFunc:
    raw = os.environ.get("RLVR_VERIFIER_OPTIONS", "")
    try:
        options = json.loads(raw) if raw else {}
    except json.JSONDecodeError as exc:
        raise ValueError(f"RLVR_VERIFIER_OPTIONS is not JSON: {exc}") from None
    if not isinstance(options, dict):
        raise ValueError("RLVR_VERIFIER_OPTIONS must be a JSON object")
    return RewardFunc(os.environ.get("RLVR_VERIFIER", "math"), **options)


def reward_func(queries, prompts, labels) -> dict[str, Any]:
    """What OpenRLHF calls when `--remote_rm_url` points at this file ($RLVR_VERIFIER, default math)."""
    return _from_environment()(queries, prompts, labels)
