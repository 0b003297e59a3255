"""Instruction following, checked by rules in the style of IFEval (`rlvr.verifiers.instructions`).

A task gives its instructions as a list of `{"id": IFEval id, "kwargs": {...}}` (as the
reference, or the task field `instructions`). `InstructionVerifier` checks each one and
keeps a per-instruction breakdown in `info["instructions"]`, with a reason for every
instruction not followed. The reward is 1 when all are followed, else 0 (IFEval's
prompt-level accuracy), or the fraction followed with `partial=True` (instruction level).

`mode="loose"` is IFEval's loose accuracy: an instruction also counts as followed when
the response passes after dropping its first line, its last line, both, and/or every `*`
(so "Sure, here it is:" or markdown emphasis do not decide the outcome).

Pure Python; the language checks use `langdetect`, which carries its own profiles.

The checks run in the caller's process with no timeout to enforce, so their cost is bounded by
the text's length instead: a response longer than `max_chars` (default 200,000 characters, about
50k tokens, beyond any generation budget in use) is not checked and scores 0 with reason
`overlong`. At that length the slowest check, in loose mode (eight variants of the text), stays
well under a second, where a 1 MB text took over one (bench/hostile.py).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from rlvr.verifiers.core import BAD_REFERENCE, NO_ANSWER, OVERLONG, Score, Verifier, completion_text
from rlvr.verifiers.instructions.checks import CHECKS, check_arguments, detect_language

NOT_FOLLOWED = "not_followed"  # the response breaks at least one instruction
MODES = ("strict", "loose")
MAX_CHARS = 200_000  # longest response checked (see the module docstring)
INSTRUCTION_IDS = tuple(CHECKS)


def normalize_instructions(spec: Any) -> list[tuple[str, dict[str, Any]]]:
    """`[(id, kwargs), ...]` from a list of `{"id", "kwargs"}` dicts or `(id, kwargs)` pairs.

    Raises ValueError naming the bad entry (an unusable task, not a model error).
    """
    if isinstance(spec, Mapping) and "instruction_id_list" in spec:  # IFEval's own row layout
        spec = list(zip(spec["instruction_id_list"], spec.get("kwargs") or [{}] * len(spec["instruction_id_list"])))
    if isinstance(spec, (str, bytes)) or not isinstance(spec, Sequence) or not spec:
        raise ValueError(f"instructions must be a non-empty list, got {spec!r:.80}")
    out = []
    for item in spec:
        if isinstance(item, Mapping):
            instruction_id, kwargs = item.get("id"), item.get("kwargs") or {}
        elif isinstance(item, Sequence) and len(item) == 2 and isinstance(item[0], str):
            instruction_id, kwargs = item
        else:
            raise ValueError(f"an instruction is a {{'id', 'kwargs'}} dict, got {item!r:.80}")
        out.append((instruction_id, check_arguments(instruction_id, dict(kwargs or {}))))
    return out


def loose_variants(text: str) -> list[str]:
    """The response and the variants IFEval's loose mode also accepts."""
    lines = text.split("\n")
    trimmed = ["\n".join(lines[1:]).strip(), "\n".join(lines[:-1]).strip(), "\n".join(lines[1:-1]).strip()]
    return [text, text.replace("*", ""), *trimmed, *(t.replace("*", "") for t in trimmed)]


def check_instruction(text: str, instruction_id: str, kwargs: dict[str, Any], mode: str = "strict") -> str | None:
    """None when `text` follows the instruction in `mode`, else why not (the strict reason)."""
    check = CHECKS[instruction_id][0]
    candidates = [text] if mode == "strict" else dict.fromkeys(loose_variants(text))  # each distinct text once
    first_reason = None
    for candidate in candidates:
        if not candidate.strip():
            first_reason = first_reason or "empty response"
            continue
        reason = check(candidate, **kwargs)
        if reason is None:
            return None
        first_reason = first_reason or reason
    return first_reason


class InstructionVerifier(Verifier):
    """Checks a response against the task's IFEval-style instructions.

    `mode` is "strict" or "loose"; `partial=True` gives the fraction of instructions
    followed instead of all-or-nothing. The instructions come from `reference` or from
    the task field `instructions`. A response longer than `max_chars` scores 0 (`overlong`)
    unchecked, which bounds the time a check takes (None: no bound).
    """

    name = "instructions"

    def __init__(self, mode: str = "strict", partial: bool = False, max_chars: int | None = MAX_CHARS):
        if mode not in MODES:
            raise ValueError(f"mode must be one of {MODES}, got {mode!r}")
        if max_chars is not None and (not isinstance(max_chars, int) or isinstance(max_chars, bool)
                                      or max_chars < 1):
            raise ValueError(f"max_chars must be a positive int or None, got {max_chars!r}")
        self.mode = mode
        self.partial = bool(partial)
        self.max_chars = max_chars

    def start(self) -> None:
        """Load langdetect's language profiles now (a second or two, once per process), not in the
        first check of a language (`language:response_language`, `change_case:english_*`)."""
        detect_language("The language profiles are loaded once, before the first check.")

    def score(self, completion: Any, reference: Any = None, *, instructions: Any = None,
              **ignored: Any) -> Score:
        spec = instructions if instructions is not None else reference
        try:
            parsed = normalize_instructions(spec)
        except ValueError as exc:
            return Score(0.0, BAD_REFERENCE, info={"why": str(exc)})
        text = completion_text(completion)
        if self.max_chars is not None and len(text) > self.max_chars:
            return Score(0.0, OVERLONG, info={"mode": self.mode, "followed": 0, "total": len(parsed),
                                              "why": f"{len(text)} characters, more than max_chars={self.max_chars}"})
        breakdown = []
        for instruction_id, kwargs in parsed:
            reason = check_instruction(text, instruction_id, kwargs, self.mode)
            breakdown.append({"id": instruction_id, "followed": reason is None, "why": reason})
        followed = sum(item["followed"] for item in breakdown)
        info = {"mode": self.mode, "followed": followed, "total": len(breakdown), "instructions": breakdown}
        value = followed / len(breakdown) if self.partial else float(followed == len(breakdown))
        if followed == len(breakdown):
            return Score(value, info=info)
        return Score(value, NO_ANSWER if not text.strip() else NOT_FOLLOWED, info=info)

    def __repr__(self) -> str:
        return f"InstructionVerifier(mode={self.mode!r}, partial={self.partial})"


__all__ = ["INSTRUCTION_IDS", "MODES", "NOT_FOLLOWED", "InstructionVerifier", "check_instruction",
           "loose_variants", "normalize_instructions"]
