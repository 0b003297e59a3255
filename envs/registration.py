"""Registering an env id with gymnasium and with `rlvr list` in one call.

A user task is a task source plus a verifier:

    rlvr.register_env("acme/Capitals-v0", tasks=[{"prompt": "Capital of France?", "answer": "Paris"}],
                      verifier=MyExactMatch(), description="world capitals")
    env = gymnasium.make("acme/Capitals-v0")

`tasks` is a `TaskSource`, a callable that builds one from the env's keyword arguments,
or a list of tasks. Plugin packages call this from their `rlvr.plugins` entry point.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import gymnasium as gym
from gymnasium.envs.registration import parse_env_id

from rlvr.envs.base import TaskEnv, env_factory
from rlvr.envs.tasks import ListTasks, TaskSource
from rlvr.registry import RegistryError, register_env_entry
from rlvr.verifiers.core import Verifier


def register_env(env_id: str, tasks: TaskSource | Callable[..., TaskSource] | Sequence[Any] | None = None,
                 verifier: Verifier | str | None = None, *, description: str = "",
                 entry_point: str | Callable[..., gym.Env] | None = None, kwargs: dict[str, Any] | None = None,
                 env_class: type[TaskEnv] = TaskEnv, replace: bool = False, family: str = "") -> None:
    """Make `env_id` available to `gymnasium.make` and list it in `rlvr list`.

    Give either `tasks` (with an optional `verifier`, default: the source's own, which for
    a plain list of tasks is the math verifier on a boxed answer) or a ready `entry_point`
    (a callable or "module:attr" returning a `gymnasium.Env`).
    `kwargs` are default keyword arguments for `gymnasium.make`. `family` groups the id in
    `rlvr list` ("arithmetic", "code", ...). A "module:attr" entry point is imported only
    when the env is made, so registering costs nothing.
    """
    try:
        parse_env_id(env_id)
    except (gym.error.Error, TypeError) as exc:
        raise ValueError(f"bad env id {env_id!r}: expected like 'namespace/Name-v0' ({exc})") from None
    if (tasks is None) == (entry_point is None):
        raise ValueError("register_env needs exactly one of tasks= or entry_point=")
    if env_id in gym.registry and not replace:
        raise RegistryError(f"env {env_id!r} is already registered (pass replace=True to override)")
    if entry_point is None:
        entry_point = _entry_point(tasks, verifier, env_class)
    elif verifier is not None:
        raise ValueError("verifier= goes with tasks=, not with entry_point=")
    register_env_entry(env_id, entry_point, description, replace=True, family=family)
    gym.registry.pop(env_id, None)  # re-registering replaces, quietly
    gym.register(id=env_id, entry_point=entry_point, kwargs=dict(kwargs or {}))


def _entry_point(tasks: Any, verifier: Verifier | str | None, env_class: type[TaskEnv]) -> Callable[..., gym.Env]:
    if isinstance(tasks, TaskSource):
        source = tasks

        def factory(**kw: Any) -> TaskSource:
            level = kw.pop("difficulty", None)
            _no_kwargs(source, kw)
            return source if level is None else source.with_difficulty(level)
    elif isinstance(tasks, Sequence) and not isinstance(tasks, str):
        source = ListTasks(list(tasks))

        def factory(**kw: Any) -> TaskSource:
            return _no_kwargs(source, kw)
    elif callable(tasks):
        factory = tasks
    else:
        raise TypeError(f"tasks must be a TaskSource, a callable or a list of tasks, got {type(tasks).__name__}")
    make = env_factory(factory, env_class)
    if verifier is None:
        return make

    def make_with_verifier(**kw: Any) -> gym.Env:
        kw.setdefault("verifier", verifier)
        return make(**kw)

    return make_with_verifier


def _no_kwargs(source: TaskSource, kw: dict[str, Any]) -> TaskSource:
    if kw:
        raise TypeError(f"unexpected keyword argument(s) for this env: {', '.join(sorted(kw))}")
    return source


def make(env_id: str, **kwargs: Any) -> gym.Env:
    """`gymnasium.make` that also finds plugin envs and says clearly when an id is unknown."""
    from rlvr.registry import list_envs

    if env_id not in gym.registry:
        known = list_envs()  # loads the built-ins and the plugins
        if env_id not in gym.registry:
            raise RegistryError(f"unknown env {env_id!r} (known: {', '.join(known) or 'none'})")
    return gym.make(env_id, **kwargs)
