"""rlvr envs as OpenEnv servers (`rlvr serve-env ID`), built with openenv-core's own server.

OpenEnv (package `openenv-core`) serves an environment over HTTP and WebSocket: `reset`, `step`,
`state` and `schema`. Its stateful sessions are the WebSocket ones (`/ws`): openenv-core calls the
environment factory once per connection, so each session plays its own rlvr env instance and no
two sessions see each other's episode. (Its HTTP `/reset` and `/step` build a fresh env per
request, so they cannot carry an episode across calls; that is OpenEnv's design, kept as it is.)

The wire format, as `GET /schema` also says:

- action: `{"message": str}`, the model's completion for this turn;
- observation: `messages` (the conversation so far, chat messages, tool replies included),
  `info` (rlvr's reset or step info: task id, the composite score with its breakdown and
  reasons, `correct`, turn and tool counts), `tools` and `tool_prompt` (how the env's tools are
  described to the model), `truncated`, plus OpenEnv's `reward` and `done`;
- reset data: `seed` and `index` (rlvr's `options={"index": i}`); OpenEnv drops other keys.

A step the env refuses (after the episode ended, or a bad action) is an OpenEnv error reply;
the session stays open.
"""

from __future__ import annotations

import json
from typing import Any

from openenv.core.env_server import Action, Environment, Observation, State, create_app
from pydantic import Field

DEFAULT_MAX_SESSIONS = 64


class RlvrAction(Action):
    """One assistant turn."""

    message: str = Field(description="the model's completion for this turn (plain text)")


class RlvrObservation(Observation):
    """The conversation after a reset or a step, with rlvr's info about it."""

    messages: list[dict[str, Any]] = Field(default_factory=list, description="chat messages so far")
    info: dict[str, Any] = Field(default_factory=dict, description="rlvr's reset or step info (score, correct...)")
    tools: list[dict[str, Any]] = Field(default_factory=list, description="JSON schemas of the env's tools")
    tool_prompt: str | None = Field(default=None, description="how the env's parser wants its tools described")
    truncated: bool = Field(default=False, description="the episode was stopped by a limit, not ended by the model")


class RlvrState(State):
    env_id: str = ""
    task_id: str | None = None
    done: bool = True


def _plain(value: Any) -> Any:
    """`value` as plain JSON data (infos may hold tuples, numpy scalars and the like)."""
    return json.loads(json.dumps(value, default=str))


def environment_class(env_id: str, env_kwargs: dict[str, Any] | None = None) -> type[Environment]:
    """An OpenEnv `Environment` class playing rlvr env `env_id`; each instance makes its own env."""
    from rlvr.envs import make

    kwargs = dict(env_kwargs or {})
    make(env_id, **kwargs).close()  # an unknown id or bad kwargs fail here, not in the first session

    class RlvrEnvironment(Environment):
        SUPPORTS_CONCURRENT_SESSIONS = True  # one rlvr env per instance; rewards are shared read-only

        def __init__(self) -> None:
            super().__init__()
            self.env = make(env_id, **kwargs)
            self._state = RlvrState(env_id=env_id)

        def reset(self, seed: int | None = None, episode_id: str | None = None, index: int | None = None,
                  **_: Any) -> RlvrObservation:
            options = None if index is None else {"index": index}
            messages, info = self.env.reset(seed=seed, options=options)
            unwrapped = self.env.unwrapped
            self._state = RlvrState(env_id=env_id, episode_id=episode_id, task_id=info.get("task_id"), done=False)
            return RlvrObservation(messages=messages, info=_plain(info),
                                   tools=getattr(unwrapped, "tool_schemas", None) or [],
                                   tool_prompt=getattr(unwrapped, "tool_prompt", None))

        def step(self, action: RlvrAction, timeout_s: float | None = None, **_: Any) -> RlvrObservation:
            messages, reward, terminated, truncated, info = self.env.step(action.message)
            self._state.step_count += 1
            self._state.done = bool(terminated or truncated)
            return RlvrObservation(messages=messages, info=_plain(info), reward=float(reward),
                                   done=self._state.done, truncated=bool(truncated))

        @property
        def state(self) -> RlvrState:
            return self._state

        def close(self) -> None:
            self.env.close()

    RlvrEnvironment.__name__ = RlvrEnvironment.__qualname__ = f"Rlvr[{env_id}]"
    return RlvrEnvironment


def create_env_app(env_id: str, env_kwargs: dict[str, Any] | None = None, *,
                   max_sessions: int = DEFAULT_MAX_SESSIONS, session_timeout: float | None = None):
    """openenv-core's FastAPI app serving `env_id`, at most `max_sessions` WebSocket sessions at once."""
    from openenv.core.env_server import ConcurrencyConfig

    config = ConcurrencyConfig(max_concurrent_envs=max_sessions, session_timeout=session_timeout)
    return create_app(environment_class(env_id, env_kwargs), RlvrAction, RlvrObservation,
                      env_name=env_id, concurrency_config=config)


__all__ = ["RlvrAction", "RlvrObservation", "RlvrState", "create_env_app", "environment_class"]
