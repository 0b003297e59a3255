"""A tool call from a trainer that runs tools itself (TRL's `environment_factory`, a verifiers MCP
toolset), played through the rlvr env's own `step`.

The call is written in the env parser's format and stepped, so the env's limits, timeouts and error
replies apply as in rlvr's own episode loop, and the env counts it as one assistant turn.
"""

from __future__ import annotations

from typing import Any

ENDED = "Error: no more tool calls, the episode has ended ({})."


def call_tool(env, name: str, arguments: dict[str, Any], ended_by: str | None) -> tuple[str, dict | None]:
    """The tool's reply to `name(**arguments)`, and the step's info when this call ended the episode (else
    None). `ended_by`: how the episode already ended (None while it runs): such a call gets an error reply
    and steps nothing."""
    if ended_by is not None:
        return ENDED.format(ended_by), None
    write = getattr(env.unwrapped.parser, "format_call", None)
    if write is None:
        raise TypeError(f"the parser of {env.spec.id if env.spec else env} cannot write a call (no format_call)")
    messages, _, terminated, truncated, info = env.step(write(name, arguments))
    ended = info if terminated or truncated else None
    if messages[-1]["role"] == "tool":
        return messages[-1]["content"], ended
    return ENDED.format(info.get("ended_by", "answer")), ended
