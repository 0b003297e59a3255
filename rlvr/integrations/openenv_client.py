"""Any OpenEnv server as an rlvr env: `gym.make("rlvr/OpenEnv-v0", url="http://host:port")`.

An OpenEnv server (package `openenv-core`) plays one environment per WebSocket session. This env
opens such a session with OpenEnv's own client (`GenericEnvClient`) and maps it onto rlvr's
contract, so `rlvr train` and `rlvr eval` run it as a multi-turn env:

- the action is the completion text, sent as the action field the server's `GET /schema` asks
  for (`action_field=` when it has more than one required string field);
- the observation is a conversation. A server that sends `messages` (an rlvr env served by
  `rlvr serve-env`) gives its own, tool replies and tool schemas included, and its rlvr info
  (composite score, breakdown, reasons) comes through as it is. Otherwise the observation's
  text fields (`prompt_fields=`, default: all non-empty strings) become a user message;
- the step reward is the server's; `correct` is `reward >= success_reward` (default: > 0);
- `reset(seed=s)` sends `seed`; `reset(options={"index": i})` sends `index` (and `seed=i`).
  GRPO groups reset G copies with one seed: they share a prompt only if the server's reset
  honours the seed.

Failures are the server's, never the model's: a server that is down, answers later than
`timeout` seconds, closes the session, or sends data that does not fit the contract (no
observation, a reward that is not a finite number, malformed messages, no reward when the
episode ends) ends the episode with score reason `error`, reward 0 and `ended_by: "error"`,
which the trainer leaves out (`trainer.rollout.groups.drop_errors`) and eval reports under `error`.
Such an env never raises on a step; a failed reset returns an empty user turn and the first
step ends in that error. The session is closed after an error and reopened by the next reset.
"""

from __future__ import annotations

import hashlib
import json
import math
from dataclasses import dataclass
from typing import Any

import gymnasium as gym

from rlvr.envs.base import action_text
from rlvr.envs.spaces import ROLES, AnyText, Messages
from rlvr.verifiers.core import ERROR, Score

MESSAGE_ROLES = (*ROLES, "tool")
SKIPPED_FIELDS = ("metadata", "reward", "done")


class RemoteError(Exception):
    """The server's answer does not fit the contract (or it gave none)."""


@dataclass(frozen=True)
class RemoteTask:
    task_id: str


class _Unsized:
    size = None  # `rlvr eval` asks an env's source how many items it has: a server does not say


class OpenEnvClientEnv(gym.Env):
    """An OpenEnv server's environment, one WebSocket session per env instance."""

    metadata = {"render_modes": []}
    source = _Unsized()

    def __init__(self, url: str, *, action_field: str | None = None, prompt_fields: list[str] | None = None,
                 system_prompt: str | None = None, max_turns: int = 8, timeout: float = 60.0,
                 connect_timeout: float = 10.0, success_reward: float | None = None):
        if not isinstance(url, str) or not url.startswith(("http://", "https://", "ws://", "wss://")):
            raise ValueError(f"url must be an http(s):// or ws(s):// address of an OpenEnv server, got {url!r}")
        if not isinstance(max_turns, int) or isinstance(max_turns, bool) or not 2 <= max_turns <= 64:
            raise ValueError(f"max_turns must be an int in 2..64 (remote envs run as episodes), got {max_turns!r}")
        for name, value in (("timeout", timeout), ("connect_timeout", connect_timeout)):
            if not isinstance(value, (int, float)) or isinstance(value, bool) or not value > 0:
                raise ValueError(f"{name} must be a positive number of seconds, got {value!r}")
        self.url = url.rstrip("/")
        self.action_field = action_field
        self.prompt_fields = list(prompt_fields) if prompt_fields is not None else None
        self.system_prompt = system_prompt
        self.max_turns = max_turns
        self.timeout, self.connect_timeout = float(timeout), float(connect_timeout)
        self.success_reward = success_reward
        self.observation_space = Messages(roles=MESSAGE_ROLES)
        self.action_space = AnyText()
        self.tool_schemas: list[dict[str, Any]] = []
        self.tool_prompt: str | None = None
        self._client: Any = None
        self._messages: list[dict[str, str]] = []
        self._task: RemoteTask | None = None
        self._failure: str | None = None
        self._turn = 0
        self._done = True

    # --- episode ------------------------------------------------------------------------

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        super().reset(seed=seed)
        options = dict(options or {})
        index = options.pop("index", None)
        if options:
            raise ValueError(f"unknown reset option(s): {', '.join(sorted(options))} (known: index)")
        data: dict[str, Any] = {}
        if seed is not None or index is not None:
            data["seed"] = seed if seed is not None else index
        if index is not None:
            data["index"] = index
        self._turn, self._done, self._failure = 0, False, None
        self.tool_schemas, self.tool_prompt = [], None
        try:
            observation = self._observation_of(self._session().reset(**data))
            info = self._read_reset(observation)
        except Exception as exc:  # noqa: BLE001  (the server failed: an error episode, not a crash)
            self._fail(exc)
            self._messages = [{"role": "user", "content": ""}]
            self._task = RemoteTask("openenv/unreachable")
            info = {"task_id": self._task.task_id, "error": self._failure}
        return self._conversation(), info

    def step(self, action: Any):
        if self._done:
            raise gym.error.ResetNeeded("the episode is over (or never started): call reset() first")
        text = action_text(action)
        self._turn += 1
        self._messages.append({"role": "assistant", "content": text})
        if self._failure is not None:
            return self._error_ending()
        try:
            result = self._session().step({self._field(): text})
            return self._read_step(self._observation_of(result), result.reward, result.done)
        except Exception as exc:  # noqa: BLE001
            self._fail(exc)
            return self._error_ending()

    @property
    def task(self) -> RemoteTask | None:
        return self._task

    def close(self) -> None:
        self._drop_session()
        super().close()

    # --- reading the server ---------------------------------------------------------------

    def _read_reset(self, observation: dict[str, Any]) -> dict[str, Any]:
        remote_info = observation.get("info")
        if observation.get("messages") is not None:
            self._messages = _messages(observation["messages"])
            self.tool_schemas = _tools(observation.get("tools"))
            prompt = observation.get("tool_prompt")
            self.tool_prompt = prompt if isinstance(prompt, str) and prompt else None
        else:
            system = [{"role": "system", "content": self.system_prompt}] if self.system_prompt else []
            self._messages = [*system, {"role": "user", "content": self._text_of(observation)}]
        task_id = remote_info.get("task_id") if isinstance(remote_info, dict) else None
        if not isinstance(task_id, str):
            digest = hashlib.sha1(json.dumps(observation, sort_keys=True, default=str).encode()).hexdigest()
            task_id = f"openenv/{digest[:12]}"
        self._task = RemoteTask(task_id)
        info = dict(remote_info) if isinstance(remote_info, dict) else {}
        info.update(task_id=task_id, tools=self.tool_schemas)
        return info

    def _read_step(self, observation: dict[str, Any], reward: Any, done: Any):
        if not isinstance(done, bool):
            raise RemoteError(f"'done' is not true or false: {done!r}")
        if reward is None and not done:
            reward = 0.0
        if isinstance(reward, bool) or not isinstance(reward, (int, float)) or not math.isfinite(reward):
            raise RemoteError(f"the reward is not a finite number: {reward!r}")
        remote_info = observation.get("info")
        if observation.get("messages") is not None:  # an rlvr env: its conversation and its own scoring
            messages = _messages(observation["messages"])
            info = dict(remote_info) if isinstance(remote_info, dict) else {}
            if done and not _is_score(info.get("score")):
                raise RemoteError("the episode ended without rlvr's score in the info")
            truncated = bool(observation.get("truncated")) and done
        else:
            messages = list(self._messages)
            if not done:
                messages.append({"role": "user", "content": self._text_of(observation)})
            correct = reward >= self.success_reward if self.success_reward is not None else reward > 0
            info = {"correct": bool(correct), "score": Score(
                float(reward), None if correct else "wrong", components={"reward": float(reward)},
                info={"remote": {k: v for k, v in observation.items() if not isinstance(v, str)}}).to_dict()}
            truncated = False
        self._messages = messages
        info.update(task_id=self._task.task_id, turn=self._turn)
        if not done and self._turn >= self.max_turns:
            self._done = True
            self._drop_session()
            info.update(correct=False, ended_by="max_turns", final_reward=0.0,
                        score=Score(0.0, "no_answer", info={"ended_by": "max_turns"}).to_dict())
            return self._conversation(), 0.0, False, True, info
        if done:
            self._done = True
            info.setdefault("ended_by", "answer")
            info.setdefault("final_reward", float(reward))
            info.setdefault("correct", False)
        return self._conversation(), float(reward), bool(done and not truncated), bool(truncated), info

    def _text_of(self, observation: dict[str, Any]) -> str:
        if self.prompt_fields is not None:
            missing = [k for k in self.prompt_fields if not isinstance(observation.get(k), str)]
            if missing:
                raise RemoteError(f"the observation has no text field(s) {', '.join(missing)}")
            parts = [(k, observation[k]) for k in self.prompt_fields]
        else:
            parts = [(k, v) for k, v in observation.items()
                     if k not in SKIPPED_FIELDS and isinstance(v, str) and v.strip()]
        if not parts:
            raise RemoteError(f"the observation has no text to show the model (fields: {', '.join(observation)})")
        if len(parts) == 1:
            return parts[0][1]
        return "\n\n".join(f"{k}:\n{v}" for k, v in parts)

    @staticmethod
    def _observation_of(result: Any) -> dict[str, Any]:
        observation = getattr(result, "observation", None)
        if not isinstance(observation, dict):
            raise RemoteError(f"the server sent no observation object (got {type(observation).__name__})")
        return observation

    # --- the session ----------------------------------------------------------------------

    def _session(self):
        if self._client is None:
            from openenv.core.generic_client import GenericEnvClient

            client = GenericEnvClient(base_url=self.url, connect_timeout_s=self.connect_timeout,
                                      message_timeout_s=self.timeout).sync()
            try:
                client.connect()
            except BaseException:
                client.close()
                raise
            self._client = client
        return self._client

    def _field(self) -> str:
        """The action's text field: `action_field`, or the one the server's schema requires."""
        if self.action_field is None:
            import httpx

            schema = httpx.get(f"{_http_url(self.url)}/schema", timeout=self.timeout).raise_for_status().json()
            action = schema.get("action") if isinstance(schema, dict) else None
            props = action.get("properties", {}) if isinstance(action, dict) else {}
            required = action.get("required", []) if isinstance(action, dict) else []
            texts = [k for k in required if isinstance(props.get(k), dict) and props[k].get("type") == "string"]
            if len(texts) != 1:
                raise RemoteError(f"the server's action needs {required or 'no fields'}: pass action_field= "
                                  "to say which one takes the completion")
            self.action_field = texts[0]
        return self.action_field

    def _drop_session(self) -> None:
        client, self._client = self._client, None
        if client is not None:
            try:
                client.close()
            except Exception:  # noqa: BLE001  (a dead server cannot be told goodbye)
                pass

    def _fail(self, exc: BaseException) -> None:
        self._failure = f"{type(exc).__name__}: {exc}"[:500] or type(exc).__name__
        self._drop_session()

    def _error_ending(self):
        self._done = True
        score = Score(0.0, ERROR, info={"remote": self._failure}).to_dict()
        info = {"task_id": self._task.task_id if self._task else None, "score": score, "correct": False,
                "ended_by": "error", "turn": self._turn, "final_reward": 0.0, "error": self._failure}
        return self._conversation(), 0.0, False, True, info

    def _conversation(self) -> list[dict[str, str]]:
        return [dict(m) for m in self._messages]


def _messages(value: Any) -> list[dict[str, str]]:
    if not isinstance(value, list) or not value:
        raise RemoteError("'messages' is not a non-empty list")
    out = []
    for m in value:
        if not isinstance(m, dict) or m.get("role") not in MESSAGE_ROLES or not isinstance(m.get("content"), str):
            raise RemoteError(f"malformed message: {str(m)[:200]}")
        out.append({"role": m["role"], "content": m["content"]})
    return out


def _tools(value: Any) -> list[dict[str, Any]]:
    if value is None:
        return []
    if not isinstance(value, list) or not all(isinstance(t, dict) for t in value):
        raise RemoteError("'tools' is not a list of tool schemas")
    return value


def _is_score(value: Any) -> bool:
    return isinstance(value, dict) and isinstance(value.get("score"), (int, float)) and "reason" in value


def _http_url(url: str) -> str:
    return "http" + url[2:] if url.startswith("ws") else url


__all__ = ["OpenEnvClientEnv", "RemoteError"]
