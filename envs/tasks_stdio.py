"""Packaged stdin/stdout programming problems (`rlvr/data/stdio_tasks.jsonl`).

A small original set: whole programs judged on their output, the style of contest
problems, which the templated function tasks do not cover. `difficulty` 1..3 keeps one
tier (None: all). Outputs are compared exactly by the code verifier's stdin/stdout mode.

`language` (default Python) is the language the answer must be written in: any of the
sandbox's (`rlvr.sandbox.languages`: python, c, cpp, java, javascript, go, rust, or an alias
such as "c++"). The prompt names it and every task carries it as the field `language`, which
the code verifier compiles and runs. A record may list the `languages` it accepts; tasks
that do not accept the chosen one are left out.
"""

from __future__ import annotations

import json
from importlib import resources
from typing import Any

from rlvr.envs.tasks import Task, TaskSource, check_level
from rlvr.sandbox import languages as sandbox_languages

DATA_FILE = "stdio_tasks.jsonl"
# How prompts and fences name each language.
LANGUAGE_NAMES = {"python": ("Python", "python"), "c": ("C", "c"), "cpp": ("C++", "cpp"), "java": ("Java", "java"),
                  "javascript": ("JavaScript (Node.js)", "javascript"), "go": ("Go", "go"), "rust": ("Rust", "rust")}


def check_language(language: str | None) -> str:
    """The sandbox's name for `language` (None: Python); a clear error for one it cannot run."""
    key = sandbox_languages.canonical(language or "python")
    if key is None:
        raise ValueError(f"language must be one of {', '.join(sandbox_languages.LANGUAGES)}; got {language!r}")
    return key


def stdio_hint(language: str | None = None) -> str:
    """The instruction for a whole stdin/stdout program in `language`, naming its code fence."""
    name, tag = LANGUAGE_NAMES[check_language(language)]
    extra = " The public class must be named Main." if tag == "java" else ""
    return (f"Write a complete {name} program that reads standard input and prints the answer, "
            f"as a {name} code block (```{tag} ... ```).{extra}")


class StdioTasks(TaskSource):
    family = "stdio"
    levels = range(1, 4)
    system_hint = stdio_hint("python")

    def __init__(self, difficulty: int | None = None, language: str | None = None):
        if difficulty is not None:
            check_level(difficulty, self.levels, self.family)
        self.language = check_language(language)
        self.system_hint = stdio_hint(self.language)
        text = resources.files("rlvr.data").joinpath(DATA_FILE).read_text(encoding="utf-8")
        records = [json.loads(line) for line in text.splitlines() if line.strip()]
        self._all = [self._task(r) for r in records if self._accepts(r)]
        if not self._all:
            raise ValueError(f"no {self.family} task accepts {self.language}")
        self._set_difficulty(difficulty)

    def _accepts(self, record: dict[str, Any]) -> bool:
        accepted = record.get("languages")
        return accepted is None or self.language in {check_language(x) for x in accepted}

    def _task(self, record: dict[str, Any]) -> Task:
        example = record["io_tests"][0]
        name = LANGUAGE_NAMES[self.language][0]
        prompt = (f"{record['prompt']}\n\nExample input:\n```\n{example['input']}```\n"
                  f"Expected output:\n```\n{example['output']}```\n\nWrite the program in {name}.")
        fields = {"io_tests": record["io_tests"], "language": self.language}
        return Task(record["id"], prompt, None, fields, self.family, record["difficulty"])

    def _set_difficulty(self, level: int | None) -> None:
        self.difficulty = level
        self.tasks = [t for t in self._all if level is None or t.difficulty == level]
        self.size = len(self.tasks)

    def get(self, index: int) -> Task:
        return self.tasks[index]

    def verifier_spec(self) -> tuple[str, dict[str, Any]]:
        return "code", {}
