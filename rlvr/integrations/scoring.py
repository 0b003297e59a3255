"""Score batches of items named by verifier or env id: the engine under every adapter.

The HTTP server and the TRL, verl and OpenRLHF adapters all score through `score_items`,
so one process keeps one instance per (verifier, options), and with it the verifier's own
worker pools, whichever way the request came in. Items that share a verifier go to its
`score_batch` together; items that share an env go to `rlvr.envs.score_groups`, one
prompt (reset seed) per group.

A mistake in an item (unknown name, bad option, wrong field type) raises `ItemError`
naming the item; a model's output never does.
"""

from __future__ import annotations

import json
import threading
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from rlvr.registry import RegistryError, make_verifier
from rlvr.verifiers.core import Verifier, completion_text

MAX_CACHED = 64  # distinct (name, options) instances kept per process


class ItemError(ValueError):
    """A request item that cannot be scored as asked (the caller's mistake, not the model's)."""


class UnknownName(ItemError, LookupError):
    """No verifier or env is registered under the name an item gives."""


@dataclass(frozen=True)
class Item:
    """One completion to score, by a registered verifier or by an env at a reset seed."""

    completion: Any
    reference: Any = None
    fields: Mapping[str, Any] = field(default_factory=dict)
    verifier: str | None = None
    env: str | None = None
    options: Mapping[str, Any] = field(default_factory=dict)  # verifier constructor or env kwargs
    seed: int | None = None  # env items: the reset seed that chose the prompt


def _key(name: str, options: Mapping[str, Any]) -> tuple[str, str]:
    try:
        return name, json.dumps(options, sort_keys=True)
    except (TypeError, ValueError) as exc:
        raise ItemError(f"options of {name!r} must be JSON values: {exc}") from None


_verifiers: OrderedDict[tuple[str, str], Verifier] = OrderedDict()
_verifiers_lock = threading.Lock()


def get_verifier(name: str, options: Mapping[str, Any] | None = None) -> Verifier:
    """The process-wide instance of verifier `name` built with `options` (least recently used evicted)."""
    options = dict(options or {})
    key = _key(name, options)
    with _verifiers_lock:
        if key in _verifiers:
            _verifiers.move_to_end(key)
            return _verifiers[key]
    try:
        verifier = make_verifier(name, **options)
    except RegistryError as exc:
        raise UnknownName(str(exc)) from None
    except ImportError as exc:
        raise ItemError(f"verifier {name!r} is not available here: {exc}") from None
    except (TypeError, ValueError) as exc:
        raise ItemError(f"cannot build verifier {name!r} with options {options}: {exc}") from None
    if not isinstance(verifier, Verifier):
        raise ItemError(f"{name!r} did not build a Verifier (got {type(verifier).__name__})")
    with _verifiers_lock:
        verifier = _verifiers.setdefault(key, verifier)
        while len(_verifiers) > MAX_CACHED:
            _verifiers.popitem(last=False)
    return verifier


class _EnvPool:
    """Idle env instances per (id, kwargs); one instance serves one thread at a time."""

    def __init__(self):
        self._idle: dict[tuple[str, str], list[Any]] = {}
        self._lock = threading.Lock()

    def take(self, env_id: str, kwargs: Mapping[str, Any]) -> Any:
        key = _key(env_id, kwargs)
        with self._lock:
            idle = self._idle.get(key)
            if idle:
                return idle.pop()
        try:
            import gymnasium

            import rlvr.envs  # noqa: F401  (registers the rlvr/* ids)

            try:
                return gymnasium.make(env_id, **kwargs)
            except gymnasium.error.UnregisteredEnv as exc:
                raise UnknownName(f"unknown env {env_id!r}: {exc}") from None
        except ImportError as exc:
            raise ItemError(f"env {env_id!r} needs gymnasium and rlvr.envs: {exc}") from None
        except ItemError:
            raise
        except Exception as exc:  # an env's constructor rejects its kwargs with errors of its own choosing
            raise ItemError(f"cannot make env {env_id!r} with {dict(kwargs)}: {exc}") from None

    def give(self, env_id: str, kwargs: Mapping[str, Any], env: Any) -> None:
        with self._lock:
            idle = self._idle.setdefault(_key(env_id, kwargs), [])
            if len(idle) < MAX_CACHED:
                idle.append(env)


_envs = _EnvPool()


def score_items(items: Sequence[Item]) -> list[dict[str, Any]]:
    """Score every item; results (each `Score.to_dict()`, plus `correct`/`task_id` for env items) in order."""
    results: list[dict[str, Any] | None] = [None] * len(items)
    verifier_groups: dict[tuple[str, str], list[int]] = {}
    env_groups: dict[tuple[str, str], list[int]] = {}
    for i, item in enumerate(items):
        if (item.verifier is None) == (item.env is None):
            raise ItemError(f"item {i}: give exactly one of 'verifier' or 'env'")
        if item.env is not None:
            if item.seed is None:
                raise ItemError(f"item {i}: an env item needs the 'seed' that chose its prompt")
            env_groups.setdefault(_key(item.env, item.options), []).append(i)
        else:
            verifier_groups.setdefault(_key(item.verifier, item.options), []).append(i)
    jobs = [(indices, _score_with_verifier) for indices in verifier_groups.values()]
    jobs += [(indices, _score_with_env) for indices in env_groups.values()]

    def run(job):
        indices, scorer = job
        return indices, scorer([items[i] for i in indices])

    if len(jobs) <= 1:
        finished = [run(job) for job in jobs]
    else:  # e.g. math and code in one batch: the code sandbox need not wait for the math pool
        with ThreadPoolExecutor(max_workers=len(jobs)) as pool:
            finished = list(pool.map(run, jobs))
    for indices, scored in finished:
        for i, result in zip(indices, scored):
            results[i] = result
    return results  # type: ignore[return-value]


def _score_with_verifier(items: list[Item]) -> list[dict[str, Any]]:
    first = items[0]
    verifier = get_verifier(first.verifier, first.options)
    try:
        scores = verifier.score_batch(
            [it.completion for it in items], [it.reference for it in items], [dict(it.fields) for it in items]
        )
    except TypeError as exc:  # a task field the verifier does not accept, or of the wrong type
        raise ItemError(f"verifier {first.verifier!r} rejected the task fields: {exc}") from None
    return [score.to_dict() for score in scores]


def _score_with_env(items: list[Item]) -> list[dict[str, Any]]:
    from rlvr.envs import score_groups

    first = items[0]
    by_seed: dict[int, list[int]] = {}
    for i, it in enumerate(items):
        by_seed.setdefault(it.seed, []).append(i)
    envs = []
    try:
        task_ids = []
        for seed in by_seed:
            env = _envs.take(first.env, first.options)
            envs.append(env)
            try:
                _, info = env.reset(seed=seed)
            except Exception as exc:  # an env's own error for a seed it cannot serve
                raise ItemError(f"env {first.env!r} cannot reset at seed {seed}: {exc}") from None
            task_ids.append(info.get("task_id"))
        groups = score_groups(
            [e.unwrapped for e in envs],
            [[completion_text(items[i].completion) for i in idx] for idx in by_seed.values()],
        )
    finally:
        for env in envs:
            _envs.give(first.env, first.options, env)
    out: list[dict[str, Any]] = [{}] * len(items)
    for idx, group, task_id in zip(by_seed.values(), groups, task_ids):
        for i, (reward, info) in zip(idx, group):
            result = dict(info.get("score") or {})
            result["score"] = reward
            result["correct"] = bool(info.get("correct"))
            result["task_id"] = task_id
            out[i] = result
    return out

