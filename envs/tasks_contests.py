"""Competitive programming with stdin/stdout tests: CodeContests, TACO and APPS.

Each loader turns one dataset's records into the stdin/stdout tasks of `rlvr/StdioCode-v0`
(`io_tests` = [{"input", "output"}]), scored in the sandbox by the code verifier: the
reward is the share of tests passed, `correct` means all passed. The data are read from
the hub or a local file (`rlvr.envs.datasets`); none of it is in the repository.

- CodeContests: `description`, tests in `public_tests` / `private_tests` / `generated_tests`
  as {"input": [...], "output": [...]}; difficulty from the Codeforces rating (when known).
- APPS and TACO: `question`, `input_output` a JSON string {"inputs": [...], "outputs": [...]}
  (an input or output may itself be a list of lines); problems with `fn_name` are
  call-based, not stdin/stdout, and are left out. Difficulty from the dataset's labels.

`language` is that of `rlvr/StdioCode-v0` (any of the sandbox's; default Python): the
system prompt names it and every task carries it as the field `language`, which the code
verifier compiles and runs.
"""

from __future__ import annotations

import json
from typing import Any

from rlvr.envs.datasets import DatasetTasks, Hub, load_records, need_fields
from rlvr.envs.tasks import Task, check_level
from rlvr.envs.tasks_stdio import check_language, stdio_hint

APPS_LEVELS = {"introductory": 1, "interview": 2, "competition": 3}
TACO_LEVELS = {"EASY": 1, "MEDIUM": 2, "MEDIUM_HARD": 3, "HARD": 4, "VERY_HARD": 5}
CF_RATING_LEVELS = (1200, 1600, 2000, 2400)  # below each bound: levels 1..4; above the last: 5


class ContestTasks(DatasetTasks):
    """Stdin/stdout problems from one dataset; `difficulty` keeps one level, `max_tests` caps the tests."""

    FIELDS: tuple[str, ...] = ()

    def __init__(self, split: str = "train", path: str | None = None, name: str | None = None,
                 difficulty: int | None = None, max_tests: int | None = None, language: str | None = None):
        if difficulty is not None:
            check_level(difficulty, self.levels, self.family)
        if max_tests is not None and (not isinstance(max_tests, int) or max_tests < 1):
            raise ValueError(f"max_tests must be a positive int, got {max_tests!r}")
        where, records = load_records(self, split, path, name)
        need_fields(records, self.FIELDS, self.DATASET, where)
        self.language = check_language(language)
        self.system_hint = stdio_hint(self.language)
        self._all = []
        for i, record in enumerate(records):
            problem = self.problem(record)
            if problem is None:
                continue
            prompt, tests, level = problem
            tests = tests[:max_tests] if max_tests else tests
            fields = {"io_tests": tests, "language": self.language}
            self._all.append(Task(f"{self.family}/{split}/{i}", prompt, None, fields, self.family, level))
        self._set_difficulty(difficulty)
        if not self.tasks:
            raise ValueError(f"{self.family}: the selection holds no stdin/stdout problems")

    def problem(self, record: dict[str, Any]) -> tuple[str, list[dict[str, str]], int | None] | None:
        """(prompt, io tests, level) of one record, or None for a record without stdin/stdout tests."""
        raise NotImplementedError

    def _set_difficulty(self, level: int | None) -> None:
        self.difficulty = level
        self.tasks = [t for t in self._all if level is None or t.difficulty == level]
        self.size = len(self.tasks)

    def verifier_spec(self) -> tuple[str, dict[str, Any]]:
        return "code", {}


def _text(value: Any) -> str | None:
    """A test's input or output as text: a list of lines is joined; the text ends with a newline."""
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        value = "\n".join(value)
    if not isinstance(value, str):
        return None
    return value if value.endswith("\n") or not value else value + "\n"


def _pairs(inputs: Any, outputs: Any) -> list[dict[str, str]]:
    if not isinstance(inputs, list) or not isinstance(outputs, list) or len(inputs) != len(outputs):
        return []
    pairs = [(_text(i), _text(o)) for i, o in zip(inputs, outputs)]
    return [{"input": i, "output": o} for i, o in pairs if i is not None and o is not None]


class CodeContestsTasks(ContestTasks):
    """DeepMind's CodeContests (AlphaCode): public and private tests, and optionally the generated ones."""

    family = "code_contests"
    levels = range(1, 6)
    DATASET, SPLITS, LOCAL = "CodeContests", ("train", "valid", "test"), "code_contests/{split}.jsonl"
    HUB = Hub("deepmind/code_contests")
    FIELDS = ("description", "public_tests")

    def __init__(self, split: str = "train", path: str | None = None, name: str | None = None,
                 difficulty: int | None = None, max_tests: int | None = None, language: str | None = None,
                 generated: bool = False):
        self.generated = generated
        super().__init__(split, path, name, difficulty, max_tests, language)

    def problem(self, record):
        kinds = ("public_tests", "private_tests") + (("generated_tests",) if self.generated else ())
        tests = [t for kind in kinds for t in _pairs(*_io(record.get(kind)))]
        if not tests:
            return None
        rating = record.get("cf_rating") or 0
        level = None if not rating else 1 + sum(rating >= bound for bound in CF_RATING_LEVELS)
        return record["description"], tests, level


def _io(tests: Any) -> tuple[Any, Any]:
    return (tests.get("input"), tests.get("output")) if isinstance(tests, dict) else (None, None)


class _InputOutputTasks(ContestTasks):
    """APPS-style records: `question` and a JSON `input_output`."""

    FIELDS = ("question", "input_output")
    LEVEL_NAMES: dict[str, int] = {}

    def problem(self, record):
        try:
            spec = json.loads(record["input_output"]) if isinstance(record["input_output"], str) \
                else record["input_output"]
        except json.JSONDecodeError:
            return None
        if not isinstance(spec, dict) or spec.get("fn_name"):
            return None  # call-based: the tests call a function, not stdin/stdout
        tests = _pairs(spec.get("inputs"), spec.get("outputs"))
        if not tests:
            return None
        return record["question"], tests, self.LEVEL_NAMES.get(str(record.get("difficulty")))


class APPSTasks(_InputOutputTasks):
    """APPS: 10,000 problems (introductory, interview, competition = levels 1-3)."""

    family = "apps"
    levels = range(1, 4)
    LEVEL_NAMES = APPS_LEVELS
    DATASET, SPLITS, LOCAL = "APPS", ("train", "test"), "apps/{split}.jsonl"
    HUB = Hub("codeparrot/apps", files=(("train", "train.jsonl"), ("test", "test.jsonl")))


class TACOTasks(_InputOutputTasks):
    """TACO: 26,443 problems in APPS' format, levels EASY..VERY_HARD = 1-5."""

    family = "taco"
    levels = range(1, 6)
    LEVEL_NAMES = TACO_LEVELS
    DATASET, SPLITS, LOCAL = "TACO", ("train", "test"), "taco/{split}.jsonl"
    HUB = Hub("BAAI/TACO", files=(("train", "ALL/train-*.parquet"), ("test", "ALL/test-*.parquet")))
