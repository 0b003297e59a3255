"""verl: rlvr verifiers as verl's custom reward function.

Point verl at this module, by package or by file:

    reward.custom_reward_function.path=pkg://rlvr.integrations.verl
    reward.custom_reward_function.name=compute_score          # or compute_score_batch
                                                             # with reward_manager=batch

verl calls `compute_score(data_source, solution_str, ground_truth, extra_info)` per response
(the naive reward manager) or `compute_score_batch(data_sources, solution_strs,
ground_truths, extra_infos)` per batch (the batch manager; the whole batch then goes to the
verifier's `score_batch` and its worker pools). Each returns a dict with `score` (the
reward) and the breakdown: `acc` (the answer is right), `pred` (the extracted answer),
`reason` ("" when none) and `components` (JSON). The keys are the same for every response,
as verl stacks them into per-batch arrays.

Which verifier: `extra_info["rlvr_verifier"]`, else `verifier=` from
`custom_reward_function.reward_kwargs`, else the data source's usual verifier
(`DATA_SOURCES`). Task fields come from `extra_info["rlvr_fields"]` and, for code, from a
ground truth that is a dict or JSON text: `{"inputs": [...], "outputs": [...]}` (stdin/stdout
tests), `{"test_list": [...]}` (MBPP) or `{"test": ..., "entry_point": ...}` (HumanEval).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from rlvr.integrations.scoring import Item, get_verifier, score_items
from rlvr.verifiers.core import BAD_REFERENCE

# verl's data_source values (its example preprocessors and common datasets) -> rlvr verifier.
DATA_SOURCES = {
    "openai/gsm8k": "math",
    "lighteval/MATH": "math",
    "DigitalLearningGmbH/MATH-lighteval": "math",
    "HuggingFaceH4/MATH-500": "math",
    "math_dapo": "math",
    "math": "math",
    "aime": "math",
    "aime2024": "math",
    "aime2025": "math",
    "numina_aops_forum": "math",
    "numina_synthetic_math": "math",
    "numina_amc_aime": "math",
    "numina_olympiads": "math",
    "codecontests": "code",
    "apps": "code",
    "taco": "code",
    "codeforces": "code",
    "livecodebench": "code",
    "humaneval": "code",
    "mbpp": "code",
}


def compute_score(data_source: str, solution_str: str, ground_truth: Any, extra_info: Mapping | None = None,
                  **kwargs: Any) -> dict[str, Any]:
    """verl's per-response reward function: a dict with `score` and the breakdown."""
    return compute_score_batch([data_source], [solution_str], [ground_truth], [extra_info], **kwargs)[0]


def compute_score_batch(data_sources: Sequence[str], solution_strs: Sequence[str], ground_truths: Sequence[Any],
                        extra_infos: Sequence[Mapping | None] | None = None, *, verifier: str | None = None,
                        options: Mapping[str, Any] | None = None, **ignored: Any) -> list[dict[str, Any]]:
    """verl's batch reward function: one dict per response, scored together.

    `verifier` and `options` come from `custom_reward_function.reward_kwargs`; the other
    keyword arguments verl may add (e.g. a reward router's address) are ignored.
    """
    n = len(solution_strs)
    extra_infos = [None] * n if extra_infos is None else list(extra_infos)
    if not (len(data_sources) == len(ground_truths) == len(extra_infos) == n):
        raise ValueError(f"{n} responses but {len(data_sources)} data sources, {len(ground_truths)} ground "
                         f"truths and {len(extra_infos)} extra_infos")
    items: list[Item] = []
    problems: dict[int, str] = {}
    for i, (source, text, truth, extra) in enumerate(zip(data_sources, solution_strs, ground_truths, extra_infos)):
        extra = extra if isinstance(extra, Mapping) else {}
        name = extra.get("rlvr_verifier") or verifier or _verifier_for(source)
        reference, fields, problem = _reference_and_fields(name, truth)
        if problem:
            problems[i] = problem
        fields.update(extra.get("rlvr_fields") or {})
        items.append(Item(completion=text, reference=reference, fields=fields, verifier=name,
                          options=dict(options or {}) if name == verifier else {}))
    scored = iter(score_items([it for i, it in enumerate(items) if i not in problems]))
    out = []
    for i, item in enumerate(items):
        if i in problems:  # the task's fault: nothing is run, and the reason says so
            result, best = {"score": 0.0, "reason": BAD_REFERENCE, "info": {"why": problems[i]}}, float("inf")
        else:
            result, best = next(scored), get_verifier(item.verifier, item.options).best
        info = result.get("info") or {}
        out.append({
            "score": float(result["score"]),
            "acc": bool(result["score"] >= best - 1e-9),
            "pred": "" if info.get("answer") is None else str(info["answer"]),
            "reason": result["reason"] or "",
            "components": json.dumps(result.get("components") or {}, sort_keys=True),
        })
    return out


def _verifier_for(data_source: str) -> str:
    if data_source in DATA_SOURCES:
        return DATA_SOURCES[data_source]
    lowered = str(data_source).lower()
    for known, name in DATA_SOURCES.items():
        if lowered == known.lower() or lowered.endswith("/" + known.lower()):
            return name
    raise ValueError(
        f"no rlvr verifier for data_source {data_source!r}: set extra_info['rlvr_verifier'] in the data, or "
        f"custom_reward_function.reward_kwargs.verifier (known sources: {', '.join(sorted(DATA_SOURCES))})"
    )


def _reference_and_fields(verifier: str, truth: Any) -> tuple[Any, dict[str, Any], str | None]:
    """(reference, task fields, what is wrong with the ground truth or None); code tests become fields."""
    if verifier != "code":
        return truth, {}, None
    if isinstance(truth, str):
        try:
            truth = json.loads(truth)
        except json.JSONDecodeError:
            return None, {}, "a code ground truth must be a JSON object of tests"
    if not isinstance(truth, Mapping):
        return None, {}, f"a code ground truth must be a JSON object of tests, got {type(truth).__name__}"
    if "inputs" in truth and "outputs" in truth:
        if truth.get("fn_name"):
            return None, {}, "call-based tests (fn_name) are not supported; use stdin/stdout or assert tests"
        pairs = zip(truth["inputs"], truth["outputs"])
        return None, {"io_tests": [{"input": _text(a), "output": _text(b)} for a, b in pairs]}, None
    fields = {k: truth[k] for k in ("test_list", "test_setup_code", "entry_point", "prefix") if k in truth}
    if "test" in truth or "tests" in truth:
        fields["tests"] = truth.get("tests", truth.get("test"))
    if not fields:
        return None, {}, f"no tests in the code ground truth (keys: {', '.join(map(str, truth)) or 'none'})"
    return None, fields, None


def _text(value: Any) -> str:
    if isinstance(value, list):
        return "\n".join(map(str, value))
    return str(value)
