"""`rlvr eval --endpoint`: whole episodes of any env against a served model (OpenAI-compatible API).

`EndpointGenerator` is a message generator (trainer/rollout/sessions.py) for the one episode loop
(trainer/rollout/loop.py): reset -> messages -> the endpoint -> `env.step(reply)` -> the next
observation, until the env ends the episode, so multi-turn envs are evaluated on every turn.
Episodes do not wait for each other: a turn is sent as soon as the env has answered the last
one, at most `endpoint.max_concurrency` requests in flight. A request that fails for good
(outage, timeout after retries) ends its episode as `error`. pass@k is computed over each
episode's final outcome (`rlvr.evaluation.passk.evaluate_pass_at_k`).

Tool envs (`ToolEnv`, e.g. rlvr/ToolMath-v0) are told their tools as the OpenAI API does: the
env's tool schemas go in the request's `tools=`, each assistant turn that called tools carries
`tool_calls` with ids, and each tool message the `tool_call_id` of the call it answers. Many
chat templates ignore `tools=` (SmolLM2's on llama.cpp does), so the tools are also described
in the system message in the env's format (`tool_prompt=False` leaves that out). A server
that returns structured `tool_calls` has them written back into the env's call format, so
the env reads the same calls either way. A parser with its own call format (```python
blocks) gets only its own description, as in training.

The client itself (`ChatEndpoint`, `EndpointError`, `api_base`) lives in `rlvr.openai_client`,
which the LLM judge uses without importing envs.
"""

from __future__ import annotations

import json
from concurrent.futures import FIRST_COMPLETED, ThreadPoolExecutor, wait
from typing import Any

from rlvr.envs.tool_calls import HermesParser, ToolCall
from rlvr.evaluation.passk import evaluate_pass_at_k
from rlvr.openai_client import ChatEndpoint, EndpointError
from rlvr.trainer.rollout.chat import tool_messages
from rlvr.trainer.rollout.envs import call_parser
from rlvr.trainer.rollout.sessions import BatchSession, Turn


class ToolWire:
    """One tool env episode's conversation in the OpenAI form, and the server's calls in the env's form."""

    def __init__(self, env, first_messages: list[dict[str, Any]], tool_prompt: bool = True):
        self.env, unwrapped = env, env.unwrapped
        self.schemas = unwrapped.tool_schemas
        self.own_format = unwrapped.tool_prompt  # the parser's own call format, or None (tools=)
        self.tool_prompt = tool_prompt
        self.parser = unwrapped.parser
        self.prompt_turns = sum(m["role"] == "assistant" for m in first_messages)  # worked examples
        self.structured: dict[int, str] = {}  # reply number -> its content apart from the server's tool_calls

    def request(self, observation: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], dict[str, Any]]:
        """(messages, extra request fields) for the next assistant turn."""
        messages: list[dict[str, Any]] = []
        pending: list[str] = []  # ids of the last assistant turn's calls, answered in order by tool messages
        turn = calls = 0
        for m in observation:
            if m["role"] == "assistant":
                parsed = self.parser(m["content"]).calls
                ids = [f"call_{calls + i}" for i in range(len(parsed))]
                calls += len(parsed)
                content = self.structured.get(turn - self.prompt_turns, m["content"])
                turn += 1
                message: dict[str, Any] = {"role": "assistant", "content": content}
                if parsed:
                    message["tool_calls"] = [_openai_call(i, c) for i, c in zip(ids, parsed)]
                messages.append(message)
                pending = ids
            elif m["role"] == "tool":
                messages.append({**m, "tool_call_id": pending.pop(0) if pending else f"call_{calls}"})
            else:
                messages.append(dict(m))
        if self.own_format or self.tool_prompt:
            messages = tool_messages(messages, self.env)
        return messages, {} if self.own_format else {"tools": self.schemas}

    def reply_text(self, message: dict[str, Any], number: int) -> str:
        """The reply as the env reads it: structured `tool_calls` written in the env's call format."""
        if not message["tool_calls"]:
            return message["content"]
        self.structured[number] = message["content"]
        write = getattr(self.parser, "format_call", HermesParser.format_call)
        written = []
        for call in message["tool_calls"]:
            function = call.get("function") if isinstance(call, dict) else None
            function = function if isinstance(function, dict) else {}
            arguments = function.get("arguments", {})
            try:
                arguments = json.loads(arguments) if isinstance(arguments, str) else arguments
            except ValueError:
                pass  # kept as text: the env tells the model its arguments are not a JSON object
            try:
                written.append(write(str(function.get("name", "")), arguments))
            except (KeyError, TypeError):  # a call this format cannot write
                written.append(HermesParser.format_call(str(function.get("name", "")), arguments))
        return "\n".join(filter(None, [message["content"], *written]))


def _openai_call(call_id: str, call: Any) -> dict[str, Any]:
    if isinstance(call, ToolCall):
        function = {"name": call.name, "arguments": json.dumps(call.arguments)}
    else:  # a call the env could not read: its tool message says why
        function = {"name": "unreadable_call", "arguments": "{}"}
    return {"id": call_id, "type": "function", "function": function}


# --- the served model as a generator ---------------------------------------------------


class EndpointGenerator:
    """A served model as a message generator: each turn is one chat request (the sampling settings as
    max_tokens, temperature (0 when greedy), top_p, and seed = the prompt's seed + the episode's number;
    `params` are added to every request). `tool_prompt=False` describes a tool env's tools only in
    `tools=`, for servers whose chat template renders them. `logprobs=True` asks for each sampled
    token's log-prob; a turn carries them where the server gives them (`Turn.logps`)."""

    def __init__(self, endpoint: ChatEndpoint, tool_prompt: bool = True, params: dict[str, Any] | None = None,
                 logprobs: bool = False):
        self.endpoint, self.tool_prompt = endpoint, tool_prompt
        # top_logprobs 1: llama.cpp's server sends no log-probs without it (the OpenAI API defines it, 0 to 20)
        self.params = {**({"logprobs": True, "top_logprobs": 1} if logprobs else {}), **(params or {})}

    def start(self, batch: Any, settings: Any) -> _EndpointSession:
        return _EndpointSession(self, batch, settings)


class _EndpointSession(BatchSession):
    def __init__(self, generator: EndpointGenerator, batch: Any, settings: Any):
        super().__init__(batch, settings)
        self.endpoint = generator.endpoint
        self.params = {"max_tokens": settings.max_new_tokens, "temperature": 0.0 if settings.greedy else
                       settings.temperature, "top_p": settings.top_p,
                       **({"stop": list(settings.stop)} if settings.stop else {}), **generator.params}
        self.parsers = [call_parser(env) for env in batch.envs] if batch.multiturn else None
        first = [batch.prompts[r // self.n] for r in range(len(batch.envs))]
        self.wires = [ToolWire(env, messages, generator.tool_prompt)
                      if getattr(env.unwrapped, "tool_schemas", None) else None
                      for env, messages in zip(batch.envs, first)]
        self.replies = [0] * len(first)
        self.pool = ThreadPoolExecutor(max_workers=self.endpoint.max_concurrency)
        self.pending: dict[Any, int] = {}
        for row, messages in enumerate(first):
            self._send(row, messages)

    def _send(self, row: int, observation: list[dict[str, Any]]) -> None:
        wire = self.wires[row]
        messages, extra = wire.request(observation) if wire else (observation, {})
        seed = self.batch.seeds[row // self.n] + row % self.n
        self.pending[self.pool.submit(self.endpoint.message, messages, **self.params, seed=seed, **extra)] = row

    def turns(self) -> list[Turn]:
        if not self.pending:
            return []
        done, _ = wait(self.pending, return_when=FIRST_COMPLETED)
        out = []
        for future in done:
            row = self.pending.pop(future)
            try:
                message = future.result()
            except EndpointError as exc:
                out.append(Turn(row, error=str(exc)))
                continue
            wire = self.wires[row]
            text = wire.reply_text(message, self.replies[row]) if wire else message["content"]
            out.append(Turn(row, text=self._stopped(row, text, message["finish_reason"]), logps=message["logprobs"]))
            self.replies[row] += 1
        return out

    def _stopped(self, row: int, text: str, finish_reason: str | None) -> str:
        """The turn as the loop's other generators end it: a server leaves a matched stop string out of the
        text (the OpenAI API's rule), so a turn stopped at the end of a call gets its end marker back: the
        stop string that completes a call the env parser can read. (A turn that ended at an end-of-turn
        token has the same finish reason; the marker after it would complete no call.)"""
        if finish_reason != "stop" or self.parsers is None:
            return text
        parse = self.parsers[row]

        def calls(t: str) -> int:
            return sum(isinstance(c, ToolCall) for c in parse(t).calls)

        return next((text + stop for stop in self.settings.stop if calls(text + stop) > calls(text)), text)

    def extend(self, row: int, messages: list[dict[str, Any]], reply_ids: Any) -> None:
        self._send(row, messages)

    def close(self) -> None:
        self.pool.shutdown(wait=True, cancel_futures=True)


def evaluate_endpoint(env_id: str, endpoint: ChatEndpoint, *, tool_prompt: bool = True,
                      params: dict[str, Any] | None = None, logprobs: bool = False, **kwargs: Any):
    """pass@k of the served model on `env_id`: `evaluate_pass_at_k` (its keyword arguments: n, ks,
    limit, max_new_tokens, ...) over an `EndpointGenerator`, `endpoint.max_concurrency` requests at a time.
    `logprobs=True`: each kept sample records the server's log-prob of every token it sampled.

    An episode the server failed (outage, timeout after retries) counts as not correct and
    is reported under the reason `error` (`result.reasons["error"]`).
    """
    # tasks per batch: enough episodes to keep requests in flight
    kwargs.setdefault("batch_size", max(8, -(-2 * endpoint.max_concurrency // kwargs.get("n", 1))))
    return evaluate_pass_at_k(env_id, EndpointGenerator(endpoint, tool_prompt, params, logprobs), **kwargs)
