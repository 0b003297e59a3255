"""Dataset-backed tasks: GSM8K, MATH / MATH-500, HumanEval and MBPP.

Records are read with the `datasets` library, from a local JSONL / JSON / Parquet file (or
a folder of them) or from a hub id. By default each loader reads the copy under the data
root: `$RLVR_DATA_DIR` if set, else `shared/datasets` beside the repository. Gold answers
are extracted here, once: GSM8K's number after `####` (thousands separators removed),
MATH's `answer` field or, in the original MATH format, the last `\\boxed{}` of the solution.
"""

from __future__ import annotations

import os
import re
from functools import lru_cache
from pathlib import Path
from typing import Any

from rlvr.envs.tasks import CODE_HINT, Task, TaskSource, check_level
from rlvr.verifiers.boxes import find_boxes

DATA_DIR_VAR = "RLVR_DATA_DIR"
LOCAL_SUFFIXES = {".jsonl": "json", ".json": "json", ".parquet": "parquet"}


def data_root() -> Path:
    """Where the default copies of the public datasets live."""
    if os.environ.get(DATA_DIR_VAR):
        return Path(os.environ[DATA_DIR_VAR])
    return Path(__file__).resolve().parents[1].parent / "shared" / "datasets"


def read_records(path: str | os.PathLike, split: str = "train", name: str | None = None) -> list[dict[str, Any]]:
    """All records of a local file/folder, or of `split` of a hub dataset `path` (config `name`)."""
    return [dict(r) for r in _read(str(path), split, name)]


@lru_cache(maxsize=32)
def _read(path: str, split: str, name: str | None) -> tuple:
    import datasets

    datasets.disable_progress_bars()
    local = Path(path).expanduser()
    if _looks_local(path):
        files = sorted(p for p in local.iterdir() if p.suffix in LOCAL_SUFFIXES) if local.is_dir() else [local]
        if not local.exists() or not files:
            raise FileNotFoundError(f"no such dataset file: {path}")
        kind = LOCAL_SUFFIXES.get(files[0].suffix)
        if kind is None:
            raise ValueError(f"unsupported dataset file {path} (use .jsonl, .json or .parquet)")
        data = datasets.load_dataset(kind, data_files=[str(f) for f in files], split="train")
    else:
        try:
            data = datasets.load_dataset(path, name, split=split)
        except Exception as exc:  # hub errors are many types; the user needs one line
            raise LookupError(f"cannot load dataset {path!r} (split {split!r}) from the hub: {exc}") from None
    return tuple(data)


def _looks_local(path: str) -> bool:
    local = Path(path).expanduser()
    return local.exists() or local.suffix in LOCAL_SUFFIXES or path.startswith((".", "/", "~")) or "\\" in path


def _check_split(split: str, splits: tuple[str, ...], dataset: str) -> None:
    if split not in splits:
        raise ValueError(f"{dataset} has splits {', '.join(splits)}; got {split!r}")


class DatasetTasks(TaskSource):
    """Tasks from dataset records; `get(i)` is record i of the split."""

    def __init__(self, tasks: list[Task]):
        if not tasks:
            raise ValueError(f"{self.family}: the selection holds no tasks")
        self.tasks = tasks
        self.size = len(tasks)

    def get(self, index: int) -> Task:
        return self.tasks[index]


# --- GSM8K -----------------------------------------------------------------------------


def gsm8k_gold(solution: str) -> str | None:
    """The final answer of a GSM8K solution: the number after `####`, without commas."""
    if "####" not in solution:
        return None
    return solution.rsplit("####", 1)[1].strip().replace(",", "").rstrip(".")


class GSM8KTasks(DatasetTasks):
    family = "gsm8k"

    def __init__(self, split: str = "test", path: str | None = None, name: str | None = None):
        if path is None:
            _check_split(split, ("train", "test"), "GSM8K")
            path = data_root() / "gsm8k" / f"{split}.jsonl"
        elif not _looks_local(str(path)) and name is None:
            name = "main"
        records = read_records(path, split, name)
        _need_fields(records, ("question", "answer"), "GSM8K", path)
        super().__init__([
            Task(f"gsm8k/{split}/{i}", r["question"], gsm8k_gold(r["answer"]), {}, self.family)
            for i, r in enumerate(records)
        ])


# --- MATH / MATH-500 -------------------------------------------------------------------


def math_gold(record: dict[str, Any]) -> str | None:
    """MATH-500's `answer` field, else the last closed `\\boxed{}` of the solution (original MATH)."""
    if isinstance(record.get("answer"), str) and record["answer"].strip():
        return record["answer"].strip()
    boxes = [b for b in find_boxes(record.get("solution") or "") if b.closed]
    return boxes[-1].content.strip() if boxes else None


def _level(value: Any) -> int | None:
    if isinstance(value, int):
        return value
    found = re.search(r"\d+", str(value or ""))
    return int(found.group()) if found else None


class MathTasks(DatasetTasks):
    """MATH-format problems (MATH-500 by default). `difficulty` keeps one level (1..5), `subject` one subject."""

    family = "math"
    levels = range(1, 6)

    def __init__(self, split: str = "test", path: str | None = None, difficulty: int | None = None,
                 subject: str | None = None, name: str | None = None):
        if path is None:
            _check_split(split, ("test",), "MATH-500")
            path = data_root() / "math500" / "test.jsonl"
        if difficulty is not None:
            check_level(difficulty, self.levels, "MATH")
        records = read_records(path, split, name)
        _need_fields(records, ("problem",), "MATH", path)
        self._all = [
            Task(str(r.get("unique_id") or f"math/{split}/{i}"), r["problem"], math_gold(r),
                 {}, self.family, _level(r.get("level")))
            for i, r in enumerate(records)
            if subject is None or (r.get("subject") or r.get("type")) == subject
        ]
        self.difficulty = difficulty
        super().__init__([t for t in self._all if difficulty is None or t.difficulty == difficulty])

    def _set_difficulty(self, level: int) -> None:
        tasks = [t for t in self._all if t.difficulty == level]
        if not tasks:
            raise ValueError(f"MATH: no tasks of level {level} in this selection")
        self.difficulty, self.tasks, self.size = level, tasks, len(tasks)


# --- HumanEval -------------------------------------------------------------------------


class HumanEvalTasks(DatasetTasks):
    """HumanEval: the model writes the whole function; the prompt (imports, helpers) runs first."""

    family = "humaneval"
    system_hint = CODE_HINT

    def __init__(self, split: str = "test", path: str | None = None, name: str | None = None):
        if path is None:
            _check_split(split, ("test",), "HumanEval")
            path = data_root() / "humaneval" / "HumanEval.jsonl"
        records = read_records(path, split, name)
        _need_fields(records, ("task_id", "prompt", "test", "entry_point"), "HumanEval", path)
        super().__init__([
            Task(r["task_id"],
                 f"Complete the following Python function `{r['entry_point']}`; "
                 f"reply with the whole function.\n\n```python\n{r['prompt']}```",
                 None, {"tests": r["test"], "entry_point": r["entry_point"], "prefix": r["prompt"]}, self.family)
            for r in records
        ])

    def verifier_spec(self) -> tuple[str, dict[str, Any]]:
        return "code", {}


# --- MBPP ------------------------------------------------------------------------------

MBPP_SPLITS = {"test": (11, 510), "validation": (511, 600), "train": (601, 974), "prompt": (1, 10),
               "full": (1, 974)}


class MBPPTasks(DatasetTasks):
    """MBPP with the standard task-id splits; the prompt shows the first of the three tests."""

    family = "mbpp"
    system_hint = CODE_HINT

    def __init__(self, split: str = "test", path: str | None = None, name: str | None = None):
        _check_split(split, tuple(MBPP_SPLITS), "MBPP")
        if path is None:
            path = data_root() / "mbpp" / "mbpp.jsonl"
        records = read_records(path, split, name)
        _need_fields(records, ("task_id", "text", "test_list"), "MBPP", path)
        low, high = MBPP_SPLITS[split]
        super().__init__([
            Task(f"mbpp/{r['task_id']}",
                 f"{r['text']}\n\nYour code should pass this test:\n{r['test_list'][0]}",
                 None, {"test_list": list(r["test_list"]), "test_setup_code": r.get("test_setup_code") or ""},
                 self.family)
            for r in records if low <= int(r["task_id"]) <= high
        ])

    def verifier_spec(self) -> tuple[str, dict[str, Any]]:
        return "code", {}


def _need_fields(records: list[dict[str, Any]], fields: tuple[str, ...], dataset: str, path: Any) -> None:
    if records and any(f not in records[0] for f in fields):
        missing = [f for f in fields if f not in records[0]]
        raise ValueError(f"{path} is not in {dataset} format: records lack {', '.join(missing)}")
