"""TRL environments: any rlvr env as `GRPOTrainer(environment_factory=...)`.

How TRL 1.16 uses an environment (read from its `GRPOTrainer`): `factory()` makes one instance
per rollout (pooled, reset between batches); the public functions of the instance's class are the
tools, described to the model from their name, signature and Google-style docstring
(`transformers.utils.get_json_schema`); `reset(**row)` gets the dataset row and the string it
returns is appended to the row's last user message; the model's tool calls run the methods; after
the rollout `get_reward()` is called with no argument, its value added with weight 1 and logged
under the class's name.

The environment never sees the model's last message, and that message is what an rlvr env scores.
So the factory brings a reward function, `factory.answers`, to list in `reward_funcs`: TRL calls
reward functions before `get_reward` and hands them the rollouts' environments, so it gives each
instance its final assistant message, which the rlvr env scores as in its own episodes; it logs the
breakdown (each component's mean, each reason's share, tool calls per rollout) through TRL's
`log_metric` and adds 0 itself. `get_reward` then returns the composite score. An episode ended by
an infrastructure error (the sandbox down) gets None from both: TRL warns, and its sum counts the
row as 0.

Tool calls go through the rlvr env's own `step` (written in its parser's format), so its limits,
timeouts and error replies apply as in rlvr's trainer; each call counts as one assistant turn.
"""

from __future__ import annotations

import inspect
import typing
from collections.abc import Callable
from typing import Any

from rlvr.integrations.tool_bridge import call_tool
from rlvr.integrations.trl import SEED_COLUMN, LoggedReward, env_dataset
from rlvr.verifiers.core import ERROR

RESERVED = frozenset({"reset", "get_reward", "env", "env_id", "env_kwargs"})


class RlvrEnvironment:
    """One rollout's rlvr env; `environment_factory` subclasses it per env id with the tool methods."""

    env_id: str = ""
    env_kwargs: dict[str, Any] = {}

    def __init__(self):
        import gymnasium

        import rlvr.envs  # noqa: F401  (registers the rlvr/* ids)

        self.env = gymnasium.make(self.env_id, **self.env_kwargs)
        self._outcome: dict[str, Any] | None = None  # the scored end of the episode
        self._ended_by: str | None = None

    def reset(self, **row: Any) -> str:
        """Start the episode of the row's reset seed; returns the task (the env's last prompt message)."""
        if row.get(SEED_COLUMN) is None:
            raise ValueError(f"the dataset row has no {SEED_COLUMN!r} column: make the dataset with "
                             "rlvr.integrations.trl_environment.environment_dataset")
        messages, _ = self.env.reset(seed=int(row[SEED_COLUMN]))
        self._outcome, self._ended_by = None, None
        return messages[-1]["content"]

    def get_reward(self) -> float | None:
        """The composite score of the episode (None: an infrastructure error, not the model's doing)."""
        if self._outcome is None:
            raise RuntimeError("no answer was handed to this environment: list factory.answers in reward_funcs")
        return None if self._outcome["reason"] == ERROR else float(self._outcome["score"])

    def _call_tool(self, name: str, arguments: dict[str, Any]) -> str:
        reply, ended = call_tool(self.env, name, arguments, self._ended_by)
        if ended is not None:
            self._end(ended)
        return reply

    def _end(self, info: dict[str, Any]) -> None:
        self._ended_by = info.get("ended_by", "answer")
        self._outcome = {**info["score"], "tool_calls": info.get("tool_calls", 0)}

    def _finish(self, completion: Any) -> dict[str, Any]:
        """Score the rollout's final assistant message (once); the score dict, with `tool_calls`."""
        if self._outcome is not None:
            return self._outcome
        text = _final_text(completion)
        parser = getattr(self.env.unwrapped, "parser", None)
        if parser is not None and parser(text).attempted:  # a call the trainer did not run: no answer
            counts = getattr(self.env.unwrapped, "_counts", {})
            self._ended_by = "tool_call"
            self._outcome = {"score": 0.0, "reason": "no_answer", "components": {}, "reasons": {},
                             "info": {"ended_by": "tool_call"}, "tool_calls": counts.get("tool_calls", 0)}
            return self._outcome
        _, _, _, _, info = self.env.step(text)
        self._end(info)
        return self._outcome


class Answers(LoggedReward):
    """The reward function that hands each rollout's final message to its environment (adds 0)."""

    def __call__(self, prompts=None, completions=None, environments=None, **kwargs: Any) -> list[float | None]:
        if completions is None or environments is None:
            raise TypeError("called by GRPOTrainer with completions= and environments= (environment_factory)")
        results = [env._finish(c) for env, c in zip(environments, completions)]
        self._log(results, kwargs)
        if callable(kwargs.get("log_metric")) and results:
            kwargs["log_metric"](f"{self.prefix}/tool_calls", sum(r["tool_calls"] for r in results) / len(results))
        return [None if r["reason"] == ERROR else 0.0 for r in results]


class EnvironmentFactory:
    """`GRPOTrainer(environment_factory=factory, reward_funcs=[factory.answers], train_dataset=...)`."""

    def __init__(self, env_id: str, **env_kwargs: Any):
        import gymnasium

        import rlvr.envs  # noqa: F401

        probe = gymnasium.make(env_id, **env_kwargs)  # a bad id or option fails here, not in the trainer
        try:
            tools = dict(getattr(probe.unwrapped, "tools", {}))
        finally:
            probe.close()
        label = env_id.split("/")[-1]
        namespace: dict[str, Any] = {"env_id": env_id, "env_kwargs": dict(env_kwargs), "__module__": __name__}
        for name, (tool, schema) in tools.items():
            if name in RESERVED or name.startswith("_") or not name.isidentifier():
                raise ValueError(f"tool name {name!r} cannot be a method of a TRL environment")
            namespace[name] = tool_method(name, tool, schema)
        # TRL logs get_reward under the class's name: rewards/<label>/mean
        self.environment_class = type(label, (RlvrEnvironment,), namespace)
        self.answers = Answers(f"{label}/answers", prefix=label)
        self.env_id, self.env_kwargs = env_id, env_kwargs

    def __call__(self) -> RlvrEnvironment:
        return self.environment_class()

    def __repr__(self) -> str:
        return f"environment_factory({self.env_id!r}, **{self.env_kwargs!r})"


def environment_factory(env_id: str, **env_kwargs: Any) -> EnvironmentFactory:
    """What `GRPOTrainer(environment_factory=...)` takes, for rlvr env `env_id` (see the module doc)."""
    return EnvironmentFactory(env_id, **env_kwargs)


def environment_dataset(env_id: str, n: int, *, seed: int = 0, **env_kwargs: Any):
    """`env_dataset` with the task left out of the prompt: `reset` returns it (TRL appends it to the
    empty last user message), so prompt and episode come from the same seed."""
    data = env_dataset(env_id, n, seed=seed, **env_kwargs)

    def blank(row):
        return {"prompt": [*row["prompt"][:-1], {**row["prompt"][-1], "content": ""}]}

    return data.map(blank)


def tool_method(name: str, tool: Callable, schema: dict[str, Any]) -> Callable:
    """A method named `name` with the tool's signature and a docstring TRL's schema reader accepts."""
    target = tool if inspect.isfunction(tool) or inspect.ismethod(tool) else tool.__call__
    hints = typing.get_type_hints(target)
    params = [p.replace(annotation=hints.get(p.name, p.annotation))
              for p in inspect.signature(target).parameters.values()]

    def method(self, **arguments: Any) -> str:
        return self._call_tool(name, arguments)

    method.__name__ = method.__qualname__ = name
    method.__signature__ = inspect.Signature(
        [inspect.Parameter("self", inspect.Parameter.POSITIONAL_OR_KEYWORD), *params], return_annotation=str)
    method.__annotations__ = {**{p.name: p.annotation for p in params}, "return": str}
    method.__doc__ = _docstring(schema["function"])
    return method


def _docstring(function: dict[str, Any]) -> str:
    """Google style, every argument described (transformers refuses an undescribed one)."""
    lines = [function["description"]]
    properties = function["parameters"]["properties"]
    if properties:
        lines += ["", "Args:"]
        for pname, prop in properties.items():
            lines.append(f"    {pname}: {prop.get('description') or prop.get('type') or 'a value'}")
    return "\n".join(lines)


def _final_text(completion: Any) -> str:
    if isinstance(completion, str):
        return completion
    for message in reversed(completion or []):
        if isinstance(message, dict) and message.get("role") == "assistant":
            content = message.get("content")
            return content if isinstance(content, str) else ""
    return ""


__all__ = ["Answers", "EnvironmentFactory", "RlvrEnvironment", "environment_dataset", "environment_factory",
           "tool_method"]
