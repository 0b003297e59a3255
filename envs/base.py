"""The single-turn env: one task per episode, scored by a composite reward.

`reset` draws a task (item index from the env's seeded generator, or `options={"index": i}`)
and returns it as chat messages; `step(completion)` scores the completion and ends the
episode. `score_group` scores G completions of the current prompt in one batch without
touching the episode, which is what GRPO-style training needs.

The reward is `Composite({"correct": task verifier, "format": ThinkFormat (with think=True),
...})`. Envs with the same reward configuration share one reward object, so that
`rlvr.envs.score_groups` can score a batch across many envs in one concurrent call.
"""

from __future__ import annotations

import json
import weakref
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import gymnasium as gym

from rlvr.envs.spaces import AnyText, Messages
from rlvr.envs.tasks import Task, TaskSource
from rlvr.verifiers.core import Composite, Score, Verifier, completion_text
from rlvr.verifiers.format import ThinkFormat

CORRECT = "correct"
FORMAT = "format"
DEFAULT_FORMAT_WEIGHT = 0.1
THINK_HINT = "First think step by step inside <think> </think> tags, then give your final answer after them."

TIMING_KEYS = ("duration",)
# Shared reward objects by configuration, alive as long as some env uses them (a verifier
# object in a key stays alive with its reward, so its id cannot be reused meanwhile).
_REWARDS: weakref.WeakValueDictionary[tuple, Composite] = weakref.WeakValueDictionary()


class TaskEnv(gym.Env):
    """A single-turn env over a `TaskSource`.

    `think` requires the `<think>...</think>` format (adds a `format` component);
    `require_boxed=False` lets the math verifier also take an unboxed final answer ("the
    answer is 12", the last number): a learning signal for small models that ignore the box;
    `weights` maps component names to weights: `correct`, `format`, or any registered
    verifier name (e.g. `{"repetition": 0.5}`) to add it. `verifier` replaces the source's
    correctness verifier: a Verifier, a registered name, or a name with options (`{"name": "code",
    "mode": "all"}`, what a YAML config can say). `system_prompt` replaces the default system
    message ("" for none). `stop`: strings that end a completion where it first writes one (kept
    in its text): the episode loop sends them to every generator, e.g. `["\\n```\\n"]` ends a code
    answer at its closing fence instead of paying for the explanation after it.
    """

    metadata = {"render_modes": []}

    def __init__(self, source: TaskSource, *, think: bool = False, weights: Mapping[str, float] | None = None,
                 verifier: Verifier | str | Mapping[str, Any] | None = None, system_prompt: str | None = None,
                 require_boxed: bool | None = None, stop: Sequence[str] = ()):
        if not isinstance(source, TaskSource):
            raise TypeError(f"source must be a TaskSource, got {type(source).__name__}")
        for flag, value in (("think", think), ("require_boxed", require_boxed)):
            if not isinstance(value, bool) and not (flag == "require_boxed" and value is None):
                raise TypeError(f"{flag} must be True or False, got {value!r}")
        if not isinstance(stop, (list, tuple)) or not all(isinstance(s, str) and s for s in stop):
            raise TypeError(f"stop must be a list of non-empty strings, got {stop!r}")
        self.source = source
        self.think = think
        self.stop = tuple(stop)
        self.reward = shared_reward(source, think, weights, verifier, require_boxed)
        self.system_prompt = system_prompt
        self.observation_space = Messages()
        self.action_space = AnyText()
        self._task: Task | None = None
        self._index: int | None = None
        self._messages: list[dict[str, str]] = []
        self._done = True

    # --- episode ------------------------------------------------------------------------

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        super().reset(seed=seed)
        options = dict(options or {})
        index = options.pop("index", None)
        if options:
            raise ValueError(f"unknown reset option(s): {', '.join(sorted(options))} (known: index)")
        if index is None:
            bound = self.source.size if self.source.size is not None else 2**31
            index = int(self.np_random.integers(0, bound))
        elif not isinstance(index, int) or isinstance(index, bool) or index < 0 or (
                self.source.size is not None and index >= self.source.size):
            limit = f"0..{self.source.size - 1}" if self.source.size is not None else ">= 0"
            raise ValueError(f"reset option index must be an int in {limit}, got {index!r}")
        self._index = index
        self._task = self.source.get(index)
        self._messages = self._prompt_messages(self._task)
        self._done = False
        return self._observation(), self._task_info()

    def step(self, action: Any):
        self._require_task()
        text = action_text(action)
        reward, reference, fields = self.scoring_inputs()
        score = reward.score(text, reference, **fields)
        self._messages.append({"role": "assistant", "content": text})
        self._done = True
        return self._observation(), float(score.value), True, False, self.outcome(score)

    def score_group(self, completions: list[str]) -> list[tuple[float, dict[str, Any]]]:
        """Score G completions of the current prompt at once; the episode is left as it is."""
        reward, reference, fields = self.scoring_inputs()
        texts = [action_text(c) for c in completions]
        scores = reward.score_batch(texts, [reference] * len(texts), [fields] * len(texts))
        return [(float(s.value), self.outcome(s)) for s in scores]

    # --- helpers shared with rollout and the multi-turn envs -----------------------------

    def scoring_inputs(self) -> tuple[Composite, Any, dict[str, Any]]:
        """(reward, reference, task fields) for the current prompt."""
        task = self._task
        if task is None:
            raise gym.error.ResetNeeded("call reset() before scoring: there is no current prompt")
        fields = dict(task.fields)
        fields.setdefault("question", task.prompt)  # lets the math verifier refuse an echoed question
        return self.reward, task.reference, fields

    @property
    def task(self) -> Task | None:
        return self._task

    def _require_task(self) -> Task:
        if self._task is None or self._done:
            raise gym.error.ResetNeeded("the episode is over (or never started): call reset() first")
        return self._task

    def _system_text(self) -> str:
        if self.system_prompt is not None:
            return self.system_prompt
        return f"{THINK_HINT} {self.source.system_hint}" if self.think else self.source.system_hint

    def _prompt_messages(self, task: Task) -> list[dict[str, str]]:
        system = self._system_text()
        messages = [{"role": "system", "content": system}] if system else []
        messages.append({"role": "user", "content": task.prompt})
        return messages

    def _observation(self) -> list[dict[str, str]]:
        return [dict(m) for m in self._messages]  # fresh objects: callers may keep or edit them

    def _task_info(self) -> dict[str, Any]:
        task = self._task
        return {
            "task_id": task.task_id,
            "family": task.family,
            "difficulty": task.difficulty,
            "index": self._index,
            "prompt_text": "\n\n".join(m["content"] for m in self._prompt_messages(task)),
        }

    def outcome(self, score: Score) -> dict[str, Any]:
        """The info dict for a scored completion of the current task (as in step's info)."""
        task = self._task
        correct_part = self.reward.components[CORRECT][0]
        return {
            "task_id": task.task_id,
            "family": task.family,
            "difficulty": task.difficulty,
            "score": _without_timings(score.to_dict()),
            "correct": score.components.get(CORRECT, 0.0) >= correct_part.best,
        }


def _without_timings(score: dict[str, Any]) -> dict[str, Any]:
    """Drop wall-clock measurements from the components' info: a step's info depends only on the
    task and the completion (gymnasium's checker steps twice and compares)."""
    score["info"] = {
        key: {k: v for k, v in part.items() if k not in TIMING_KEYS} if isinstance(part, dict) else part
        for key, part in score["info"].items()
    }
    return score


def action_text(action: Any) -> str:
    if isinstance(action, str):
        return action
    if isinstance(action, (list, tuple, dict)):
        return completion_text(action)
    raise TypeError(f"an action is the completion text (str), got {type(action).__name__}")


def shared_reward(source: TaskSource, think: bool, weights: Mapping[str, float] | None,
                  verifier: Verifier | str | Mapping[str, Any] | None, require_boxed: bool | None = None) -> Composite:
    """The composite reward for this configuration, built once per process and then shared."""
    weights = dict(weights or {})
    for key, weight in weights.items():
        if not isinstance(weight, (int, float)) or isinstance(weight, bool):
            raise TypeError(f"reward weight of {key!r} must be a number, got {weight!r}")
    if FORMAT in weights and not think:
        raise ValueError("the 'format' reward component needs think=True")
    if isinstance(verifier, Verifier):
        correct_key: Any = ("object", id(verifier))
    elif isinstance(verifier, str):
        correct_key = ("name", verifier)
    elif isinstance(verifier, Mapping):
        if not isinstance(verifier.get("name"), str):
            raise TypeError(f"a verifier with options needs its registered name, e.g. {{'name': 'code', 'mode': 'all'}}; "
                            f"got {dict(verifier)!r}")
        correct_key = ("options", json.dumps(dict(verifier), sort_keys=True, default=repr))
    elif type(source).make_verifier is not TaskSource.make_verifier:  # the source builds its own: not shared
        return _build_reward(source, think, weights, verifier, require_boxed)
    elif verifier is None:
        spec = source.verifier_spec()
        boxed = source.require_boxed if require_boxed is None else require_boxed
        correct_key = ("spec", spec[0], json.dumps(spec[1], sort_keys=True, default=repr), boxed)
    else:
        raise TypeError(f"verifier must be a Verifier, a registered name or a mapping with its name, "
                        f"got {type(verifier).__name__}")
    key = (correct_key, think, tuple(sorted(weights.items())))
    reward = _REWARDS.get(key)
    if reward is None:
        reward = _REWARDS[key] = _build_reward(source, think, weights, verifier, require_boxed)
    return reward


def _build_reward(source, think, weights, verifier, require_boxed) -> Composite:
    from rlvr.registry import make_verifier

    if isinstance(verifier, str):
        verifier = make_verifier(verifier)
    elif isinstance(verifier, Mapping):
        options = dict(verifier)
        verifier = make_verifier(options.pop("name"), **options)
    parts: dict[str, tuple[Verifier, float]] = {
        CORRECT: (verifier if verifier is not None else
                  source.make_verifier() if require_boxed is None else source.make_verifier(require_boxed),
                  weights.pop(CORRECT, 1.0)),
    }
    if think:
        parts[FORMAT] = (ThinkFormat(), weights.pop(FORMAT, DEFAULT_FORMAT_WEIGHT))
    for name, weight in weights.items():  # extra components: registered verifiers by name
        parts[name] = (make_verifier(name), weight)
    return Composite(parts)


ENV_OPTIONS = ("think", "weights", "verifier", "system_prompt", "require_boxed", "stop")


def env_factory(source_factory: Callable[..., TaskSource], env_class: type[TaskEnv] = TaskEnv,
                env_options: tuple[str, ...] = ()) -> Callable[..., TaskEnv]:
    """An entry point for `gymnasium.make`: env options go to the env, the rest to the source."""

    def make(**kwargs: Any) -> TaskEnv:
        options = {k: kwargs.pop(k) for k in (*ENV_OPTIONS, *env_options) if k in kwargs}
        return env_class(source_factory(**kwargs), **options)

    make.__name__ = make.__qualname__ = f"make_{getattr(source_factory, '__name__', 'env')}"
    return make
