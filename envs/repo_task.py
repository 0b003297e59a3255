"""The repository task format: a real package at a known version with one bug to fix.

A `RepoTask` says which image to start (one per package version, built on first use by
`rlvr.sandbox.repo_image`), where the repository lives in it, how to break it (the
`mutation.patch`, applied when a container starts: the image holds the pristine code), and
which tests judge the fix: FAIL_TO_PASS must go from failing to passing, PASS_TO_PASS must
keep passing. `gold_patch` is the inverse of the mutation. Records in SWE-bench's schema
(`base_commit`, `patch`, `test_patch`) map onto the same fields: their image already holds
the bug, so `mutation` is None, `setup_patch` is empty and `test_patch` carries the hidden
tests the grader adds before it runs them.

What never reaches an agent's container: `gold_patch`, `test_patch` and, for generated tasks
posed with hidden tests, the files named in `hidden_tests`. The grader
(`rlvr.sandbox.repo_grader.grade`) takes plain values from these fields, so the sandbox never
imports this module.

Catalogue files are JSON Lines, one task per line (`save_tasks`/`load_tasks`); the packaged
catalogue is `rlvr/data/repo_tasks/*.jsonl`, one file per package version.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

REPO_DIR = "/repo"
CATALOGUE_PACKAGE = "rlvr.data"
CATALOGUE_DIR = "repo_tasks"


@dataclass(frozen=True)
class Mutation:
    """The bug: one AST mutation of one package source file.

    `patch` is a unified diff (paths `a/<file>`, `b/<file>`, relative to the repository root)
    that turns the pristine file into the buggy one; the gold patch is its inverse.
    `description` names the operator (e.g. "comparison < -> <="), for humans and analysis;
    it is never shown to the agent. `line` is the mutated line in the pristine file.
    """

    file: str
    operator: str
    description: str
    line: int
    patch: str


@dataclass(frozen=True)
class RepoTask:
    """One repository task. Field names are stable: the env and the loaders code against them."""

    instance_id: str
    package: str                     # PyPI name (generated) or "owner/repo" (SWE-bench records)
    version: str                     # package version, or the base commit for SWE-bench records
    problem_statement: str
    fail_to_pass: tuple[str, ...]    # pytest node ids, relative to repo_dir
    pass_to_pass: tuple[str, ...]
    gold_patch: str                  # unified diff that fixes the bug (never in the workspace)
    source_paths: tuple[str, ...]    # repo-relative files/dirs an agent may change (package source)
    sdist_sha256: str = ""           # sha256 of the sdist the image was built from ("" for SWE-bench)
    image: str = ""                  # docker tag; "" = rlvr.sandbox.repo_image.image_tag(package, version, sdist_sha256)
    repo_dir: str = REPO_DIR
    mutation: Mutation | None = None
    test_patch: str = ""             # hidden tests added before grading (SWE-bench); "" for generated tasks
    hidden_tests: tuple[str, ...] = ()  # repo-relative test files holding FAIL_TO_PASS (hideable from the agent)
    source: str = "generated"        # "generated" | "swebench"
    content_hash: str = ""           # sha256 over the fields that define the task (see compute_hash)
    extra: dict[str, Any] = field(default_factory=dict, compare=False)

    @property
    def setup_patch(self) -> str:
        """What turns the image's repository into the task's starting state (the bug)."""
        return self.mutation.patch if self.mutation is not None else ""

    def compute_hash(self) -> str:
        """sha256 over what the task is (image source, bug, tests, statement), not its id."""
        body = {
            "package": self.package, "version": self.version, "sdist_sha256": self.sdist_sha256,
            "image": self.image, "repo_dir": self.repo_dir, "setup_patch": self.setup_patch,
            "gold_patch": self.gold_patch, "test_patch": self.test_patch,
            "fail_to_pass": list(self.fail_to_pass), "pass_to_pass": list(self.pass_to_pass),
            "problem_statement": self.problem_statement, "source_paths": list(self.source_paths),
        }
        return hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()

    def with_hash(self) -> RepoTask:
        return dataclasses.replace(self, content_hash=self.compute_hash())

    def to_dict(self) -> dict[str, Any]:
        out = dataclasses.asdict(self)
        for key in ("fail_to_pass", "pass_to_pass", "source_paths", "hidden_tests"):
            out[key] = list(out[key])
        if not out["extra"]:
            del out["extra"]
        return out

    @classmethod
    def from_dict(cls, record: dict[str, Any]) -> RepoTask:
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = set(record) - known
        if unknown:
            raise ValueError(f"unknown repo task fields: {', '.join(sorted(unknown))}")
        data = dict(record)
        mutation = data.get("mutation")
        if isinstance(mutation, dict):
            data["mutation"] = Mutation(**mutation)
        for key in ("fail_to_pass", "pass_to_pass", "source_paths", "hidden_tests"):
            if key in data:
                data[key] = tuple(data[key])
        task = cls(**data)
        if task.content_hash and task.content_hash != task.compute_hash():
            raise ValueError(f"{task.instance_id}: content_hash does not match the task")
        return task


def image_of(task: RepoTask) -> str:
    """The docker tag that runs `task` (its own, or the one built from its sdist)."""
    if task.image:
        return task.image
    from rlvr.sandbox.repo_image import image_tag

    return image_tag(task.package, task.version, task.sdist_sha256)


def save_tasks(tasks: Iterable[RepoTask], path: str | Path) -> int:
    """Write tasks as JSON Lines (hash filled in); returns how many."""
    n = 0
    with open(path, "w", encoding="utf-8") as out:
        for task in tasks:
            task = task if task.content_hash else task.with_hash()
            out.write(json.dumps(task.to_dict(), sort_keys=True) + "\n")
            n += 1
    return n


def load_tasks(path: str | Path) -> list[RepoTask]:
    """Read a JSON Lines (or a JSON list) file of tasks."""
    text = Path(path).read_text(encoding="utf-8")
    return parse_tasks(text)


def parse_tasks(text: str) -> list[RepoTask]:
    stripped = text.lstrip()
    if stripped.startswith("["):
        return [RepoTask.from_dict(r) for r in json.loads(stripped)]
    return [RepoTask.from_dict(json.loads(line)) for line in text.splitlines() if line.strip()]


def load_catalogue(packages: Iterable[str] | None = None) -> list[RepoTask]:
    """The packaged tasks (`rlvr/data/repo_tasks/*.jsonl`), optionally only some packages."""
    wanted = None if packages is None else {p.lower() for p in packages}
    root = resources.files(CATALOGUE_PACKAGE).joinpath(CATALOGUE_DIR)
    tasks: list[RepoTask] = []
    if not root.is_dir():
        return tasks
    for entry in sorted(root.iterdir(), key=lambda e: e.name):
        if not entry.name.endswith(".jsonl"):
            continue
        for task in parse_tasks(entry.read_text(encoding="utf-8")):
            if wanted is None or task.package.lower() in wanted:
                tasks.append(task)
    return tasks
