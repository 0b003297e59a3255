"""Reward for code: the share of unit tests a completion's program passes in the sandbox.

The program is the last ```python / ```py / ``` fenced block of the completion's final
region (after `</think>`), or the whole region when there is no fence. Stdin/stdout tasks
may name another `language` (C, C++, Java, JavaScript, Go, Rust; see `rlvr.sandbox.languages`):
then the last block fenced with that language's tag (or untagged) is compiled and run. It runs in the
warm Docker pool of `rlvr.sandbox` (or the weaker local backend, only when asked for by
name), judged by the trusted harness, so printing "passed" or exiting early earns nothing.
Zeros carry a reason: `no_answer` (no code), `parse_error` (it does not compile; a compiler's
message is kept in `info["error"]`),
`tests_failed`, `timeout`, `bad_reference` (the task has no usable tests) or `error`
(the sandbox itself failed: not the model's fault).
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from typing import Any

from rlvr.verifiers.boxes import final_region
from rlvr.verifiers.core import (
    BAD_REFERENCE,
    ERROR,
    NO_ANSWER,
    PARSE_ERROR,
    TESTS_FAILED,
    TIMEOUT,
    Score,
    Verifier,
    align_batch,
    completion_text,
)

MODES = ("fraction", "all", "bonus")
_FENCE = re.compile(r"^[ \t]*```[ \t]*([A-Za-z0-9_+-]*)[^\n]*\n(.*?)(?:^[ \t]*```[ \t]*$|\Z)", re.M | re.S)
_SYNTAX = re.compile(r"(the program did not load: )?(SyntaxError|IndentationError|TabError)\b")
_TASK_FIELDS = ("tests", "entry_point", "test_list", "test_setup_code", "io_tests", "prefix", "language",
                "memory_mb", "output_limit")


def extract_code(region: str, language: str = "python") -> str:
    """The last block fenced with the language's tag (or untagged), else the whole region."""
    from rlvr.sandbox.languages import FENCE_TAGS, canonical

    tags = FENCE_TAGS[canonical(language) or "python"]
    blocks = [m.group(2) for m in _FENCE.finditer(region) if m.group(1).lower() in tags]
    return blocks[-1] if blocks else region


class CodeVerifier(Verifier):
    """`CodeVerifier(mode="fraction" | "all" | "bonus", timeout=5.0, backend=None, **options)`.

    `mode="fraction"` rewards the share of tests passed; `"all"` gives 1 only when every
    test passes; `"bonus"` gives half the share of tests passed, and 1 when every test passes
    (partial credit that still pays a whole program twice what its parts earn). `timeout` is the wall clock of one job (of one case for stdin/stdout
    tests). `backend` is "docker" (default, or `$RLVR_SANDBOX_BACKEND`) or "local".
    Options: `pool_size`, `image`, `memory_mb`, `cpus`, `pids`, `compare` ("exact" or
    "float" for stdin/stdout tests), `float_tolerance`, `prefilled_think`, `language`
    (default for stdin/stdout tasks; a task's own `language` field wins), `compile_timeout`,
    `output_limit` (bytes of stdout and of stderr per job). A task may carry `memory_mb`
    and `output_limit` of its own (a contest's limits); its memory is capped at the verifier's.
    """

    name = "code"
    best = 1.0

    def __init__(self, mode: str = "fraction", timeout: float = 5.0, backend: str | None = None,
                 **options: Any):
        from rlvr.sandbox import languages
        from rlvr.sandbox.protocol import COMPARE_MODES, Limits

        if mode not in MODES:
            raise ValueError(f"CodeVerifier mode must be one of {MODES}, got {mode!r}")
        self.mode = mode
        self.timeout = float(timeout)
        if not self.timeout > 0:
            raise ValueError(f"CodeVerifier timeout must be positive, got {timeout!r}")
        self.backend = backend or os.environ.get("RLVR_SANDBOX_BACKEND", "docker")
        if self.backend not in ("docker", "local"):
            raise ValueError(f"CodeVerifier backend must be 'docker' or 'local', got {self.backend!r}")
        self.pool_size = options.pop("pool_size", None)
        self.image = options.pop("image", None)
        self.compare = options.pop("compare", "exact")
        if self.compare not in COMPARE_MODES:
            raise ValueError(f"compare must be one of {COMPARE_MODES}, got {self.compare!r}")
        self.float_tolerance = float(options.pop("float_tolerance", 1e-6))
        self.prefilled_think = bool(options.pop("prefilled_think", False))
        self.language = languages.canonical(options.pop("language", "python"))
        if self.language is None:
            raise ValueError(f"unknown language; choose one of {', '.join(languages.LANGUAGES)}")
        self.compile_timeout = float(options.pop("compile_timeout", 30.0))
        self.output_limit = options.pop("output_limit", None)
        limit_keys = ("memory_mb", "cpus", "pids")
        self.limits = Limits(**{k: options.pop(k) for k in limit_keys if k in options})
        if options:
            raise TypeError(f"CodeVerifier got unknown options: {', '.join(sorted(options))}")

    def __repr__(self) -> str:
        return f"CodeVerifier(mode={self.mode!r}, timeout={self.timeout}, backend={self.backend!r})"

    # -- scoring --

    def score(self, completion: Any, reference: Any = None, **task_fields: Any) -> Score:
        return self.score_batch([completion], [reference], [task_fields])[0]

    def score_batch(self, completions, references=None, task_fields=None) -> list[Score]:
        """All completions judged in parallel over the warm pool; results in input order."""
        references, task_fields = align_batch(completions, references, task_fields)
        scores: list[Score | None] = [None] * len(completions)
        jobs, slots = [], []
        for i, (completion, reference, fields) in enumerate(zip(completions, references, task_fields)):
            prepared = self._prepare(completion, reference, fields)
            if isinstance(prepared, Score):
                scores[i] = prepared
            else:
                jobs.append(prepared)
                slots.append(i)
        if jobs:
            for i, result in zip(slots, self._run(jobs)):
                scores[i] = self._to_score(result)
        return scores  # type: ignore[return-value]

    def _prepare(self, completion, reference, fields):
        from rlvr.sandbox.protocol import Job

        fields = dict(fields)
        if isinstance(reference, Mapping):  # a reference may carry the tests itself (a HumanEval record too)
            carried = {k: v for k, v in reference.items() if k in _TASK_FIELDS}
            if "tests" not in carried and isinstance(reference.get("test"), str):
                carried["tests"] = reference["test"]
            fields = {**carried, **fields}
        elif isinstance(reference, str) and fields.get("tests") is None and fields.get("entry_point"):
            fields["tests"] = reference
        region = final_region(completion_text(completion), self.prefilled_think)
        if region is None:
            return Score(0.0, NO_ANSWER, info={"status": "no_code", "error": "the think block never closed"})
        language = fields.get("language") or self.language
        code = extract_code(region, language)  # an unknown language is refused below, as bad_reference
        if not code.strip():
            return Score(0.0, NO_ANSWER, info={"status": "no_code"})
        memory = fields.get("memory_mb")
        try:
            job = Job(
                code=code,
                tests=fields.get("tests"),
                entry_point=fields.get("entry_point"),
                test_list=fields.get("test_list"),
                test_setup_code=fields.get("test_setup_code") or "",
                io_tests=fields.get("io_tests"),
                prefix=fields.get("prefix") or "",
                timeout=self.timeout,
                compare=self.compare,
                float_tolerance=self.float_tolerance,
                language=language,
                compile_timeout=self.compile_timeout,
                memory_mb=min(memory, self.limits.memory_mb) if isinstance(memory, int) else memory,
                output_limit=fields.get("output_limit") or self.output_limit,
            )
            job.to_wire(self.limits)
        except (ValueError, TypeError) as exc:
            return Score(0.0, BAD_REFERENCE, info={"status": "bad_reference", "error": str(exc)})
        if not (job.tests or job.test_list or job.io_tests):
            return Score(0.0, BAD_REFERENCE, info={"status": "bad_reference", "error": "the task has no tests"})
        return job

    def _run(self, jobs):
        from rlvr.sandbox.pool import SandboxUnavailable, get_pool
        from rlvr.sandbox.protocol import Result

        try:
            pool = get_pool(self.backend, self.pool_size, self.image, self.limits)
        except SandboxUnavailable as exc:
            return [Result.infrastructure_error(str(exc), self.backend) for _ in jobs]
        return pool.run_batch(jobs)

    def _to_score(self, result) -> Score:
        info = {
            "status": result.status, "passed": result.passed, "total": result.total,
            "tests": result.tests, "stdout": result.stdout, "stderr": result.stderr,
            "truncated": result.truncated, "duration": result.duration, "error": result.error,
            "backend": result.backend, "errors": result.errors, "leftovers": result.leftovers,
        }
        if result.status == "error":
            return Score(0.0, ERROR, info=info)
        if result.status == "passed" and result.total and result.passed == result.total:
            return Score(1.0, info=info)
        value = {"fraction": result.fraction, "bonus": result.fraction / 2}.get(self.mode, 0.0)
        if result.status == "timeout":
            reason = TIMEOUT
        elif result.status == "compile_error" or any(_SYNTAX.match(e) for e in result.errors):
            reason = PARSE_ERROR
        else:
            reason = TESTS_FAILED
        return Score(value, reason, info=info)
