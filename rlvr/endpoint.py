"""`rlvr eval --endpoint`: whole episodes of any env against a served model (OpenAI-compatible API).

`evaluate_endpoint` runs episodes through the Gymnasium API: reset -> messages -> the endpoint
-> `env.step(reply)` -> the next observation, until the env ends the episode, so multi-turn
envs are evaluated on every turn. pass@k is computed over each episode's final outcome.

Tool envs (`ToolEnv`, e.g. rlvr/ToolMath-v0) are told their tools as the OpenAI API does: the
env's tool schemas go in the request's `tools=`, each assistant turn that called tools carries
`tool_calls` with ids, and each tool message the `tool_call_id` of the call it answers. Many
chat templates ignore `tools=` (SmolLM2's on llama.cpp does), so the tools are also described
in the system message in the env's format (`tool_prompt=False` leaves that out). A server
that returns structured `tool_calls` has them written back into the env's call format, so
the env reads the same calls either way. A parser with its own call format (```python
blocks) gets only its own description, as in training.

The client itself (`ChatEndpoint`, `EndpointError`, `api_base`) lives in `rlvr.openai_client`,
which the LLM judge uses without importing envs; it is importable from here too.
"""

from __future__ import annotations

import json
import threading
from collections import Counter
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from rlvr.envs.tool_calls import HermesParser, ToolCall
from rlvr.envs.tools import with_tool_prompt
from rlvr.openai_client import API_KEY_ENV, RETRY_STATUS, ChatEndpoint, EndpointError, api_base

MAX_EPISODE_TURNS = 32  # a safety bound on envs that never end an episode


class ToolWire:
    """One tool env episode's conversation in the OpenAI form, and the server's calls in the env's form."""

    def __init__(self, env, first_messages: list[dict[str, Any]], tool_prompt: bool = True):
        unwrapped = env.unwrapped
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
        if self.own_format:
            return with_tool_prompt(messages, self.schemas, self.own_format), {}
        if self.tool_prompt:
            messages = with_tool_prompt(messages, self.schemas)
        return messages, {"tools": self.schemas}

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


# --- evaluation of a served model ------------------------------------------------------


def run_episode(env, endpoint: ChatEndpoint, index: int, params: dict[str, Any],
                tool_prompt: bool = True) -> dict[str, Any]:
    """One episode of task `index` through the Gymnasium API; the served model answers every turn."""
    observation, _ = env.reset(options={"index": index})
    wire = ToolWire(env, observation, tool_prompt) if getattr(env.unwrapped, "tool_schemas", None) else None
    replies: list[str] = []
    info: dict[str, Any] = {}
    reward = 0.0
    for _ in range(MAX_EPISODE_TURNS):
        messages, extra = wire.request(observation) if wire else (observation, {})
        try:
            message = endpoint.message(messages, **params, **extra)
        except EndpointError as exc:
            return {"correct": False, "reward": 0.0, "reason": "error", "error": str(exc), "replies": replies,
                    "task_id": env.unwrapped.task.task_id, "turns": len(replies)}
        reply = wire.reply_text(message, len(replies)) if wire else message["content"]
        replies.append(reply)
        observation, reward, terminated, truncated, info = env.step(reply)
        if terminated or truncated:
            break
    outcome = {"correct": bool(info.get("correct")), "reward": float(info.get("final_reward", reward)),
               "reason": info.get("score", {}).get("reason"), "replies": replies, "task_id": info.get("task_id"),
               "turns": len(replies)}
    if wire:
        outcome.update(tool_calls=info.get("tool_calls", 0), ended_by=info.get("ended_by"))
    return outcome


def evaluate_endpoint(env_id: str, endpoint: ChatEndpoint, *, n: int = 1, ks: Sequence[int] = (1,),
                      limit: int | None = None, env_kwargs: dict[str, Any] | None = None, max_tokens: int = 256,
                      temperature: float | None = None, top_p: float = 1.0, seed: int = 0,
                      keep_samples: bool = False, progress: bool = True, tool_prompt: bool = True):
    """pass@k of the served model on `env_id`: n episodes per task, `endpoint.max_concurrency` at a time.

    `tool_prompt=False` describes a tool env's tools only in `tools=`, for servers whose chat template
    renders them (otherwise they are in the system message too).

    An episode the server failed (outage, timeout after retries) counts as not correct and
    is reported under the reason `error` (`result.reasons["error"]`).
    """
    import sys

    from tqdm import tqdm

    from rlvr.envs import make
    from rlvr.evaluate import DEFAULT_GENERATED_ITEMS, EvalResult, pass_at_k

    if not isinstance(n, int) or n < 1:
        raise ValueError(f"n must be a positive int, got {n!r}")
    if any(not isinstance(k, int) or not 1 <= k <= n for k in ks):
        raise ValueError(f"every k must be in 1..n (n={n}), got {list(ks)}")
    probe = make(env_id, **(env_kwargs or {}))
    size = probe.unwrapped.source.size
    probe.close()
    total = size if size is not None else DEFAULT_GENERATED_ITEMS
    if limit is not None:
        if not isinstance(limit, int) or limit < 1:
            raise ValueError(f"limit must be a positive int, got {limit!r}")
        total = min(total, limit)
    greedy = temperature is None and n == 1
    local = threading.local()
    envs: list[Any] = []

    def episode(unit: tuple[int, int]) -> tuple[int, dict[str, Any]]:
        index, sample = unit
        if not hasattr(local, "env"):
            local.env = make(env_id, **(env_kwargs or {}))
            envs.append(local.env)
        params = {"max_tokens": max_tokens, "temperature": 0.0 if greedy else (1.0 if temperature is None else temperature),
                  "top_p": top_p, "seed": seed * 1_000_003 + index * n + sample}
        return index, run_episode(local.env, endpoint, index, params, tool_prompt)

    units = [(i, j) for i in range(total) for j in range(n)]
    outcomes: dict[int, list[dict[str, Any]]] = {i: [] for i in range(total)}
    with ThreadPoolExecutor(max_workers=endpoint.max_concurrency) as pool, \
            tqdm(total=len(units), desc=f"eval {env_id}", unit="episode", disable=not progress, file=sys.stderr) as bar:
        for index, outcome in pool.map(episode, units):
            outcomes[index].append(outcome)
            bar.update(1)
    for env in envs:
        env.close()
    reasons: Counter[str] = Counter()
    samples = []
    sums = dict.fromkeys(ks, 0.0)
    reward_sum = 0.0
    for index in range(total):
        correct = sum(o["correct"] for o in outcomes[index])
        for k in ks:
            sums[k] += pass_at_k(n, correct, k)
        for o in outcomes[index]:
            reward_sum += o["reward"]
            if o["reason"]:
                reasons[o["reason"]] += 1
            if keep_samples:
                samples.append({"task_id": o["task_id"], "completion": o["replies"][-1] if o["replies"] else "",
                                "turns": o["turns"], "replies": o["replies"], "reward": o["reward"],
                                "correct": o["correct"], "reason": o["reason"],
                                **{k: o[k] for k in ("error", "tool_calls", "ended_by") if k in o}})
    return EvalResult(env=env_id, items=total, n=n, pass_at={k: sums[k] / total for k in ks},
                      mean_reward=reward_sum / (total * n), reasons=dict(reasons.most_common()), samples=samples)


def run_eval(args: Any, env_kwargs: dict[str, Any], ks: Sequence[int]):
    """`rlvr eval --endpoint URL --model NAME`: check the server answers, then evaluate (one-line errors)."""
    from rlvr.cli import UsageError

    if args.policy or not args.model:
        raise UsageError("rlvr eval: --endpoint URL goes with --model NAME (the served model's name), not --policy")
    if args.concurrency < 1 or args.timeout <= 0:
        raise UsageError("rlvr eval: --concurrency must be at least 1 and --timeout positive")
    try:
        endpoint = ChatEndpoint(args.endpoint, args.model, timeout=args.timeout, max_concurrency=args.concurrency)
    except ValueError as exc:
        raise UsageError(f"rlvr eval: {exc}") from None
    try:
        endpoint.check()
    except EndpointError as exc:
        raise UsageError(f"rlvr eval: the endpoint did not answer ({exc})") from None
    try:
        return evaluate_endpoint(args.env, endpoint, n=args.n, ks=ks, limit=args.limit, env_kwargs=env_kwargs,
                                 max_tokens=args.max_new_tokens, temperature=args.temperature, top_p=args.top_p,
                                 seed=args.seed, keep_samples=bool(args.output), progress=not args.no_progress)
    finally:
        endpoint.close()


__all__ = ["API_KEY_ENV", "MAX_EPISODE_TURNS", "RETRY_STATUS", "ChatEndpoint", "EndpointError", "ToolWire", "api_base",
           "evaluate_endpoint", "run_episode", "run_eval"]
