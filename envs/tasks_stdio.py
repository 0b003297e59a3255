"""Packaged stdin/stdout programming problems (`rlvr/data/stdio_tasks.jsonl`).

A small original set: whole programs judged on their output, the style of contest
problems, which the templated function tasks do not cover. `difficulty` 1..3 keeps one
tier (None: all). Outputs are compared exactly by the code verifier's stdin/stdout mode.
"""

from __future__ import annotations

import json
from importlib import resources
from typing import Any

from rlvr.envs.tasks import Task, TaskSource, check_level

DATA_FILE = "stdio_tasks.jsonl"


class StdioTasks(TaskSource):
    family = "stdio"
    levels = range(1, 4)
    system_hint = ("Write a complete Python program that reads standard input and prints the answer, "
                   "as a Python code block (```python ... ```).")

    def __init__(self, difficulty: int | None = None):
        if difficulty is not None:
            check_level(difficulty, self.levels, self.family)
        text = resources.files("rlvr.data").joinpath(DATA_FILE).read_text(encoding="utf-8")
        self._all = [self._task(json.loads(line)) for line in text.splitlines() if line.strip()]
        self._set_difficulty(difficulty)

    def _task(self, record: dict[str, Any]) -> Task:
        example = record["io_tests"][0]
        prompt = (f"{record['prompt']}\n\nExample input:\n```\n{example['input']}```\n"
                  f"Expected output:\n```\n{example['output']}```")
        return Task(record["id"], prompt, None, {"io_tests": record["io_tests"]}, self.family, record["difficulty"])

    def _set_difficulty(self, level: int | None) -> None:
        self.difficulty = level
        self.tasks = [t for t in self._all if level is None or t.difficulty == level]
        self.size = len(self.tasks)

    def get(self, index: int) -> Task:
        return self.tasks[index]

    def verifier_spec(self) -> tuple[str, dict[str, Any]]:
        return "code", {}
