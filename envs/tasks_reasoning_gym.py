"""reasoning-gym's procedural datasets as rlvr envs: `rg/<dataset>-v0`, one per dataset.

The tasks come from the `reasoning-gym` package itself (an optional extra, pinned in
pyproject.toml); rlvr adds its answer extraction, its reasons and its trainer. An item is
`dataset[index]` of a reasoning-gym dataset built with the env's `seed`, so it is a pure
function of (dataset, seed, difficulty, config, index). The completion's final `\\boxed{}`
answer, found by rlvr's box rules (two different boxes are a hedge and score 0), goes to
reasoning-gym's own `score_answer`; a full score is 1, anything less is 0 with the reason
`wrong` (or, with `partial=True`, reasoning-gym's partial credit).

`difficulty` k is reasoning-gym's curriculum at global level k-1 (every curriculum
attribute at that level, or at its highest): rlvr's `Curriculum`, `CurriculumWrapper` and
the trainer's `curriculum` stages step through it. Without `difficulty` the dataset keeps
reasoning-gym's default configuration.

The catalogue (dataset -> category, number of curriculum levels) is a table, so that
importing `rlvr.envs` and `rlvr list` need not import reasoning-gym (seconds); a test keeps
it equal to the pinned package's own registry.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import json
import re
from typing import Any

from rlvr.envs.tasks import Task, TaskSource, check_level
from rlvr.verifiers.core import (
    BAD_REFERENCE,
    ERROR,
    PARSE_ERROR,
    TIMEOUT,
    WRONG,
    Score,
    Verifier,
    align_batch,
)
from rlvr.verifiers.format import FinalBoxed

VERSION = "0.1.25"
NAMESPACE = "rg"
INSTALL = "pip install 'rlvr[reasoning-gym]'"

# reasoning-gym 0.1.25: dataset -> (category, curriculum levels offered; 0 = none). A few of its
# curricula define levels whose configuration fails its own validation: those are left out
# (the top levels of caesar_cipher, rubiks_cube and survo, every level of knight_swap, and
# the ones in SKIPPED_LEVELS).
DATASETS: dict[str, tuple[str, int]] = {
    "ab": ("algorithmic", 4), "acre": ("induction", 0), "advanced_geometry": ("geometry", 4),
    "aiw": ("logic", 9), "arc_1d": ("arc", 4), "arc_agi": ("arc", 4), "base_conversion": ("algorithmic", 5),
    "basic_arithmetic": ("arithmetic", 5), "bf": ("code", 3), "binary_alternation": ("algorithmic", 4),
    "binary_matrix": ("algorithmic", 4), "bitwise_arithmetic": ("arithmetic", 10), "boxnet": ("games", 9),
    "caesar_cipher": ("algorithmic", 2), "calendar_arithmetic": ("arithmetic", 4),
    "chain_sum": ("arithmetic", 11), "circuit_logic": ("logic", 5), "codeio": ("code", 4),
    "coin_flip": ("probability", 13), "color_cube_rotation": ("cognition", 5),
    "complex_arithmetic": ("algebra", 4), "count_bits": ("arithmetic", 5),
    "count_primes": ("algorithmic", 5), "countdown": ("games", 5), "course_schedule": ("graphs", 5),
    "cryptarithm": ("algorithmic", 4), "decimal_arithmetic": ("arithmetic", 4),
    "decimal_chain_sum": ("arithmetic", 5), "dice": ("arithmetic", 4), "emoji_mystery": ("games", 6),
    "family_relationships": ("graphs", 9), "figlet_font": ("cognition", 6),
    "fraction_simplification": ("arithmetic", 4), "futoshiki": ("games", 4),
    "game_of_life": ("algorithmic", 4), "gcd": ("arithmetic", 4), "graph_color": ("algorithmic", 4),
    "group_anagrams": ("algorithmic", 4), "gsm_symbolic": ("arithmetic", 0),
    "intermediate_integration": ("algebra", 8), "isomorphic_strings": ("algorithmic", 4),
    "jugs": ("algorithmic", 4), "kakurasu": ("games", 4), "knight_swap": ("games", 0),
    "knights_knaves": ("logic", 4), "largest_island": ("graphs", 4), "lcm": ("arithmetic", 4),
    "leg_counting": ("arithmetic", 36), "letter_counting": ("algorithmic", 8),
    "letter_jumble": ("algorithmic", 5), "list_functions": ("induction", 0), "mahjong_puzzle": ("games", 4),
    "manipulate_matrix": ("algorithmic", 5), "maze": ("games", 4), "mini_sudoku": ("games", 5),
    "modulo_grid": ("cognition", 5), "n_queens": ("games", 5), "needle_haystack": ("cognition", 4),
    "number_filtering": ("algorithmic", 4), "number_format": ("arithmetic", 4),
    "number_sequence": ("cognition", 4), "number_sorting": ("algorithmic", 8),
    "palindrome_generation": ("algorithmic", 4), "palindrome_partitioning": ("algorithmic", 4),
    "path_star": ("graphs", 4), "polynomial_equations": ("algebra", 4),
    "polynomial_multiplication": ("algebra", 4), "pool_matrix": ("algorithmic", 4),
    "power_function": ("arithmetic", 5), "prime_factorization": ("arithmetic", 4),
    "products": ("arithmetic", 11), "propositional_logic": ("logic", 5), "puzzle24": ("games", 7),
    "quantum_lock": ("graphs", 10), "ransom_note": ("algorithmic", 4), "rearc": ("arc", 7),
    "rectangle_count": ("cognition", 5), "rotate_matrix": ("algorithmic", 5),
    "rotten_oranges": ("algorithmic", 4), "rubiks_cube": ("cognition", 4), "rush_hour": ("games", 4),
    "self_reference": ("logic", 10), "sentence_reordering": ("algorithmic", 4),
    "shortest_path": ("graphs", 4), "simple_equations": ("algebra", 4), "simple_geometry": ("geometry", 4),
    "simple_integration": ("algebra", 4), "sokoban": ("games", 14), "spell_backward": ("algorithmic", 5),
    "spiral_matrix": ("algorithmic", 4), "string_insertion": ("algorithmic", 4),
    "string_manipulation": ("algorithmic", 5), "string_splitting": ("algorithmic", 4),
    "string_synthesis": ("algorithmic", 4), "sudoku": ("games", 5), "survo": ("games", 2),
    "syllogism": ("logic", 4), "time_intervals": ("arithmetic", 7), "tower_of_hanoi": ("games", 4),
    "tsumego": ("games", 4), "word_ladder": ("algorithmic", 3),
    "word_sequence_reversal": ("algorithmic", 4), "word_sorting": ("algorithmic", 5),
    "zebra_puzzles": ("logic", 6),
}
# Registered by reasoning-gym but not offered as envs, and why.
EXCLUDED = {
    "composite": "a mixture of other datasets, configured per experiment (rlvr mixes envs itself)",
    "game_of_life_halting": "its scorer in 0.1.25 gives 1.0 to every non-empty answer (bool of a string)",
}
# reasoning-gym global levels (0-based) that fail validation, skipped when counting rlvr's levels.
SKIPPED_LEVELS = {"modulo_grid": (1,)}
# Datasets that build all their items up front, or cap their size: fewer items by default.
SIZES = {"acre": 500, "word_ladder": 20_000}
DEFAULT_SIZE = 100_000


class MissingExtra(ImportError, LookupError):
    """An optional dependency is not installed (a LookupError too, so the CLI says it in one line)."""


def available() -> bool:
    """Whether reasoning-gym is installed (without importing it)."""
    return importlib.util.find_spec("reasoning_gym") is not None


def env_id(dataset: str) -> str:
    return f"{NAMESPACE}/{dataset}-v0"


def description(dataset: str) -> str:
    category, levels = DATASETS[dataset]
    steps = f"difficulty 1-{levels}" if levels else "no curriculum"
    return f"reasoning-gym {category}: {dataset.replace('_', ' ')} ({steps}, seed)"


def require() -> None:
    """Raise MissingExtra, saying how to install it, when reasoning-gym is not installed."""
    if not available():
        raise MissingExtra(f"reasoning-gym tasks need the optional extra: {INSTALL} "
                           f"(or pip install reasoning-gym=={VERSION})")


def _factory():
    require()
    import reasoning_gym.factory

    return reasoning_gym.factory


class ReasoningGymTasks(TaskSource):
    """The items of one reasoning-gym dataset, by index.

    `config` holds the dataset's own configuration fields (see reasoning-gym's config class
    of that dataset); with `difficulty`, the curriculum sets its attributes over them.
    """

    def __init__(self, dataset: str, difficulty: int | None = None, seed: int = 0, size: int | None = None,
                 **config: Any):
        if dataset not in DATASETS:
            why = f" ({EXCLUDED[dataset]})" if dataset in EXCLUDED else ""
            raise ValueError(f"no reasoning-gym env for dataset {dataset!r}{why}")
        if not isinstance(seed, int) or isinstance(seed, bool) or seed < 0:
            raise ValueError(f"seed must be a non-negative int, got {seed!r}")
        self.factory = _factory()
        self.dataset = self.family = dataset
        self.seed, self.config = seed, config
        # distinct items per seed (reasoning-gym's `size`); indices wrap around, so the source is
        # unbounded like rlvr's own generators (size None)
        self.items = SIZES.get(dataset, DEFAULT_SIZE) if size is None else size
        levels = DATASETS[dataset][1]
        self.levels = range(1, levels + 1) if levels else None
        if difficulty is not None:
            if self.levels is None:
                raise ValueError(f"reasoning-gym's {dataset} has no curriculum, so no difficulty levels")
            check_level(difficulty, self.levels, dataset)
        self._set_difficulty(difficulty)

    def _set_difficulty(self, level: int | None) -> None:
        settings = {**self.config, "seed": self.seed, "size": self.items}
        if level is None:
            data = self.factory.create_dataset(self.dataset, **settings)
        else:
            curriculum = self.factory.create_curriculum(self.dataset)
            curriculum.set_global_level(global_level(self.dataset, level))
            dataset_cls, _ = self.factory.DATASETS[self.dataset]
            config = curriculum.generate_configuration(settings)
            if hasattr(config, "validate"):
                config.validate()
            data = dataset_cls(config=config)
        self.difficulty, self._data = level, data
        # the scorer is built with the same configuration (some scorers read it: word lists by length, ...)
        self._scoring = scoring_key(dataclasses.asdict(data.config))
        _CONFIGS.setdefault(self._scoring, dataclasses.replace(
            data.config, **{k: v for k, v in (("seed", 0), ("size", 1)) if hasattr(data.config, k)}))

    def get(self, index: int) -> Task:
        if not isinstance(index, int) or isinstance(index, bool) or index < 0:
            raise ValueError(f"task index must be a non-negative int, got {index!r}")
        index %= self.items
        entry = self._data[index]
        entry = {"question": entry["question"], "answer": entry["answer"], "metadata": entry["metadata"]}
        return Task(f"{self.dataset}/{self.seed}/{self.difficulty}/{index}", entry["question"], gold_answer(entry),
                    {"entry": entry, "config": self._scoring}, self.dataset, self.difficulty)

    def verifier_spec(self) -> tuple[str, dict[str, Any]]:
        return "reasoning_gym", {}


def global_level(dataset: str, level: int) -> int:
    """reasoning-gym's 0-based global curriculum level for rlvr difficulty `level` (1-based)."""
    skipped = SKIPPED_LEVELS.get(dataset, ())
    usable = [g for g in range(DATASETS[dataset][1] + len(skipped)) if g not in skipped]
    return usable[level - 1]


def gold_answer(entry: dict[str, Any]) -> str | None:
    """The reference answer: the entry's own, else an example solution from its metadata.

    A few puzzles accept any valid solution and carry no answer; some of them keep one valid
    solution in their metadata (graph colouring, propositional logic, the Rubik's cube). Two
    (boxnet, rush hour) carry none: their gold is None and only reasoning-gym's checker knows.
    """
    if entry.get("answer") is not None:
        return str(entry["answer"])
    meta = entry.get("metadata") or {}
    for key in ("possible_answer", "example_answer", "example_correct_answer"):
        value = meta.get(key)
        if value is not None and value != "":  # an already solved cube has an empty example
            return value if isinstance(value, str) else json.dumps(value)
    return None


def uses_other_numbers(answer: str, entry: dict[str, Any]) -> bool:
    """puzzle24: reasoning-gym 0.1.25 checks that the expression makes 24 from four numbers in
    range, not that they are the puzzle's numbers, so "4*6*1*1" would solve every puzzle.
    rlvr also requires the puzzle's own numbers, each once."""
    numbers = (entry.get("metadata") or {}).get("numbers")
    if entry["metadata"].get("source_dataset") != "puzzle24" or not isinstance(numbers, list):
        return False
    return sorted(int(n) for n in re.findall(r"\d+", answer)) != sorted(numbers)


def scoring_key(config: dict[str, Any]) -> str:
    """The dataset configuration as JSON, with the fields that only choose items (seed, size) fixed."""
    return json.dumps({**config, "seed": 0, "size": 1}, sort_keys=True, default=str)


# scoring key -> the configuration object it was made from, in the process that made the items
_CONFIGS: dict[str, Any] = {}


class ReasoningGymVerifier(Verifier):
    """reasoning-gym's `score_answer` on the final `\\boxed{}` answer of a completion.

    The task field `entry` is the reasoning-gym item (question, answer, metadata) and
    `config` the dataset configuration that made it (JSON), for the scorers that read it. The box
    is found by `FinalBoxed` (rlvr's rules: after any think block; two different boxes are
    a hedge; empty or unclosed boxes are no answer); inside it `\\{` and `\\}` stand for
    literal braces, as in LaTeX, so that an answer with unbalanced braces can be boxed
    (`box_answer` writes one). A full score is 1; below that the
    score is 0 with reason `wrong` and reasoning-gym's own score in `info["rg_score"]`,
    unless `partial=True` keeps that partial credit as the reward. A scorer that raises on
    the answer gives `parse_error`. The scorers run in a worker process (`rg_scoring`): one
    that runs past `timeout` seconds (sympy on `9**9**9**9`) is killed, with reason `timeout`.
    """

    name = "reasoning_gym"

    def __init__(self, partial: bool = False, prefilled_think: bool = False, timeout: float = 10.0):
        self.partial = partial
        self.timeout = timeout
        self.boxed = FinalBoxed(prefilled_think)

    def __repr__(self) -> str:
        return f"ReasoningGymVerifier(partial={self.partial})"

    def score(self, completion: Any, reference: Any = None, **task_fields: Any) -> Score:
        return self.score_batch([completion], [reference], [task_fields])[0]

    def score_batch(self, completions, references=None, task_fields=None) -> list[Score]:
        """All answers go to the scoring worker in one exchange."""
        references, task_fields = align_batch(completions, references, task_fields)
        scores: list[Score | None] = [None] * len(completions)
        requests, slots = [], []
        for i, (completion, fields) in enumerate(zip(completions, task_fields)):
            prepared = self._prepare(completion, fields)
            if isinstance(prepared, Score):
                scores[i] = prepared
            else:
                requests.append(prepared)
                slots.append(i)
        if requests:
            try:
                require()
                from rlvr.envs import rg_scoring  # (sockets and subprocesses: imported when first scoring)

                replies = rg_scoring.score_many(requests, self.timeout)
            except MissingExtra as exc:
                replies = [("error", str(exc))] * len(requests)
            except RuntimeError as exc:  # the scoring process cannot start: infrastructure
                replies = [("error", str(exc))] * len(requests)
            for i, request, reply in zip(slots, requests, replies):
                scores[i] = self._verdict(request[3], request[4], *reply)
        return scores  # type: ignore[return-value]

    def _prepare(self, completion: Any, fields: dict[str, Any]) -> Score | tuple:
        """A zero with its reason, or the scoring worker's request for this completion."""
        entry = fields.get("entry")
        meta = entry.get("metadata") if isinstance(entry, dict) else None
        if not isinstance(meta, dict) or meta.get("source_dataset") not in DATASETS:
            return Score(0.0, BAD_REFERENCE, info={"why": "the task has no reasoning-gym entry"})
        found = self.boxed.score(completion)
        if found.value < 1:
            return Score(0.0, found.reason, info=found.info)
        answer = found.info["answer"].strip().replace("\\{", "{").replace("\\}", "}")
        key = fields.get("config") if isinstance(fields.get("config"), str) else None
        return meta["source_dataset"], key, _CONFIGS.get(key), answer, entry

    def _verdict(self, answer: str, entry: dict[str, Any], status: str, value: Any) -> Score:
        if status == "error":
            return Score(0.0, ERROR, info={"why": value})
        if status == "timeout":
            return Score(0.0, TIMEOUT, info={"answer": answer, "why": value})
        if status != "ok":  # the scorer failed on the model's answer: the answer's fault
            return Score(0.0, PARSE_ERROR, info={"answer": answer, "why": value})
        if value >= 1.0 - 1e-9 and uses_other_numbers(answer, entry):
            return Score(0.0, WRONG, info={"answer": answer, "rg_score": value,
                                           "why": "the expression does not use the puzzle's numbers"})
        if value >= 1.0 - 1e-9:
            return Score(1.0, info={"answer": answer})
        kept = value if self.partial and value > 0 else 0.0
        return Score(kept, WRONG, info={"answer": answer, "rg_score": value})


def box_answer(answer: str) -> str:
    """`\\boxed{answer}`, escaping the braces when they do not balance (the verifier unescapes them)."""
    depth = 0
    for ch in answer:
        depth += {"{": 1, "}": -1}.get(ch, 0)
        if depth < 0:
            break
    if depth:
        answer = answer.replace("{", "\\{").replace("}", "\\}")
    return f"\\boxed{{{answer}}}"


def register_all(register) -> None:
    """Register every dataset's env id with `register(env_id, entry_point=..., ...)` (no import of the package)."""
    extra = "" if available() else f" [optional extra: {INSTALL}]"
    for dataset, (category, _) in DATASETS.items():
        register(env_id(dataset), entry_point="rlvr.envs.catalog:reasoning_gym", kwargs={"dataset": dataset},
                 description=description(dataset) + extra, family=category, replace=True)
