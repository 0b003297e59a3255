"""Dataset-backed tasks: GSM8K, MATH (train/test and MATH-500), DeepScaleR, AIME, HumanEval, MBPP.

Records are read with the `datasets` library, from a local JSONL / JSON / Parquet file (or
a folder of them) or from a hub id. Without `path`, each loader reads its copy under the
data root (`$RLVR_DATA_DIR` if set, else `shared/datasets` beside the repository) when
there is one, and otherwise its usual hub dataset by its common id (`HUB`), which
`datasets` caches, so a plain `pip install` works and later runs work offline. Gold answers
are extracted here, once: GSM8K's number after `####` (thousands separators removed),
MATH's `answer` field or, in the original MATH format, the last `\\boxed{}` of the solution.
"""

from __future__ import annotations

import ast
import builtins
import os
import re
from dataclasses import dataclass
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


@dataclass(frozen=True)
class Hub:
    """Where a dataset lives on the Hugging Face hub: its id, config and split names.

    `splits` maps rlvr's split names to the hub's (`datasets` split syntax, so "a+b" joins
    two); `files` names raw data files in the repository by split, for repositories that
    `datasets` cannot load by id (their loading script is no longer supported).
    """

    path: str
    name: str | None = None
    splits: tuple[tuple[str, str], ...] = ()
    files: tuple[tuple[str, str], ...] = ()

    def split(self, split: str) -> str:
        return dict(self.splits).get(split, split)

    def read(self, split: str) -> list[dict[str, Any]]:
        files = dict(self.files)
        if files:
            if split not in files:
                raise ValueError(f"{self.path} has splits {', '.join(files)}; got {split!r}")
            kind = "parquet" if files[split].endswith(".parquet") else "json"
            return read_records(kind, split, None, data_files=f"hf://datasets/{self.path}/{files[split]}")
        return read_records(self.path, self.split(split), self.name)


def read_records(path: str | os.PathLike, split: str = "train", name: str | None = None,
                 data_files: str | None = None) -> list[dict[str, Any]]:
    """All records of a local file/folder, or of `split` of a hub dataset `path` (config `name`)."""
    return [dict(r) for r in _read(str(path), split, name, data_files)]


def read_default(dataset: str, local: Path, hub: Hub, split: str) -> list[dict[str, Any]]:
    """The copy at `local` if there is one, else the hub dataset (from `datasets`' cache when offline)."""
    if local.exists():
        return read_records(local, split)
    try:
        return hub.read(split)
    except LookupError as exc:
        why = " ".join(str(exc).split())[:300]
        raise LookupError(
            f"{dataset}: no local copy at {local} and the hub dataset {hub.path!r} could not be read ({why}); "
            f"pass path=FILE (a .jsonl, .json or .parquet file, or a folder of them) or set {DATA_DIR_VAR}"
        ) from None


@lru_cache(maxsize=32)
def _read(path: str, split: str, name: str | None, data_files: str | None = None) -> tuple:
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
            data = datasets.load_dataset(path, name, split=split, data_files=data_files)
        except Exception as exc:  # hub errors are many types; the user needs one line
            what = data_files or path
            raise LookupError(f"cannot load dataset {what!r} (split {split!r}) from the hub: "
                              f"{' '.join(str(exc).split())[:300]}") from None
    return tuple(data)


def _looks_local(path: str) -> bool:
    local = Path(path).expanduser()
    return local.exists() or local.suffix in LOCAL_SUFFIXES or path.startswith((".", "/", "~")) or "\\" in path


def load_records(source: Any, split: str, path: Any, name: str | None) -> tuple[Any, list[dict[str, Any]]]:
    """(where, records) for a dataset source class with DATASET, SPLITS, LOCAL and HUB."""
    if path is not None:
        return path, read_records(path, split, name)
    _check_split(split, source.SPLITS, source.DATASET)
    local = data_root() / source.LOCAL.format(split=split)
    return local, read_default(source.DATASET, local, source.HUB, split)


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
    DATASET, SPLITS, LOCAL = "GSM8K", ("train", "test"), "gsm8k/{split}.jsonl"
    HUB = Hub("openai/gsm8k", "main")

    def __init__(self, split: str = "test", path: str | None = None, name: str | None = None):
        if path is not None and not _looks_local(str(path)) and name is None:
            name = "main"
        path, records = load_records(self, split, path, name)
        need_fields(records, ("question", "answer"), "GSM8K", path)
        super().__init__([
            Task(f"gsm8k/{split}/{i}", r["question"], gsm8k_gold(r["answer"]), {}, self.family)
            for i, r in enumerate(records)
        ])


# --- MATH / MATH-500 -------------------------------------------------------------------


def math_gold(record: dict[str, Any]) -> str | None:
    """MATH-500's `answer` field, else the last closed `\\boxed{}` of the solution (original MATH)."""
    answer = record.get("answer")
    if isinstance(answer, (int, float)) and not isinstance(answer, bool):
        return str(answer)
    if isinstance(answer, str) and answer.strip():
        return answer.strip()
    boxes = [b for b in find_boxes(record.get("solution") or "") if b.closed]
    return boxes[-1].content.strip() if boxes else None


def _level(value: Any) -> int | None:
    if isinstance(value, int):
        return value
    found = re.search(r"\d+", str(value or ""))
    return int(found.group()) if found else None


class MathTasks(DatasetTasks):
    """MATH-format problems (MATH-500 by default). `difficulty` keeps one level (1..5), `subject` one subject.

    Records hold `problem` and either `answer` or a `solution` ending in a boxed answer
    (field names in any case: AIME copies write `Problem` and `Answer`).
    """

    family = "math"
    levels = range(1, 6)
    DATASET, SPLITS, LOCAL = "MATH-500", ("test",), "math500/{split}.jsonl"
    HUB = Hub("HuggingFaceH4/MATH-500")
    DEFAULT_SPLIT = "test"

    def __init__(self, split: str | None = None, path: str | None = None, difficulty: int | None = None,
                 subject: str | None = None, name: str | None = None):
        split = self.DEFAULT_SPLIT if split is None else split
        if difficulty is not None:
            check_level(difficulty, self.levels, "MATH")
        path, records = load_records(self, split, path, name)
        records = [{k.lower(): v for k, v in r.items()} for r in records]
        need_fields(records, ("problem",), self.DATASET, path)
        self._all = [
            Task(str(r.get("unique_id") or f"{self.family}/{split}/{i}"), r["problem"], math_gold(r),
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


class MathTrainTasks(MathTasks):
    """The full MATH dataset: 7,500 training and 5,000 test problems, levels 1-5, seven subjects."""

    DATASET, SPLITS, LOCAL = "MATH", ("train", "test"), "math/{split}.jsonl"
    HUB = Hub("DigitalLearningGmbH/MATH-lighteval", "default")
    DEFAULT_SPLIT = "train"


class DeepScaleRTasks(MathTasks):
    """DeepScaleR's RL set: about 40k competition problems (AIME, AMC, Omni-MATH, STILL) with answers."""

    family = "deepscaler"
    levels = None
    DATASET, SPLITS, LOCAL = "DeepScaleR", ("train",), "deepscaler/{split}.jsonl"
    HUB = Hub("agentica-org/DeepScaleR-Preview-Dataset")
    DEFAULT_SPLIT = "train"

    def __init__(self, split: str | None = None, path: str | None = None, name: str | None = None):
        super().__init__(split, path, None, None, name)


class AIMETasks(MathTasks):
    """One year of AIME (I and II, 30 problems): an evaluation set whose answers are integers 0-999."""

    levels = None
    SPLITS = ("test",)
    YEARS = {2024: Hub("HuggingFaceH4/aime_2024", splits=(("test", "train"),)),
             2025: Hub("yentinglin/aime_2025", splits=(("test", "train"),))}

    def __init__(self, year: int = 2024, split: str | None = None, path: str | None = None, name: str | None = None):
        if year not in self.YEARS:
            raise ValueError(f"AIME years: {', '.join(map(str, self.YEARS))}; got {year!r}")
        self.family, self.DATASET = f"aime{year}", f"AIME {year}"
        self.LOCAL, self.HUB = f"aime{year}/{{split}}.jsonl", self.YEARS[year]
        super().__init__(split, path, None, None, name)


# --- HumanEval -------------------------------------------------------------------------


class HumanEvalTasks(DatasetTasks):
    """HumanEval: the model writes the whole function; the prompt (imports, helpers) runs first."""

    family = "humaneval"
    system_hint = CODE_HINT
    DATASET, SPLITS, LOCAL = "HumanEval", ("test",), "humaneval/HumanEval.jsonl"
    HUB = Hub("openai/openai_humaneval")

    def __init__(self, split: str = "test", path: str | None = None, name: str | None = None):
        path, records = load_records(self, split, path, name)
        need_fields(records, ("task_id", "prompt", "test", "entry_point"), "HumanEval", path)
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
    DATASET, SPLITS, LOCAL = "MBPP", tuple(MBPP_SPLITS), "mbpp/mbpp.jsonl"
    # the hub's four splits hold the same task-id ranges; read them all and select by id
    HUB = Hub("google-research-datasets/mbpp", "full",
              splits=tuple((s, "train+test+validation+prompt") for s in MBPP_SPLITS))

    def __init__(self, split: str = "test", path: str | None = None, name: str | None = None):
        _check_split(split, tuple(MBPP_SPLITS), "MBPP")
        path, records = load_records(self, split, path, name)
        need_fields(records, ("task_id", "text", "test_list"), "MBPP", path)
        low, high = MBPP_SPLITS[split]
        super().__init__([
            Task(f"mbpp/{r['task_id']}",
                 f"{r['text']}\n\nYour code should pass this test:\n{r['test_list'][0]}",
                 None, _mbpp_fields(r), self.family)
            for r in records if low <= int(r["task_id"]) <= high
        ])

    def verifier_spec(self) -> tuple[str, dict[str, Any]]:
        return "code", {}


def _mbpp_fields(record: dict[str, Any]) -> dict[str, Any]:
    fields = {"test_list": list(record["test_list"]), "test_setup_code": record.get("test_setup_code") or ""}
    entry = mbpp_entry_point(record)
    if entry is not None:
        fields["entry_point"] = entry
    return fields


def mbpp_entry_point(record: dict[str, Any]) -> str | None:
    """The function under test: the first name the first test calls that the reference defines.

    MBPP records do not name it, and the sandbox needs it when it shadows a builtin (MBPP/126's
    function is `sum`): without it, the test would call the builtin and no program could pass.
    """
    try:
        test = ast.parse(record["test_list"][0])
    except (SyntaxError, IndexError, TypeError):
        return None
    calls = sorted((n.lineno, n.col_offset, n.func.id) for n in ast.walk(test)
                   if isinstance(n, ast.Call) and isinstance(n.func, ast.Name))
    try:
        defined = {n.name for n in ast.parse(record.get("code") or "").body
                   if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))}
    except SyntaxError:
        defined = set()
    for *_, name in calls:
        if name in defined:
            return name
    return next((name for *_, name in calls if not hasattr(builtins, name)), None)


def need_fields(records: list[dict[str, Any]], fields: tuple[str, ...], dataset: str, path: Any) -> None:
    if records and any(f not in records[0] for f in fields):
        missing = [f for f in fields if f not in records[0]]
        raise ValueError(f"{path} is not in {dataset} format: records lack {', '.join(missing)}")
