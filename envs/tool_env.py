"""An env whose model may call tools before it answers.

An episode: the prompt; then each assistant turn either calls tools (`<tool_call>` JSON, read by
the env's parser) and gets one `{"role": "tool", "content": ...}` message back per
call, or answers, which ends the episode with the task's reward. Tool turns earn reward 0; the
episode's reward is the final answer's. A call that cannot be read, names an unknown tool, has
bad arguments, makes the tool raise or runs past `tool_timeout` seconds gets an error message back
instead of a result, is counted in `info["tool_errors"]` (kinds "malformed", "unknown_tool",
"bad_arguments", "tool_failed", "timeout"), and the episode goes on.

Time limit: each call runs in its own daemon thread and the env waits `tool_timeout` seconds
(60 by default: room for the python tool's own 5 s limit and a busy sandbox queue) for it. A
Python thread cannot be killed, so a call that runs past is abandoned: its result is dropped,
and being a daemon it never holds up the step or the interpreter's exit. A process per call
would be killable, but tools are in-process objects with state (the python tool's notebook, a
sandbox pool) that a process cannot share. An abandoned call may still change its tool's state
when it ends. When `MAX_HUNG_CALLS` abandoned calls are still running in the process the tool is
taken to be broken: further calls raise `ToolUnavailable` (an infrastructure error, below).

Limits per episode (Gymnasium meaning: `terminated` when the model answered, `truncated` when a
limit stopped it, with reward 0): `max_turns` assistant turns, `max_tool_calls` calls, and
`max_tokens` tokens of assistant and tool text (counted by `count_tokens`, by default about four
characters a token; the trainer installs its tokenizer's count). `info["ended_by"]` says which:
"answer", "max_turns", "max_tool_calls", "max_tokens", or "error" when a tool's infrastructure
failed (the sandbox was down): then `info["score"]["reason"]` is "error" and the trainer leaves
the episode out.

Tools are advertised apart from the messages: `env.unwrapped.tool_schemas` (also in the reset
info as `tools`), rendered by `rlvr.envs.tools.render_chat` through the chat template's `tools=`
or the documented system-prompt format; a parser with its own call format (`CodeBlockParser`)
describes the tools itself (`env.unwrapped.tool_prompt`).
"""

from __future__ import annotations

import contextvars
import inspect
import json
import threading
from collections.abc import Callable, Sequence
from typing import Any

from rlvr.envs.base import TaskEnv, action_text
from rlvr.envs.spaces import ROLES, Messages
from rlvr.envs.tasks import TaskSource
from rlvr.envs.tool_calls import CallError, HermesParser, ParsedTurn, ToolCall
from rlvr.envs.tools import ToolUnavailable, tool_schema
from rlvr.verifiers.core import ERROR, Score

ENDINGS = ("answer", "max_turns", "max_tool_calls", "max_tokens", "error")
MAX_HUNG_CALLS = 32
_hung: set[threading.Thread] = set()  # abandoned calls, across envs: a process-wide resource
_hung_lock = threading.Lock()


class ToolTimeout(Exception):
    """A tool call ran past its time limit (raised by `call_within`, told to the model as an error)."""


def call_within(tool: Callable, arguments: dict[str, Any], seconds: float) -> Any:
    """`tool(**arguments)` in a daemon thread, given `seconds` to return; past that `ToolTimeout`
    and the thread is abandoned. The tool's own exceptions are raised here."""
    with _hung_lock:
        _hung.difference_update([t for t in _hung if not t.is_alive()])
        if len(_hung) >= MAX_HUNG_CALLS:
            raise ToolUnavailable(f"{len(_hung)} timed-out tool calls are still running: a tool hangs")
    outcome: dict[str, Any] = {}

    def run() -> None:
        try:
            outcome["value"] = tool(**arguments)
        except BaseException as exc:  # handed to the caller, whatever it is
            outcome["error"] = exc

    thread = threading.Thread(target=contextvars.copy_context().run, args=(run,), daemon=True,
                              name=f"rlvr-tool-{getattr(tool, '__name__', type(tool).__name__)}")
    thread.start()
    thread.join(seconds)
    if thread.is_alive():
        with _hung_lock:
            _hung.add(thread)
        raise ToolTimeout(seconds)
    if "error" in outcome:
        raise outcome["error"]
    return outcome["value"]


def approximate_tokens(text: str) -> int:
    return (len(text) + 3) // 4


class ToolEnv(TaskEnv):
    """A `TaskEnv` whose model may call `tools` (typed callables) before its final answer."""

    def __init__(self, source: TaskSource, *, tools: Sequence[Callable] = (), parser: Callable[[str], ParsedTurn] | None = None,
                 max_turns: int = 4, max_tool_calls: int = 4, max_tokens: int = 2048,
                 count_tokens: Callable[[str], int] | None = None, tool_timeout: float = 60.0, **options: Any):
        super().__init__(source, **options)
        if not isinstance(tool_timeout, (int, float)) or isinstance(tool_timeout, bool) or not tool_timeout > 0:
            raise ValueError(f"tool_timeout must be a positive number of seconds, got {tool_timeout!r}")
        self.tool_timeout = float(tool_timeout)
        for name, value, low in (("max_turns", max_turns, 1), ("max_tool_calls", max_tool_calls, 0),
                                 ("max_tokens", max_tokens, 1)):
            if not isinstance(value, int) or isinstance(value, bool) or value < low:
                raise ValueError(f"{name} must be an int >= {low}, got {value!r}")
        self.tools = {}
        for tool in tools:
            schema = tool_schema(tool)
            name = schema["function"]["name"]
            if name in self.tools:
                raise ValueError(f"two tools are named {name!r}")
            self.tools[name] = (tool, schema)
        self.observation_space = Messages(roles=(*ROLES, "tool"))
        self.parser = parser or HermesParser()
        self.max_turns, self.max_tool_calls, self.max_tokens = max_turns, max_tool_calls, max_tokens
        self.count_tokens = count_tokens or approximate_tokens
        self._counts: dict[str, Any] = {}

    @property
    def tool_schemas(self) -> list[dict[str, Any]]:
        return [schema for _, schema in self.tools.values()]

    @property
    def tool_prompt(self) -> str | None:
        """How the parser wants the tools described in the system prompt (None: by their schemas)."""
        describe = getattr(self.parser, "describe", None)
        return describe(self.tool_schemas) if describe and self.tools else None

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        for tool, _ in self.tools.values():
            if callable(getattr(tool, "reset", None)):
                tool.reset()
        self._counts = {"turns": 0, "tool_calls": 0, "tool_errors": {}, "tokens": 0}
        observation, info = super().reset(seed=seed, options=options)
        info["tools"] = self.tool_schemas
        return observation, info

    def step(self, action: Any):
        self._require_task()
        text = action_text(action)
        counts = self._counts
        counts["turns"] += 1
        counts["tokens"] += self.count_tokens(text)
        self._messages.append({"role": "assistant", "content": text})
        parsed = self.parser(text)
        if not parsed.attempted:
            reward_fn, reference, fields = self.scoring_inputs()
            return self._end(reward_fn.score(text, reference, **fields), "answer")
        replies = []
        try:
            for call in parsed.calls:
                if counts["tool_calls"] >= self.max_tool_calls:
                    return self._end(None, "max_tool_calls")
                counts["tool_calls"] += 1
                replies.append(self._call(call))
        except ToolUnavailable as exc:
            return self._end(Score(0.0, ERROR, info={"tool": str(exc)}), "error")
        for _, content in replies:
            self._messages.append({"role": "tool", "content": content})
            counts["tokens"] += self.count_tokens(content)
        if counts["turns"] >= self.max_turns:
            return self._end(None, "max_turns")
        if counts["tokens"] >= self.max_tokens:
            return self._end(None, "max_tokens")
        return self._observation(), 0.0, False, False, self._info(None)

    # --- calls ----------------------------------------------------------------------------

    def _call(self, call: ToolCall | CallError) -> tuple[str, str]:
        """(tool name, reply) for one call; errors become the reply. ToolUnavailable propagates."""
        if isinstance(call, CallError):
            return self._error("malformed", "", call.message)
        if call.name not in self.tools:
            known = ", ".join(self.tools) or "none"
            return self._error("unknown_tool", call.name[:64], f"there is no tool named {call.name[:64]!r} "
                                                                f"(tools: {known}).")
        tool, _ = self.tools[call.name]
        target = tool if inspect.isfunction(tool) or inspect.ismethod(tool) else tool.__call__
        try:
            inspect.signature(target).bind(**call.arguments)
        except TypeError as exc:
            return self._error("bad_arguments", call.name, f"bad arguments for {call.name}: {exc}.")
        try:
            result = call_within(tool, call.arguments, self.tool_timeout)
        except ToolUnavailable:
            raise
        except ToolTimeout:
            return self._error("timeout", call.name, f"{call.name} did not finish within {self.tool_timeout:g} "
                                                     "seconds; the call was abandoned.")
        except Exception as exc:  # the tool refused these arguments: the model is told, the episode goes on
            return self._error("tool_failed", call.name, f"{call.name} failed: {type(exc).__name__}: {exc}")
        return call.name, result if isinstance(result, str) else json.dumps(result, default=str)

    def _error(self, kind: str, name: str, message: str) -> tuple[str, str]:
        errors = self._counts["tool_errors"]
        errors[kind] = errors.get(kind, 0) + 1
        return name, f"Error: {message}"

    # --- endings --------------------------------------------------------------------------

    def _end(self, score: Score | None, ended_by: str):
        """End the episode: scored when the model answered (or an infrastructure error), else reward 0."""
        self._done = True
        terminated = ended_by == "answer"
        if score is None:
            score = Score(0.0, "no_answer", info={"ended_by": ended_by})
        info = self._info(score)
        info["final_reward"] = float(score.value)
        return self._observation(), float(score.value), terminated, not terminated, info

    def _info(self, score: Score | None) -> dict[str, Any]:
        counts = self._counts
        info: dict[str, Any] = {}
        if score is not None:
            info = self.outcome(score)
            info["ended_by"] = score.info.get("ended_by", "answer") if score.reason != ERROR else "error"
            if info["ended_by"] != "answer":
                info["correct"] = False
        info.update(turn=counts["turns"], tool_calls=counts["tool_calls"],
                    tool_errors=dict(counts["tool_errors"]), tokens=counts["tokens"])
        return info


__all__ = ["ENDINGS", "MAX_HUNG_CALLS", "ToolEnv", "ToolTimeout", "approximate_tokens", "call_within"]
