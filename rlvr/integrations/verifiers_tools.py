"""A verifiers (0.4) taskset whose tasks have tools, as an rlvr tool env (`rlvr/Verifiers-v0` picks it).

Each episode runs the task's lifecycle the way a verifiers rollout (`Rollout.open`/`close`) does: a
subprocess runtime, the task's `setup` hook on it, the interception server's state and task channel
(the tool server fetches its task there and runs `setup_task`), `serve_tools` to launch the task's
servers in that runtime, and verifiers' own MCP client (`connect_mcp`, `call_mcp`, as its null harness
calls them). The taskset's own (shared) toolsets are started once per env with `serve_shared`, as
`Env.shared_tools` does, joined to every episode and stopped at `close`. The tools keep the names,
descriptions and JSON schemas that verifiers advertises. The model's calls, read by the env's parser
(`<tool_call>` JSON), go to the servers; the results come back as tool messages.

When the model answers, the servers and the interception stop, and the whole conversation becomes a
verifiers trace (assistant turns with their tool calls, tool messages with their call ids, the tools on
the root node, the trace state that `setup` and the servers left). In `VerifiersRubric`'s worker
process the task's `finalize` then runs and its own `score`, with the episode's runtime, so rewards that
need a runtime run too: the weighted total is the reward, each verifiers reward a component. The
episode's end (scored, a limit, an error, the next reset or `close`) stops the runtime, which reaps its
processes. A toolset that fails (it does not start, its server dies, a call gets no answer within
`tool_timeout`) or a hook that raises is the infrastructure's failure: the episode ends as `error`,
never 0. A call that the tool itself rejects (bad arguments) is the model's: the server's error text
comes back as the tool message.
"""

from __future__ import annotations

import asyncio
import atexit
import json
import threading
import weakref
from concurrent.futures import Future
from contextlib import AsyncExitStack
from typing import Any

import verifiers.v1 as vf
from verifiers.v1.clients import ModelContext
from verifiers.v1.configs.client import EvalClientConfig
from verifiers.v1.harnesses.utils.mcp import call_mcp, connect_mcp
from verifiers.v1.interception import serve_interception
from verifiers.v1.mcp import serve_shared, serve_tools
from verifiers.v1.session import RolloutSession
from verifiers.v1.state import state_cls

from rlvr.envs.base import action_text
from rlvr.envs.tool_calls import CallError
from rlvr.envs.tool_env import ToolEnv
from rlvr.envs.tools import ToolUnavailable
from rlvr.integrations.verifiers_env import rollout_runtime, start_rollout
from rlvr.verifiers.core import ERROR, Score

STARTUP_TIMEOUT = 120.0  # seconds for a toolset's servers to come up (a loaded machine starts Python slowly)
STOP_TIMEOUT = 30.0

_loop: asyncio.AbstractEventLoop | None = None
_loop_lock = threading.Lock()
_open: weakref.WeakSet = weakref.WeakSet()  # live episodes, stopped at exit if an env was never closed


def _background_loop() -> asyncio.AbstractEventLoop:
    """One event loop thread per process for every episode's servers: it lives as long as the process,
    so the servers' parent-death signal (verifiers sets it on the launching thread) never fires early."""
    global _loop
    with _loop_lock:
        if _loop is None:
            _loop = asyncio.new_event_loop()
            threading.Thread(target=_loop.run_forever, name="rlvr-verifiers-tools", daemon=True).start()
        return _loop


class _Served:
    """A coroutine (`_serve`) on the background loop that holds what it started until `stop`: it sets
    `_ready` once up, then waits for `_release`; `stop` releases it (or cancels a start still under way)
    and waits for its end."""

    def __init__(self):
        self._loop = _background_loop()
        self._ready: Future = Future()
        self._release = asyncio.Event()

    def _start(self) -> Any:
        """Start serving; what `_serve` made ready (stopped again and raised if it did not start)."""
        self._served = asyncio.run_coroutine_threadsafe(self._serve(), self._loop)
        _open.add(self)
        try:
            return self._ready.result(timeout=STARTUP_TIMEOUT)
        except BaseException:
            self.stop()
            raise

    async def _serve(self) -> None:
        raise NotImplementedError

    def _wind_down(self) -> None:
        self._loop.call_soon_threadsafe(self._release.set)

    def stop(self) -> None:
        """Stop what was started (its processes reaped) and wait for it."""
        if self._ready.done():
            self._wind_down()
        else:
            self._loop.call_soon_threadsafe(self._served.cancel)
        try:
            self._served.result(timeout=STOP_TIMEOUT)
        except BaseException:  # noqa: BLE001  (a failure is already the episode's error; stopping goes on)
            pass
        _open.discard(self)


class ToolsetEpisode(_Served):
    """The toolsets of one task for one episode: started here; `finish` stops the servers for scoring,
    `stop` the runtime too."""

    def __init__(self, task: vf.Task, timeout: float, shared: dict[str, Any] | None = None):
        super().__init__()
        self.task, self.timeout, self.shared = task, timeout, shared or {}
        self._servers_down: Future = Future()
        self._queue: asyncio.Queue | None = None
        self.schemas: list[dict[str, Any]] = self._start()

    async def _serve(self) -> None:
        task = self.task
        trace = vf.Trace(task=vf.TraceTask(type=type(task).__name__, data=task.data, key=task.key, hash=task.hash),
                         agent=vf.AgentInfo(config=vf.AgentConfig()), state=state_cls(type(task))())
        # No model turn goes through this interception: it serves the tool servers' /task and /state only.
        session = RolloutSession(ctx=ModelContext(model="rlvr", client=EvalClientConfig(
            base_url="http://127.0.0.1:9/v1", api_key_var="RLVR_UNUSED_KEY")), trace=trace)
        runtime = rollout_runtime(task, f"rlvr-{trace.id}")
        try:
            await start_rollout(task, trace, runtime)  # setup before the servers, as in a rollout
            toolsets = type(task).toolsets(task.config)
            async with AsyncExitStack() as stack:
                base_url, _, state_secret = await stack.enter_async_context(
                    serve_interception(None, runtime, session, toolsets, self.shared))
                urls = await stack.enter_async_context(serve_tools(
                    toolsets, runtime, shared=self.shared, state_secret=state_secret, state_route=trace.id,
                    state_base=base_url))
                config = {"mcpServers": {name: {"url": url, "timeout": self.timeout} for name, url in urls.items()}}
                schemas, dispatch, servers = await connect_mcp(config, stack)
                self._queue = asyncio.Queue()
                self._ready.set_result(schemas)
                while (request := await self._queue.get()) is not None:
                    name, arguments, reply = request
                    try:
                        reply.set_result(await asyncio.wait_for(call_mcp(servers, dispatch, name, arguments),
                                                                self.timeout))
                    except Exception as exc:  # noqa: BLE001  (handed to the caller as the toolset's failure)
                        reply.set_exception(exc)
            # Servers down, runtime up: finalize and the rewards run on it (`finish`), then `stop`.
            self._servers_down.set_result((trace.state.model_copy(deep=True), str(runtime.workdir)))
            await self._release.wait()
        except BaseException as exc:
            for waiting in (self._ready, self._servers_down):
                if not waiting.done():
                    waiting.set_exception(exc)
            raise
        finally:
            await runtime.stop()

    def call(self, name: str, arguments: dict[str, Any]) -> str:
        """The tool's reply; `ToolUnavailable` when the servers failed or gave no answer in time."""
        if self._served.done() or self._queue is None:
            raise ToolUnavailable("the toolset's servers are down")
        reply: Future = Future()
        self._loop.call_soon_threadsafe(self._queue.put_nowait, (name, arguments, reply))
        try:
            content = reply.result(timeout=self.timeout + 5)
        except Exception as exc:
            cause = exc
            while getattr(cause, "exceptions", None):  # the MCP client's task groups wrap the cause
                cause = cause.exceptions[0]
            raise ToolUnavailable(f"tool {name} failed in its server: {type(cause).__name__}: {cause}"[:500]) from exc
        return content if isinstance(content, str) else json.dumps(content)

    def finish(self) -> tuple[Any, str]:
        """Stop the servers and the interception; (the trace state they left, the runtime's work folder),
        the runtime still up for scoring. Raises when the episode's servers or runtime failed."""
        if self._queue is not None and not self._served.done():
            self._loop.call_soon_threadsafe(self._queue.put_nowait, None)
        return self._servers_down.result(timeout=STOP_TIMEOUT)

    def _wind_down(self) -> None:  # the servers first (if `finish` did not stop them), then the runtime
        if self._queue is not None:
            self._loop.call_soon_threadsafe(self._queue.put_nowait, None)
        super()._wind_down()


class SharedToolsets(_Served):
    """A taskset's shared toolsets, started once with verifiers' `serve_shared` and held until `stop`."""

    def __init__(self, toolsets: list):
        super().__init__()
        self.toolsets = toolsets
        self.servers: dict[str, Any] = self._start()

    async def _serve(self) -> None:
        try:
            async with serve_shared(self.toolsets) as servers:
                self._ready.set_result(servers)
                await self._release.wait()
        except BaseException as exc:
            if not self._ready.done():
                self._ready.set_exception(exc)
            raise


@atexit.register
def _stop_all() -> None:
    for episode in list(_open):
        episode.stop()


class _Tool:
    """One of the episode's tools, as ToolEnv calls it: through the episode's MCP client."""

    def __init__(self, env: VerifiersToolEnv, name: str):
        self.env, self.name = env, name

    def __call__(self, **arguments: Any) -> str:
        return self.env._toolsets.call(self.name, arguments)


class _KeptParses:
    """The env's parser, keeping what it read of each assistant turn, so the trace's calls are not parsed twice."""

    def __init__(self, parser):
        self.parser, self.turns = parser, []

    def __call__(self, text: str):
        self.turns.append(self.parser(text))  # ToolEnv.step parses each assistant turn once
        return self.turns[-1]

    def __getattr__(self, name: str) -> Any:  # the parser's own API (`describe`, `format_call`)
        return getattr(self.parser, name)


class VerifiersToolEnv(ToolEnv):
    """A tool env over `VerifiersTasks` whose tasks declare toolsets (options as `ToolEnv`'s).

    `tool_timeout` bounds a toolset's startup answer and each call; past it the episode is an error.
    """

    def __init__(self, source, *, tool_timeout: float = 60.0, max_turns: int = 8, max_tool_calls: int = 8,
                 **options: Any):
        # ToolEnv's own per-call limit would tell the model of a timeout; ours ends the episode first.
        super().__init__(source, tool_timeout=tool_timeout + 30, max_turns=max_turns,
                         max_tool_calls=max_tool_calls, **options)
        self.call_timeout = float(tool_timeout)
        self.parser = _KeptParses(self.parser)
        self._toolsets: ToolsetEpisode | None = None
        self._shared: SharedToolsets | None = None
        self._failure: str | None = None
        self._turns: list[dict[str, Any]] = []

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        self._stop_toolsets()
        observation, info = super().reset(seed=seed, options=options)
        self._failure, self._turns, self.tools = None, [], {}
        self.parser.turns = []
        try:
            if self.source.shared_toolsets and self._shared is None:
                self._shared = SharedToolsets(self.source.shared_toolsets)
            shared = self._shared.servers if self._shared is not None else None
            self._toolsets = ToolsetEpisode(self.source.tasks[self._index], self.call_timeout, shared)
        except Exception as exc:  # noqa: BLE001  (the first step ends the episode as an error)
            self._failure = f"the task's setup or toolsets did not start: {type(exc).__name__}: {exc}"[:500]
        else:
            self.tools = {s["function"]["name"]: (_Tool(self, s["function"]["name"]), s)
                          for s in self._toolsets.schemas}
        info["tools"] = self.tool_schemas
        return observation, info

    def step(self, action: Any):
        if self._failure is not None and not self._done:
            self._counts["turns"] += 1
            self._messages.append({"role": "assistant", "content": action_text(action)})
            result = self._end(Score(0.0, ERROR, info={"toolset": self._failure}), "error")
        else:
            result = super().step(action)
            self._record_turn()
        if result[2] or result[3]:
            self._stop_toolsets()
        return result

    def close(self) -> None:
        self._stop_toolsets()
        shared, self._shared = self._shared, None
        if shared is not None:
            shared.stop()
        super().close()

    def scoring_inputs(self):
        """The final answer is scored on the whole episode: the rubric builds the verifiers trace of it, with
        the trace state, and runs finalize and the rewards on the episode's runtime (its servers stopped)."""
        reward, reference, fields = super().scoring_inputs()
        self._record_turn()
        fields["vf_turns"] = list(self._turns)
        fields["vf_tools"] = self.tool_schemas
        try:
            fields["vf_state"], fields["vf_runtime"] = self._toolsets.finish()
        except Exception:  # noqa: BLE001  (no runtime to score on: the rubric reports the episode as an error)
            fields["vf_state"], fields["vf_runtime"] = None, ""
        return reward, reference, fields

    def _record_turn(self) -> None:
        """The turns since the last record as verifiers messages: an assistant turn with its parsed calls
        (the call ids tie the tool messages that follow to them), then the tool replies."""
        new = self._messages[len(self._prompt_messages(self.task)) + len(self._turns):]
        calls: list[str] = []
        for message in new:
            if message["role"] == "assistant":
                turn = len([t for t in self._turns if t["role"] == "assistant"])
                parsed = self.parser.turns[turn].calls
                calls = [f"call_{turn}_{k}" for k in range(len(parsed))]
                tool_calls = [{"id": i, "name": c.name, "arguments": json.dumps(c.arguments)}
                              for i, c in zip(calls, parsed) if not isinstance(c, CallError)]
                self._turns.append({"role": "assistant", "content": message["content"],
                                    "tool_calls": tool_calls or None})
            elif message["role"] == "tool":
                self._turns.append({"role": "tool", "content": message["content"],
                                    "tool_call_id": calls.pop(0) if calls else "call_unmatched"})

    def _stop_toolsets(self) -> None:
        toolsets, self._toolsets = self._toolsets, None
        if toolsets is not None:
            toolsets.stop()


__all__ = ["SharedToolsets", "ToolsetEpisode", "VerifiersToolEnv"]
