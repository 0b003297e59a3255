"""What the host sends to a sandbox worker and what comes back.

One job is one JSON line to the job server (`harness.py`), one result is one JSON line
back. These dataclasses are the host-side view: `Job.to_wire()` checks the input before it
ever reaches a worker (bad input is the caller's mistake and raises), `Result.from_wire()`
reads a reply defensively (a broken reply is an infrastructure `error`, never a verdict).
"""

from __future__ import annotations

import ast
import math
import threading
from dataclasses import dataclass, field
from typing import Any

from rlvr.sandbox import languages

STATUSES = ("passed", "failed", "timeout", "memory", "crash", "compile_error", "error")
# CPython 3.11's ast.parse can fail in concurrent threads with "SystemError: AST constructor
# recursion depth mismatch" (CPython gh-106905); CI hit it once when the pool's threads checked jobs.
_PARSE_LOCK = threading.Lock()
COMPARE_MODES = ("exact", "float")
MAX_OUTPUT = 64 * 1024 * 1024  # a job may raise its output limit this far (the tester holds stdout)
VERDICT_GRACE = 0.5  # seconds past a job's time limits that the host waits for the sandbox's own verdict
CASE_GRACE = 0.05  # and per stdin/stdout case, for starting the program outside its case's clock


@dataclass(frozen=True)
class Limits:
    """Resource limits of one sandbox worker and the jobs it runs."""

    memory_mb: int = 512  # address space of a job; the container gets this plus headroom
    cpus: float = 1.0  # CPU quota of one container
    pids: int = 128  # processes and threads in one container
    tmp_mb: int = 64  # scratch tmpfs
    file_mb: int = 16  # largest file a job may write
    output_limit: int = 4 * 1024 * 1024  # stdout+stderr bytes before the job is killed

    def __post_init__(self):
        for name in ("memory_mb", "pids", "tmp_mb", "file_mb", "output_limit"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
                raise ValueError(f"Limits.{name} must be a positive int, got {value!r}")
        if not (isinstance(self.cpus, (int, float)) and math.isfinite(self.cpus) and self.cpus > 0):
            raise ValueError(f"Limits.cpus must be a positive number, got {self.cpus!r}")


@dataclass(frozen=True)
class Job:
    """Code to run and the tests that judge it (exactly one test style).

    Assert style: `tests` (HumanEval: source defining `check(candidate)`) with `entry_point`,
    or `test_list` (MBPP: one assert statement each) with optional `test_setup_code`.
    Stdin/stdout style: `io_tests=[{"input": str, "output": str}, ...]`, compared exactly
    (after normalising line endings and trailing whitespace) or with `compare="float"`.
    `prefix` is trusted code placed before `code`. `timeout` is the wall clock of the whole
    job for assert style and of each case for stdin/stdout style.

    `language` (stdin/stdout style only, except "python"): one of `languages.LANGUAGES`
    (aliases such as "c++" or "js" accepted); compiled once per job within
    `compile_timeout` seconds. `memory_mb` and `output_limit` cap this job below the pool's
    `Limits` (None: the pool's); the output limit applies to stdout and stderr each.
    """

    code: str
    tests: str | None = None
    entry_point: str | None = None
    test_list: list[str] | None = None
    test_setup_code: str = ""
    io_tests: list[dict] | None = None
    prefix: str = ""
    timeout: float = 5.0
    compare: str = "exact"
    float_tolerance: float = 1e-6
    language: str = "python"
    compile_timeout: float = 30.0
    memory_mb: int | None = None
    output_limit: int | None = None

    def to_wire(self, limits: Limits | None = None) -> dict[str, Any]:
        limits = limits or Limits()
        styles = [self.tests is not None, self.test_list is not None, self.io_tests is not None]
        if sum(styles) != 1:
            raise ValueError("a Job needs exactly one of tests (+entry_point), test_list or io_tests")
        if not isinstance(self.code, str) or not isinstance(self.prefix, str):
            raise TypeError("Job.code and Job.prefix must be strings")
        if self.tests is not None and not (isinstance(self.tests, str) and isinstance(self.entry_point, str)
                                           and self.entry_point.isidentifier()):
            raise ValueError("HumanEval-style tests need a string `tests` and an identifier `entry_point`")
        if self.test_list is not None and not all(isinstance(t, str) for t in self.test_list):
            raise TypeError("test_list must be a list of strings")
        if self.io_tests is not None:
            for case in self.io_tests:
                if not (isinstance(case, dict) and isinstance(case.get("input", ""), str)
                        and isinstance(case.get("output"), str)):
                    raise ValueError('io_tests must be a list of {"input": str, "output": str}')
        if self.compare not in COMPARE_MODES:
            raise ValueError(f"compare must be one of {COMPARE_MODES}, got {self.compare!r}")
        if not (isinstance(self.timeout, (int, float)) and math.isfinite(self.timeout) and self.timeout > 0):
            raise ValueError(f"timeout must be a positive number of seconds, got {self.timeout!r}")
        if not isinstance(self.test_setup_code, str):
            raise TypeError("test_setup_code must be a string")
        language = languages.canonical(self.language) if isinstance(self.language, str) else None
        if language is None:
            raise ValueError(f"unknown language {self.language!r}; choose one of {', '.join(languages.LANGUAGES)}")
        if language != "python" and self.io_tests is None:
            raise ValueError(f"{language} programs take stdin/stdout tests (io_tests) only; "
                             "function-call tests are Python only")
        if not (isinstance(self.compile_timeout, (int, float)) and math.isfinite(self.compile_timeout)
                and self.compile_timeout > 0):
            raise ValueError(f"compile_timeout must be a positive number of seconds, got {self.compile_timeout!r}")
        for name, most in (("memory_mb", limits.memory_mb), ("output_limit", max(limits.output_limit, MAX_OUTPUT))):
            value = getattr(self, name)
            if value is not None and (not isinstance(value, int) or isinstance(value, bool)
                                      or not 0 < value <= most):
                raise ValueError(f"Job.{name} must be a positive int at most the pool's {most}, got {value!r}")
        for name, source in [("tests", self.tests), ("test_setup_code", self.test_setup_code),
                             *(("test_list", t) for t in self.test_list or [])]:
            if source:
                try:
                    with _PARSE_LOCK:
                        ast.parse(source)
                except SyntaxError as exc:
                    raise ValueError(f"{name} is not valid Python: {exc.msg} (line {exc.lineno})") from None
        wire = {k: v for k, v in self.__dict__.items() if v is not None}
        wire.update(memory_mb=self.memory_mb or limits.memory_mb, file_mb=limits.file_mb,
                    output_limit=self.output_limit or limits.output_limit, nproc=limits.pids, language=language)
        if language == "python":
            del wire["compile_timeout"]
        return wire

    def budget(self) -> float:
        """Seconds the host waits for the server to take the job before declaring the worker broken."""
        return self._time_limits() + 15.0

    def verdict_due(self) -> float:
        """Seconds from the server taking the job to its verdict; past them the host stops the container and
        reports a timeout, whatever the job did to the server's share of the CPU."""
        return self._time_limits() + CASE_GRACE * (self._cases() - 1) + VERDICT_GRACE

    def _time_limits(self) -> float:
        compiling = self.compile_timeout if self.language not in ("python", "py", "python3") else 0.0
        return self.timeout * self._cases() + compiling

    def _cases(self) -> int:
        return max(1, len(self.io_tests or []))


@dataclass(frozen=True)
class Result:
    """The verdict on one job. `tests` holds `{"name", "passed", "error"}` per test."""

    status: str
    passed: int = 0
    total: int = 0
    tests: list[dict] = field(default_factory=list)
    stdout: str = ""
    stderr: str = ""
    truncated: bool = False
    duration: float = 0.0
    error: str | None = None
    tainted: bool = False
    backend: str = ""
    errors: list[str] = field(default_factory=list)  # what the program raised, for humans
    worker: str = ""  # which worker ran it (a container id)
    leftovers: int = 0  # processes still running when the program's main process ended, killed then

    @property
    def fraction(self) -> float:
        return self.passed / self.total if self.total else 0.0

    @classmethod
    def from_wire(cls, data: Any, backend: str = "", worker: str = "") -> Result:
        if not isinstance(data, dict) or data.get("status") not in STATUSES:
            return cls.infrastructure_error(f"malformed reply from the sandbox: {str(data)[:200]}", backend)
        tests = [t for t in data.get("tests") or [] if isinstance(t, dict)]
        passed = sum(1 for t in tests if t.get("passed") is True)
        if data["status"] == "passed" and not (tests and passed == len(tests)):
            return cls.infrastructure_error("the sandbox said passed without passing tests", backend)
        error = data.get("error")
        if error is None and data["status"] not in ("passed", "failed") and data.get("errors"):
            error = str(data["errors"][-1])
        return cls(
            status=data["status"], passed=passed, total=len(tests), tests=tests,
            stdout=str(data.get("stdout", "")), stderr=str(data.get("stderr", "")),
            truncated=bool(data.get("truncated")), duration=float(data.get("duration") or 0.0),
            error=None if error is None else str(error), tainted=bool(data.get("tainted")), backend=backend,
            errors=[str(e)[:500] for e in data.get("errors") or []][:5], worker=worker,
            leftovers=_count(data.get("leftover_processes")),
        )

    @classmethod
    def overdue(cls, message: str, backend: str = "", worker: str = "") -> Result:
        """The host's timeout: the job kept its server from answering past its due time."""
        return cls(status="timeout", error=f"{message}: the host stopped the container", tainted=True,
                   backend=backend, worker=worker)

    @classmethod
    def infrastructure_error(cls, message: str, backend: str = "") -> Result:
        return cls(status="error", error=message, tainted=True, backend=backend)

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


def _count(value: Any) -> int:
    return value if type(value) is int and value >= 0 else 0
