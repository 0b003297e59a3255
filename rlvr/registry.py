"""Named verifiers and environments, built-in and from plugins.

Built-ins are registered by import path, so listing them imports nothing heavy (the
code verifier needs the Docker SDK, the envs need gymnasium). Third-party packages add
theirs through the entry-point group `rlvr.plugins`: each entry point names a callable
that is called once, with no arguments, and registers what it brings.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from importlib.metadata import entry_points
from typing import Any

PLUGIN_GROUP = "rlvr.plugins"


class RegistryError(LookupError):
    """An unknown name, or a name registered twice."""


@dataclass(frozen=True)
class Entry:
    name: str
    target: str | Callable[..., Any]  # "module:attr" or a callable
    description: str
    family: str = ""  # envs: what kind of task ("arithmetic", "code", ...), for `rlvr list --family`

    def load(self) -> Callable[..., Any]:
        if callable(self.target):
            return self.target
        module, _, attr = self.target.partition(":")
        obj: Any = importlib.import_module(module)
        for part in attr.split("."):
            obj = getattr(obj, part)
        return obj


_VERIFIERS: dict[str, Entry] = {}
_ENVS: dict[str, Entry] = {}
_plugins_loaded = False


def register_verifier(name: str, factory: str | Callable[..., Any], description: str = "", *,
                      replace: bool = False) -> None:
    """Register `factory` (a class, a function or a "module:attr" path) under `name`."""
    _add(_VERIFIERS, "verifier", name, factory, description, replace)


def make_verifier(name: str, **kwargs: Any):
    """Build the verifier registered as `name` with `kwargs`."""
    return _get(_VERIFIERS, "verifier", name).load()(**kwargs)


def list_verifiers() -> dict[str, str]:
    """Registered verifier names with their one-line descriptions."""
    _load_plugins()
    return {k: e.description for k, e in sorted(_VERIFIERS.items())}


def register_env_entry(env_id: str, entry_point: str | Callable[..., Any], description: str = "", *,
                       replace: bool = False, family: str = "") -> None:
    """Record an env id for `rlvr list`; `rlvr.envs` also registers it with gymnasium."""
    _add(_ENVS, "env", env_id, entry_point, description, replace, family)


def list_envs() -> dict[str, str]:
    """Registered env ids with their one-line descriptions."""
    _load_builtin_envs()
    _load_plugins()
    return {k: e.description for k, e in sorted(_ENVS.items())}


def env_entries() -> list[Entry]:
    """Registered envs with their families, sorted by id."""
    _load_builtin_envs()
    _load_plugins()
    return [e for _, e in sorted(_ENVS.items())]


def _add(table, kind, name, target, description, replace, family=""):
    if not isinstance(name, str) or not name:
        raise RegistryError(f"{kind} name must be a non-empty string, got {name!r}")
    if name in table and not replace and table[name].target != target:
        raise RegistryError(f"{kind} {name!r} is already registered (pass replace=True to override)")
    table[name] = Entry(name, target, (description or "").strip().splitlines()[0] if description else "", family)


def _get(table, kind, name):
    if name not in table:
        _load_plugins()
    if name not in table:
        known = ", ".join(sorted(table)) or "none"
        raise RegistryError(f"unknown {kind} {name!r} (known: {known})")
    return table[name]


def _load_builtin_envs() -> None:
    try:
        importlib.import_module("rlvr.envs")
    except ImportError:  # gymnasium missing: the verifiers still work
        pass


def _load_plugins() -> None:
    """Call every `rlvr.plugins` entry point once per process."""
    global _plugins_loaded
    if _plugins_loaded:
        return
    _plugins_loaded = True
    for ep in entry_points(group=PLUGIN_GROUP):
        try:
            ep.load()()
        except Exception as exc:  # a broken plugin is named, not left as a bare traceback
            raise RegistryError(f"plugin {ep.name!r} ({ep.value}) failed to load: {exc}") from exc


def reload_plugins() -> None:
    """Scan the entry points again (after installing a plugin in a running process)."""
    global _plugins_loaded
    _plugins_loaded = False
    _load_plugins()


# Built-in verifiers, imported only when used.
for _name, _target, _desc in [
    ("think_format", "rlvr.verifiers.format:ThinkFormat", "strict <think>...</think> then a non-empty answer"),
    ("soft_think_format", "rlvr.verifiers.format:SoftThinkFormat", "one closed, non-empty think block anywhere, then an answer"),
    ("tag_count", "rlvr.verifiers.format:TagCount", "partial credit: 0.25 per correctly used think/answer tag"),
    ("boxed", "rlvr.verifiers.format:FinalBoxed", "exactly one final \\boxed{} answer after the think block"),
    ("overlong", "rlvr.verifiers.format:OverlongPenalty", "DAPO soft penalty for completions near or over a max length"),
    ("repetition", "rlvr.verifiers.format:RepetitionPenalty", "penalty for repeated n-grams"),
    ("math", "rlvr.verifiers.math:MathVerifier", "final-answer equivalence for math (boxed, LaTeX, sympy, hard timeouts)"),
    ("code", "rlvr.verifiers.code:CodeVerifier", "fraction of unit tests passed in the Docker sandbox"),
    ("instructions", "rlvr.verifiers.instructions:InstructionVerifier",
     "IFEval-style instruction following (25 instruction types, strict or loose, per-instruction reasons)"),
    ("judge", "rlvr.verifiers.judge:JudgeVerifier", "LLM judge behind an OpenAI-compatible endpoint, with a rubric"),
]:
    register_verifier(_name, _target, _desc)
