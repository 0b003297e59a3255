"""Task sources: where an env's prompts, gold answers and verifier come from.

A `Task` is one problem: the prompt text, the reference the verifier compares against,
and the extra task fields the verifier needs (unit tests, the countdown numbers). A
`TaskSource` hands out tasks by index; `Generator` is the procedural kind, where item
`index` is a pure function of `(family, seed, difficulty, index)`, so any run can be
replayed exactly and two processes agree on what task 17 is.
"""

from __future__ import annotations

import copy
import random
from dataclasses import dataclass, field
from typing import Any

from rlvr.verifiers.boxes import last_boxed
from rlvr.verifiers.core import NO_ANSWER, Score, Verifier, completion_text

CODE_HINT = "Write your solution as a Python code block (```python ... ```)."


@dataclass(frozen=True)
class Task:
    """One problem. `reference` and `fields` go to the verifier and never into an observation."""

    task_id: str
    prompt: str
    reference: Any = None
    fields: dict[str, Any] = field(default_factory=dict)
    family: str = "task"
    difficulty: int | None = None


class TaskSource:
    """Hands out tasks by index and names the verifier that scores them.

    `verifier_spec()` returns `(registered verifier name, kwargs)`: envs built on sources
    with equal specs share one verifier object, so a batch across them is scored in one
    concurrent call. A source that builds its own verifier overrides `make_verifier` (not shared).
    `size` is the number of distinct items (None: unbounded, as for generators).
    """

    family = "task"
    size: int | None = None
    system_hint = "Put your final answer in \\boxed{}."
    require_boxed = True  # math answers must stand in a final \boxed{} (the prompt asks for one)

    def get(self, index: int) -> Task:
        raise NotImplementedError

    def verifier_spec(self) -> tuple[str, dict[str, Any]]:
        return "math", {}

    def make_verifier(self, require_boxed: bool | None = None) -> Verifier:
        """The correctness verifier; `require_boxed` (default: the source's) gates math on a final box."""
        from rlvr.registry import make_verifier

        name, kwargs = self.verifier_spec()
        verifier = make_verifier(name, **kwargs)
        boxed = self.require_boxed if require_boxed is None else require_boxed
        return RequireBoxed(verifier) if boxed and name == "math" else verifier

    # Difficulty. Sources without levels keep the defaults.
    difficulty: int | None = None
    levels: range | None = None

    def with_difficulty(self, level: int) -> TaskSource:
        """A copy of this source at difficulty `level` (a curriculum step)."""
        if self.levels is None:
            raise ValueError(f"{self.family} tasks have no difficulty levels")
        check_level(level, self.levels, self.family)
        clone = copy.copy(self)
        clone._set_difficulty(int(level))
        return clone

    def _set_difficulty(self, level: int) -> None:
        self.difficulty = level


class Generator(TaskSource):
    """A seeded procedural source: `get(index)` calls `make(rng)` with a fresh rng seeded for that item."""

    levels = range(1, 11)

    def __init__(self, difficulty: int = 1, seed: int = 0):
        check_level(difficulty, self.levels, self.family)
        if not isinstance(seed, int) or isinstance(seed, bool):
            raise TypeError(f"seed must be an int, got {seed!r}")
        self.difficulty = int(difficulty)
        self.seed = seed

    def get(self, index: int) -> Task:
        if not isinstance(index, int) or index < 0:
            raise ValueError(f"task index must be a non-negative int, got {index!r}")
        key = f"{self.family}:{self.seed}:{self.params()}:{index}"
        rng = random.Random(key)  # str seeds hash with SHA-512: stable across processes and runs
        prompt, reference, fields = self.make(rng)
        return Task(
            task_id=f"{self.family}/{self.seed}/{self.difficulty}/{index}",
            prompt=prompt, reference=reference, fields=fields,
            family=self.family, difficulty=self.difficulty,
        )

    def params(self) -> str:
        """Everything besides seed and index that changes the items (part of the item key)."""
        return f"d{self.difficulty}"

    def make(self, rng: random.Random) -> tuple[str, Any, dict[str, Any]]:
        """(prompt, reference, task fields) for one item."""
        raise NotImplementedError


class RequireBoxed(Verifier):
    """Scores with `inner` only completions whose final region ends in a closed `\\boxed{}`.

    The math verifier falls back to "the answer is ..." or the last number; a task that
    asks for a boxed answer should not reward an answer that ignores the request.
    """

    def __init__(self, inner: Verifier):
        self.inner = inner
        self.name = inner.name
        self.best = inner.best

    def score(self, completion: Any, reference: Any = None, **task_fields: Any) -> Score:
        return self.score_batch([completion], [reference], [task_fields])[0]

    def score_batch(self, completions, references=None, task_fields=None) -> list[Score]:
        references = [None] * len(completions) if references is None else list(references)
        task_fields = [{}] * len(completions) if task_fields is None else list(task_fields)
        boxed = [last_boxed(completion_text(c)) is not None for c in completions]
        keep = [i for i, ok in enumerate(boxed) if ok]
        inner = self.inner.score_batch([completions[i] for i in keep], [references[i] for i in keep],
                                       [task_fields[i] for i in keep]) if keep else []
        out = [Score(0.0, NO_ANSWER, info={"why": "no final \\boxed{} answer"})] * len(completions)
        for i, score in zip(keep, inner):
            out[i] = score
        return out

    def __repr__(self) -> str:
        return f"RequireBoxed({self.inner!r})"


def check_level(level: Any, levels: range, family: str) -> None:
    if not isinstance(level, int) or isinstance(level, bool) or level not in levels:
        raise ValueError(
            f"{family} difficulty must be an int in {levels.start}..{levels.stop - 1}, got {level!r}"
        )


class ListTasks(TaskSource):
    """A fixed list of tasks: `Task` objects or dicts with `prompt` and `answer` (or `reference`).

    Other keys of a dict become task fields for the verifier; `id` names the task.
    """

    def __init__(self, items: list[Task | dict[str, Any]], family: str = "custom",
                 system_hint: str | None = None):
        if not items:
            raise ValueError("a task list needs at least one task")
        self.family = family
        if system_hint is not None:
            self.system_hint = system_hint
        self.tasks = [self._task(i, item) for i, item in enumerate(items)]
        self.size = len(self.tasks)

    def _task(self, i: int, item: Task | dict[str, Any]) -> Task:
        if isinstance(item, Task):
            return item
        if not isinstance(item, dict) or not isinstance(item.get("prompt"), str):
            raise ValueError(f"task {i} must be a Task or a dict with a 'prompt' string, got {item!r:.80}")
        rest = dict(item)
        prompt = rest.pop("prompt")
        reference = rest.pop("answer", rest.pop("reference", None))
        task_id = str(rest.pop("id", f"{self.family}/{i}"))
        difficulty = rest.pop("difficulty", None)
        return Task(task_id, prompt, reference, rest, self.family, difficulty)

    def get(self, index: int) -> Task:
        return self.tasks[index]
