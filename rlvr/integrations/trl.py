"""TRL: rlvr verifiers and envs as `reward_funcs` for `GRPOTrainer` (and TRL's other online trainers).

TRL calls each reward function as `f(prompts=..., completions=..., completion_ids=...,
**columns)` where `columns` are the dataset's other columns (one value per completion)
plus `trainer_state`, `log_extra` and `log_metric`; it wants one float per completion, or
None where the function does not apply. Completions are strings, or chat messages for
conversational datasets; both work here.

`RewardFunc("math", reference="answer")` scores with a registered verifier: the `reference`
column is the reference answer and the other columns are passed as task fields (so an
MBPP-style dataset with `test_list` works with `RewardFunc("code")` as is). `when=` limits
it to some rows of a mixed dataset. `EnvReward("rlvr/Arithmetic-v0")` scores completions of
prompts made by `env_dataset`, which records the reset seed of every row.

`environment_factory(env_id, **env_kwargs)` (in `rlvr.integrations.trl_environment`) is the
other way in: any rlvr env, tool envs included, as `GRPOTrainer(environment_factory=...)`.

Both reward functions log the mean of each reward component and the share of each failure reason through
TRL's `log_metric`, and the reason of every completion through `log_extra`. Both pickle
(the verifier is rebuilt, with its worker pools, in the process that unpickles them).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from rlvr.integrations.scoring import Item, get_verifier, score_items
from rlvr.verifiers.core import Verifier

# Keyword arguments TRL adds that are not dataset columns.
TRL_KWARGS = frozenset({"trainer_state", "log_extra", "log_metric", "environments", "completion_ids"})
SEED_COLUMN = "rlvr_seed"
SCORE_ARGUMENTS = frozenset({"completion", "reference"})  # `Verifier.score`'s own parameters, never fields


class LoggedReward:
    """Shared by the reward classes: TRL's name, and metrics from the score dicts."""

    def __init__(self, name: str, prefix: str | None = None):
        self.__name__ = name
        self.prefix = prefix or name  # of the metrics logged
        self._reasons_seen: set[str] = set()

    def _log(self, results: Sequence[dict[str, Any] | None], kwargs: Mapping[str, Any]) -> None:
        scored = [r for r in results if r is not None]
        log_metric, log_extra = kwargs.get("log_metric"), kwargs.get("log_extra")
        if callable(log_metric) and scored:
            for key in sorted({k for r in scored for k in r["components"]}):
                values = [r["components"][key] for r in scored if key in r["components"]]
                log_metric(f"{self.prefix}/{key}", sum(values) / len(values))
            # Once a reason has shown up it is logged every step, so its mean is not biased upwards.
            self._reasons_seen.update(r["reason"] for r in scored if r["reason"])
            for reason in sorted(self._reasons_seen):
                share = sum(r["reason"] == reason for r in scored) / len(scored)
                log_metric(f"{self.prefix}/reason/{reason}", share)
        if callable(log_extra):
            log_extra(f"{self.prefix}_reason", [None if r is None else r["reason"] for r in results])


class RewardFunc(LoggedReward):
    """A TRL reward function that scores with verifier `verifier` (a registered name or an instance).

    `reference`: the dataset column holding the reference answer (None: no reference).
    `fields`: the columns passed as task fields (default: every dataset column except the
    reference and columns named `completion` or `reference`, which are `score`'s own parameters).
    `when`: `{column: value or list of values}`; rows that do not match get None.
    `options`: constructor options when `verifier` is a name.
    """

    def __init__(self, verifier: str | Verifier = "math", *, reference: str | None = None,
                 fields: Sequence[str] | None = None, when: Mapping[str, Any] | None = None,
                 name: str | None = None, **options: Any):
        if isinstance(verifier, Verifier):
            if options:
                raise TypeError("options are for a verifier given by name; configure the instance instead")
            label = verifier.name
        elif isinstance(verifier, str):
            get_verifier(verifier, options)  # fail now, not at the first training step
            label = verifier
        else:
            raise TypeError(f"verifier must be a registered name or a Verifier, got {type(verifier).__name__}")
        super().__init__(name or label)
        self.verifier = verifier
        self.options = options
        self.reference = reference
        self.fields = None if fields is None else tuple(fields)
        self.when = {k: _as_set(v) for k, v in (when or {}).items()}

    def __call__(self, prompts=None, completions=None, **kwargs: Any) -> list[float | None]:
        if completions is None:
            raise TypeError("TRL reward functions are called with completions=")
        n = len(completions)
        columns = {k: v for k, v in kwargs.items() if k not in TRL_KWARGS}
        references = self._column(columns, self.reference, n) if self.reference else [None] * n
        names = self.fields if self.fields is not None else [
            k for k in columns if k != self.reference and k not in SCORE_ARGUMENTS]
        field_columns = {k: self._column(columns, k, n) for k in names}
        when = [(self._column(columns, k, n), ok) for k, ok in self.when.items()]
        rows = [i for i in range(n) if all(column[i] in ok for column, ok in when)]
        verifier = self.verifier if isinstance(self.verifier, Verifier) else get_verifier(self.verifier, self.options)
        scores = verifier.score_batch(
            [completions[i] for i in rows],
            [references[i] for i in rows],
            [{k: col[i] for k, col in field_columns.items()} for i in rows],
        )
        results: list[dict[str, Any] | None] = [None] * n
        for i, score in zip(rows, scores):
            results[i] = score.to_dict()
        self._log(results, kwargs)
        return [None if r is None else float(r["score"]) for r in results]

    @staticmethod
    def _column(columns: Mapping[str, Any], key: str, n: int) -> list[Any]:
        if key not in columns:
            raise KeyError(f"the dataset has no column {key!r} (columns: {', '.join(sorted(columns)) or 'none'})")
        values = list(columns[key])
        if len(values) != n:
            raise ValueError(f"column {key!r} has {len(values)} values for {n} completions")
        return values

    def __repr__(self) -> str:
        return f"RewardFunc({self.verifier!r}, reference={self.reference!r}, name={self.__name__!r})"


class EnvReward(LoggedReward):
    """A TRL reward function scoring with env `env_id`, for datasets made by `env_dataset`."""

    def __init__(self, env_id: str, *, name: str | None = None, **env_kwargs: Any):
        super().__init__(name or env_id.split("/")[-1])
        self.env_id = env_id
        self.env_kwargs = env_kwargs

    def __call__(self, prompts=None, completions=None, **kwargs: Any) -> list[float | None]:
        if completions is None:
            raise TypeError("TRL reward functions are called with completions=")
        seeds = RewardFunc._column(kwargs, SEED_COLUMN, len(completions))
        items = [Item(completion=c, env=self.env_id, options=self.env_kwargs, seed=int(s))
                 for c, s in zip(completions, seeds)]
        results = score_items(items)
        self._log(results, kwargs)
        return [float(r["score"]) for r in results]

    def __repr__(self) -> str:
        return f"EnvReward({self.env_id!r}, **{self.env_kwargs!r})"


def env_dataset(env_id: str, n: int, *, seed: int = 0, **env_kwargs: Any):
    """A `datasets.Dataset` of `n` prompts from env `env_id` (reset seeds `seed`..`seed+n-1`).

    Columns: `prompt` (chat messages), `rlvr_seed`, `task_id`, `family`, `difficulty`.
    """
    import gymnasium
    from datasets import Dataset

    import rlvr.envs  # noqa: F401  (registers the rlvr/* ids)

    env = gymnasium.make(env_id, **env_kwargs)
    rows = []
    try:
        for s in range(seed, seed + n):
            obs, info = env.reset(seed=s)
            rows.append({"prompt": obs, SEED_COLUMN: s, "task_id": str(info.get("task_id")),
                         "family": str(info.get("family")), "difficulty": info.get("difficulty")})
    finally:
        env.close()
    return Dataset.from_list(rows)


def _as_set(value: Any) -> frozenset:
    if isinstance(value, (list, tuple, set, frozenset)):
        return frozenset(value)
    return frozenset([value])
