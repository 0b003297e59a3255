"""A weighted mixture of task sources that one verifier scores (e.g. MBPP's train split with CodeGen).

Item i is drawn from a generator seeded by i alone: it picks part j with probability weight_j / the
weights' sum, then one of that part's items, so the same index names the same task in every process
and run, as a Generator's does. The parts must agree on the verifier, the system hint and whether a
math answer must be boxed: the env has one reward and one system message for all of them.
"""

from __future__ import annotations

import json
import random
from collections.abc import Sequence

from rlvr.envs.tasks import Task, TaskSource

UNBOUNDED_ITEMS = 2**31  # a part without a size (a generator): items are drawn from this many


class MixedTasks(TaskSource):
    """`MixedTasks([(source, weight), ...])`: tasks from each source in proportion to its weight."""

    family = "mixture"

    def __init__(self, parts: Sequence[tuple[TaskSource, float]]):
        if not parts:
            raise ValueError("a mixture needs at least one part")
        for source, weight in parts:
            if not isinstance(weight, (int, float)) or isinstance(weight, bool) or not weight > 0:
                raise ValueError(f"every part's weight must be a number > 0, got {weight!r} for {source.family}")
        for name in ("verifier_spec", "system_hint", "require_boxed"):
            values = {json.dumps(_read(source, name), sort_keys=True, default=repr) for source, _ in parts}
            if len(values) > 1:
                raise ValueError(f"the parts of a mixture must share their {name}; got {sorted(values)}")
        self.parts = [source for source, _ in parts]
        self.weights = [float(weight) for _, weight in parts]
        first = self.parts[0]
        self.system_hint, self.require_boxed = first.system_hint, first.require_boxed

    def verifier_spec(self):
        return self.parts[0].verifier_spec()

    def get(self, index: int) -> Task:
        if not isinstance(index, int) or isinstance(index, bool) or index < 0:
            raise ValueError(f"task index must be a non-negative int, got {index!r}")
        rng = random.Random(f"mixture:{index}")  # str seeds hash with SHA-512: stable across processes
        part = self.parts[rng.choices(range(len(self.parts)), self.weights)[0]]
        return part.get(rng.randrange(part.size if part.size is not None else UNBOUNDED_ITEMS))


def _read(source: TaskSource, name: str):
    value = getattr(source, name)
    return value() if callable(value) else value
