"""Reading tool calls out of an assistant turn.

The default format is the one Qwen and Hermes chat templates emit: a JSON object
`{"name": ..., "arguments": {...}}` inside `<tool_call>...</tool_call>` tags, one per call.
A parser is any callable `parser(text) -> ParsedTurn`; `HermesParser` is the default.
`CodeBlockParser` reads markdown code fences instead (CodeAct style): every ```python block is a
call of the code tool, which is how small chat models write code unprompted. A parser may also
say how the model is told to call (`describe(schemas)`, text for the system prompt; None: the
chat template's `tools=` or the documented `<tools>` block), how a call is written
(`format_call`, for worked examples) and when a turn being sampled has just closed a call
(`call_ended`, where a rollout stops the turn; `end_marker` is what such a turn ends with, a
cheap test the rollout makes on the last tokens before decoding the whole turn).

Parsing never raises on model output. Text inside `<think>...</think>` is reasoning, not a
call. A call that cannot be read (unclosed tag, nested tags, not JSON, no name, arguments not
an object, longer than `max_chars`) becomes a `CallError` that the env sends back to the model
as the tool's reply, so the model sees what it got wrong.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

OPEN, CLOSE = "<tool_call>", "</tool_call>"
MAX_CALL_CHARS = 20_000
_THINK = re.compile(r"<think>.*?(?:</think>|\Z)", re.S)


@dataclass(frozen=True)
class ToolCall:
    name: str
    arguments: dict[str, Any]


@dataclass(frozen=True)
class CallError:
    """A call the parser could not read; `message` is what the model is told."""

    kind: str  # "malformed" (could not be read) -- the env adds "unknown_tool", "bad_arguments", "tool_failed"
    message: str


@dataclass
class ParsedTurn:
    """The calls of one assistant turn, in order; `attempted` is True when the turn tried to call a tool."""

    calls: list[ToolCall | CallError] = field(default_factory=list)

    @property
    def attempted(self) -> bool:
        return bool(self.calls)


class HermesParser:
    """JSON inside `<tool_call>...</tool_call>` tags (Qwen, Hermes), outside any think block."""

    end_marker = CLOSE  # what a turn that has just closed a call ends with

    def __init__(self, max_chars: int = MAX_CALL_CHARS):
        self.max_chars = max_chars

    def describe(self, schemas: list[dict[str, Any]]) -> str | None:
        return None  # the template's `tools=`, else rlvr.envs.tools.tool_system_prompt

    @staticmethod
    def format_call(name: str, arguments: dict[str, Any]) -> str:
        return f"{OPEN}{json.dumps({'name': name, 'arguments': arguments})}{CLOSE}"

    @staticmethod
    def call_ended(text: str) -> bool:
        return ends_with_call(text)

    def __call__(self, text: str) -> ParsedTurn:
        visible = _THINK.sub("", text)
        parsed = ParsedTurn()
        pos = 0
        while True:
            start = visible.find(OPEN, pos)
            stray_close = visible.find(CLOSE, pos)
            if start < 0:
                if stray_close >= 0:
                    parsed.calls.append(CallError("malformed", f"{CLOSE} without a matching {OPEN}."))
                return parsed
            if 0 <= stray_close < start:
                parsed.calls.append(CallError("malformed", f"{CLOSE} without a matching {OPEN}."))
            end = visible.find(CLOSE, start + len(OPEN))
            if end < 0:
                parsed.calls.append(CallError("malformed", f"{OPEN} is never closed with {CLOSE}."))
                return parsed
            body = visible[start + len(OPEN):end]
            pos = end + len(CLOSE)
            if OPEN in body:
                # nested tags: skip to the close of the outer call, so the inner one is not run either
                depth_end = visible.find(CLOSE, pos)
                pos = depth_end + len(CLOSE) if depth_end >= 0 else len(visible)
                parsed.calls.append(CallError("malformed", f"a {OPEN} inside another tool call."))
                continue
            parsed.calls.append(self.read(body))

    def read(self, body: str) -> ToolCall | CallError:
        if len(body) > self.max_chars:
            return CallError("malformed", f"the tool call is {len(body)} characters long; the limit is "
                                          f"{self.max_chars}.")
        try:
            data = json.loads(body)
        except (ValueError, RecursionError) as exc:
            reason = exc.msg if isinstance(exc, json.JSONDecodeError) else "too deeply nested"
            return CallError("malformed", f"the tool call is not valid JSON ({reason}). Write "
                                          '{"name": ..., "arguments": {...}} inside the tags.')
        if not isinstance(data, dict) or not isinstance(data.get("name"), str):
            return CallError("malformed", 'a tool call is a JSON object with a "name" string and an '
                                          '"arguments" object.')
        arguments = data.get("arguments", data.get("parameters", {}))
        if isinstance(arguments, str):  # some models put the arguments in a JSON string
            try:
                arguments = json.loads(arguments)
            except ValueError:
                pass
        if not isinstance(arguments, dict):
            return CallError("malformed", f'the "arguments" of a call to {data["name"][:64]!r} must be a JSON object.')
        return ToolCall(data["name"], arguments)


FENCE = "```"
CODE_LANGUAGES = ("python", "py", "python3", "")


class CodeBlockParser:
    """Markdown code fences outside any think block: each ```python block calls `tool(argument=code)`.

    A fence tagged with another language, or one never closed, is a `CallError` (the model is told
    that only Python runs); a turn without a fence is the answer.
    """

    end_marker = FENCE

    def __init__(self, tool: str = "python", argument: str = "code", max_chars: int = MAX_CALL_CHARS):
        self.tool, self.argument, self.max_chars = tool, argument, max_chars

    def __call__(self, text: str) -> ParsedTurn:
        parts = _THINK.sub("", text).split(FENCE)
        parsed = ParsedTurn()
        for content in parts[1::2] if len(parts) % 2 else parts[1:-1:2]:
            head, newline, body = content.partition("\n")
            language, body = (head.strip().lower(), body) if newline else ("", content)  # ```print(1)``` on one line
            if language not in CODE_LANGUAGES:
                parsed.calls.append(CallError("malformed", f"only ```python blocks are run, not ```{language[:32]}."))
            elif len(body) > self.max_chars:
                parsed.calls.append(CallError("malformed", f"the code block is {len(body)} characters long; "
                                                           f"the limit is {self.max_chars}."))
            else:
                parsed.calls.append(ToolCall(self.tool, {self.argument: body}))
        if len(parts) % 2 == 0:
            parsed.calls.append(CallError("malformed", f"a code block is never closed with {FENCE}."))
        return parsed

    def describe(self, schemas: list[dict[str, Any]]) -> str:
        return (f"To run Python, write the code in a {FENCE}python block and end your message there; what it "
                "prints comes back in a message from the tool, and variables are kept between blocks.")

    def format_call(self, name: str, arguments: dict[str, Any]) -> str:
        return f"{FENCE}python\n{arguments[self.argument]}\n{FENCE}"

    @staticmethod
    def call_ended(text: str) -> bool:
        visible = _THINK.sub("", text).rstrip()
        count = visible.count(FENCE)
        return visible.endswith(FENCE) and count >= 2 and count % 2 == 0


def ends_with_call(text: str) -> bool:
    """Whether a turn being sampled has just closed a tool call (a rollout may stop the turn there)."""
    return text.rstrip().endswith(CLOSE) and _THINK.sub("", text).rstrip().endswith(CLOSE)


__all__ = ["CLOSE", "FENCE", "OPEN", "CallError", "CodeBlockParser", "HermesParser", "ParsedTurn", "ToolCall", "ends_with_call"]
