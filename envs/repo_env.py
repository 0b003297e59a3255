"""`rlvr/RepoFix-v0`: fix a bug in a real repository with tools, graded where the agent cannot reach.

Each episode is one `RepoTask` (the packaged catalogue, a JSONL file, SWE-bench records through
`repo_swebench`, or a list). On the first tool call the episode gets its own container from the
task image's warm pool (`rlvr.sandbox.repo_workspace`), with the bug put in and, with
`hide_tests=True`, the test files holding FAIL_TO_PASS deleted, so the task is posed by its problem
statement alone. The tools, all answering with text and never raising on the model's input:

- `bash(command)`: a shell command in the repository, as an unprivileged user, no network,
  `command_timeout` seconds, output clipped to `output_limit` characters;
- `view_file(path, start, end)`: numbered lines of a file;
- `edit_file(path, old, new)`: replace the one exact occurrence of `old`; an `Error: ...` message
  when it is missing or occurs more than once;
- `run_tests(selector)`: pytest on the workspace's tests (a SWE-bench `test_patch` is never there);
- `submit()`: end the episode and be graded.

A turn without a tool call also submits. Budgets: `max_turns`, `max_tool_calls`, `max_tokens`
(assistant and tool text) and `max_tool_seconds` (wall clock spent in tools over the episode). An
episode a budget stops is graded on what the workspace holds then (`truncated`, `ended_by` names the
budget). The grade is `rlvr.sandbox.repo_grader.grade` on the workspace's diff against its pristine
snapshot, applied in a fresh container (`mode` "all": 1 only if every listed test passes; "fraction":
the share that pass). A workspace or grader that fails is an `error` episode, which the trainer
leaves out. The container is removed when the episode ends, at the next reset, or at `close()`.
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from rlvr.envs.base import CORRECT, action_text
from rlvr.envs.repo_task import RepoTask, load_catalogue
from rlvr.envs.tasks import Task, TaskSource
from rlvr.envs.tool_env import ToolEnv
from rlvr.envs.tools import ToolUnavailable
from rlvr.sandbox.repo_grader import RUNTIME_INFO, grade
from rlvr.verifiers.core import ERROR, TESTS_FAILED, TIMEOUT, Score, Verifier

MODES = ("all", "fraction")
SYSTEM_PROMPT = (
    "You are fixing a bug in a Python repository. Use the tools to look at the code, reproduce the failure, "
    "edit the package source and run the tests. Do not change the tests. Call submit() when the fix is done.")
GRADE_REASONS = {"tests_failed": TESTS_FAILED, "patch_failed": "patch_failed", "timeout": TIMEOUT, "error": ERROR}


class RepoTasks(TaskSource):
    """Repository tasks by index: the problem statement is the prompt; the grader is the verifier."""

    family = "repo"
    system_hint = SYSTEM_PROMPT
    require_boxed = False

    def __init__(self, tasks: Sequence[RepoTask], *, mode: str = "all", grade_timeout: float = 300.0):
        if not tasks:
            raise ValueError("no repository tasks: build some with `rlvr repo build` or pass tasks=")
        if mode not in MODES:
            raise ValueError(f"mode must be one of {MODES}, got {mode!r}")
        self.tasks = list(tasks)
        self.by_id = {t.instance_id: t for t in self.tasks}
        if len(self.by_id) != len(self.tasks):
            raise ValueError("two repository tasks share an instance_id")
        self.size = len(self.tasks)
        self.mode, self.grade_timeout = mode, float(grade_timeout)

    def get(self, index: int) -> Task:
        task = self.tasks[index]
        prompt = (f"Repository: {task.package} {task.version}, checked out in {task.repo_dir} (the tools' "
                  f"working directory).\n\n{task.problem_statement.strip()}\n\nFix the bug in the package's "
                  "source code so that the failing tests pass and the others keep passing.")
        return Task(task.instance_id, prompt, None, {"instance_id": task.instance_id}, self.family)

    def make_verifier(self, require_boxed: bool | None = None) -> Verifier:
        return RepoGrader(self.by_id, self.mode, self.grade_timeout)


class RepoGrader(Verifier):
    """Scores a diff (the completion) of task `instance_id` with the sandboxed grader."""

    name = "repo_grade"

    def __init__(self, tasks: dict[str, RepoTask], mode: str = "all", timeout: float = 300.0):
        self.tasks, self.mode, self.timeout = tasks, mode, timeout

    def score(self, completion: Any, reference: Any = None, **fields: Any) -> Score:
        task = self.tasks[fields["instance_id"]]
        diff = completion if isinstance(completion, str) else ""
        try:
            graded = grade(task_image(task), task.repo_dir, task.setup_patch, diff, task.fail_to_pass,
                           task.pass_to_pass, source_paths=task.source_paths, test_patch=task.test_patch,
                           mode=self.mode, timeout=self.timeout)
        except Exception as exc:  # the grader's infrastructure, never the model's diff
            return Score(0.0, ERROR, info={"grader": f"{type(exc).__name__}: {str(exc)[:300]}"})
        value = float(graded.value)
        reason = None if value >= self.best else GRADE_REASONS.get(graded.reason, graded.reason or TESTS_FAILED)
        if graded.reason == "error":
            value, reason = 0.0, ERROR
        # the grader's wall-clock figures and which container graded stay out: a step's info is the same for
        # the same seed and actions (gymnasium's check_env), and latency is bench/repo_tasks.py's to measure
        grader = {k: v for k, v in (graded.info or {}).items() if k not in RUNTIME_INFO}
        info = {"grade": graded.reason, "tests": dict(graded.tests), "dropped": list(graded.dropped),
                "diff_lines": diff.count("\n"), **({"grader": grader} if grader else {})}
        return Score(value, reason, info=info)


class RepoTools:
    """The tools of one env; the workspace of the current episode is started on the first call."""

    def __init__(self, env: RepoFixEnv):
        self._env = env
        self.workspace = None
        self.seconds = 0.0

    def reset(self) -> None:
        self.release()
        self.seconds = 0.0

    def release(self) -> None:
        if self.workspace is not None:
            self.workspace.close()
            self.workspace = None

    def _ws(self):
        from rlvr.sandbox.repo_workspace import WorkspaceError, get_workspace_pool

        if self.workspace is None:
            env = self._env
            task = env.repo_task
            try:
                pool = get_workspace_pool(task_image(task), task.repo_dir, env.pool_size, env.limits)
                workspace = pool.acquire()
            except Exception as exc:
                raise ToolUnavailable(f"no workspace: {exc}") from None
            try:
                workspace.start(task.setup_patch, task.hidden_tests if env.hide_tests else ())
            except WorkspaceError as exc:
                workspace.close()
                raise ToolUnavailable(str(exc)) from None
            self.workspace = workspace
        return self.workspace

    def _timed(self, call):
        from rlvr.sandbox.repo_workspace import WorkspaceError

        if self.seconds >= self._env.max_tool_seconds:
            return f"Error: the tool time budget ({self._env.max_tool_seconds:g} s) is spent."
        start = time.monotonic()
        try:
            return call(self._ws())
        except WorkspaceError as exc:
            raise ToolUnavailable(str(exc)) from None
        finally:
            self.seconds += time.monotonic() - start

    def bash(self, command: str) -> str:
        """Run a bash command in the repository (no network; output and time are limited).

        Args:
            command: the shell command, e.g. `grep -rn "def parse" src/`.
        """
        return self._timed(lambda ws: _command_reply(ws.bash(command)))

    def view_file(self, path: str, start: int = 1, end: int = 0) -> str:
        """Show numbered lines of a file of the repository.

        Args:
            path: the file, relative to the repository root.
            start: the first line to show (1-based).
            end: the last line to show (0: to the end of the file).
        """
        return self._timed(lambda ws: ws.view(path, start, end or None))

    def edit_file(self, path: str, old: str, new: str) -> str:
        """Replace the exact text `old` (which must occur exactly once) with `new` in a file.

        Args:
            path: the file, relative to the repository root.
            old: the exact text to replace, whitespace included.
            new: the text to put in its place.
        """
        return self._timed(lambda ws: ws.edit(path, old, new))

    def run_tests(self, selector: str = "") -> str:
        """Run the repository's tests with pytest.

        Args:
            selector: pytest arguments, e.g. a test file, a node id `tests/test_x.py::test_y` or `-k name`;
                empty for the whole suite.
        """
        return self._timed(lambda ws: _command_reply(ws.run_tests(selector)))

    def submit(self) -> str:
        """Submit the changes made to the repository for grading; this ends the episode."""
        self._env._submitted = True
        return "Submitted."

    def diff(self) -> str:
        """The episode's changes so far ("" when no workspace was started)."""
        from rlvr.sandbox.repo_workspace import WorkspaceError

        if self.workspace is None:
            return ""
        try:
            return self.workspace.diff()
        except WorkspaceError as exc:
            raise ToolUnavailable(str(exc)) from None


_IMAGES: dict[tuple, str] = {}


def task_image(task: RepoTask) -> str:
    """The task's image: its own tag, or the package's image, built on first use (then cached)."""
    if task.image:
        return task.image
    key = (task.package, task.version, task.sdist_sha256)
    if key not in _IMAGES:
        from rlvr.sandbox.repo_image import ensure_image

        _IMAGES[key] = ensure_image(*key, log=lambda _message: None)
    return _IMAGES[key]


def _command_reply(result: dict[str, Any]) -> str:
    text = result["output"]
    if result["truncated"]:
        text += "\n[output limit reached: the command was stopped]"
    if result["timed_out"]:
        text += "\n[time limit reached: the command was killed]"
    return f"{text.rstrip()}\n[exit code {result['exit']}]".lstrip("\n")


class RepoFixEnv(ToolEnv):
    """Repository tasks with workspace tools (see the module doc)."""

    def __init__(self, source: RepoTasks, *, hide_tests: bool = False, max_turns: int = 30,
                 max_tool_calls: int = 60, max_tokens: int = 32768, max_tool_seconds: float = 600.0,
                 command_timeout: float = 30.0, test_timeout: float = 120.0, output_limit: int = 8000,
                 pool_size: int = 2, **options: Any):
        from rlvr.sandbox.repo_workspace import WorkspaceLimits

        if not isinstance(source, RepoTasks):
            raise TypeError(f"source must be RepoTasks, got {type(source).__name__}")
        if not isinstance(hide_tests, bool):
            raise TypeError(f"hide_tests must be True or False, got {hide_tests!r}")
        if not (isinstance(max_tool_seconds, (int, float)) and max_tool_seconds > 0):
            raise ValueError(f"max_tool_seconds must be a positive number, got {max_tool_seconds!r}")
        self.hide_tests, self.max_tool_seconds, self.pool_size = hide_tests, float(max_tool_seconds), pool_size
        self.limits = WorkspaceLimits(command_timeout=command_timeout, test_timeout=test_timeout,
                                      output_limit=output_limit)
        self.repo_tools = RepoTools(self)
        t = self.repo_tools
        options.setdefault("tool_timeout", max(command_timeout, test_timeout) + 60.0)
        super().__init__(source, tools=[t.bash, t.view_file, t.edit_file, t.run_tests, t.submit],
                         max_turns=max_turns, max_tool_calls=max_tool_calls, max_tokens=max_tokens, **options)
        self._submitted = False

    @property
    def repo_task(self) -> RepoTask:
        return self.source.by_id[self._require_task().fields["instance_id"]]

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        self._submitted = False
        self.repo_tools.reset()  # the last episode's workspace goes
        observation, info = super().reset(seed=seed, options=options)
        info["instance_id"] = self.task.fields["instance_id"]
        return observation, info

    def step(self, action: Any):
        self._require_task()
        text = action_text(action)
        if not self.parser(text).attempted:  # an answer without a tool call submits the workspace
            counts = self._counts
            counts["turns"] += 1
            counts["tokens"] += self.count_tokens(text)
            self._messages.append({"role": "assistant", "content": text})
            return self._end(None, "answer")
        observation, reward, terminated, truncated, info = super().step(action)
        if terminated or truncated:
            return observation, reward, terminated, truncated, info
        if self._submitted:
            return self._end(None, "answer")
        if self.repo_tools.seconds >= self.max_tool_seconds:
            return self._end(None, "max_tool_time")
        info["tool_seconds"] = round(self.repo_tools.seconds, 3)
        return observation, reward, terminated, truncated, info

    def _end(self, score: Score | None, ended_by: str):
        """End the episode: grade the workspace's diff (unless a tool's infrastructure failed), release it."""
        if self._submitted and ended_by != "error":  # submitted on the turn a budget ran out: a submission
            ended_by = "answer"
        if ended_by != "error":
            try:
                diff = self.repo_tools.diff()
                reward, _, fields = self.scoring_inputs()
                score = reward.score(diff, None, **fields)
            except ToolUnavailable as exc:
                score = Score(0.0, ERROR, info={"workspace": str(exc)})
        self.repo_tools.release()
        self._done = True
        terminated = ended_by == "answer"
        info = self._info(score)
        info["ended_by"] = "error" if score.reason == ERROR else ended_by
        info["correct"] = score.reason != ERROR and score.components.get(CORRECT, 0.0) >= 1.0
        info["final_reward"] = float(score.value)
        info["tool_seconds"] = round(self.repo_tools.seconds, 3)
        return self._observation(), float(score.value), terminated, not terminated, info

    def close(self):
        self.repo_tools.release()
        super().close()


def repo_tasks(tasks: str | Sequence[RepoTask | dict] = "catalogue", packages: Sequence[str] | None = None,
               limit: int | None = None) -> list[RepoTask]:
    """Tasks from "catalogue" (the packaged ones), a JSONL/JSON file of RepoTasks or of SWE-bench
    records, or a list of RepoTasks / dicts."""
    from rlvr.envs.repo_swebench import from_swebench, is_swebench_record

    if isinstance(tasks, str) and tasks == "catalogue":
        out = load_catalogue(packages)
    elif isinstance(tasks, (str, Path)):
        text = Path(tasks).read_text(encoding="utf-8")
        first = text.lstrip()[:1]
        records = json.loads(text) if first == "[" else [json.loads(line) for line in text.splitlines() if line.strip()]
        out = [from_swebench(r) if is_swebench_record(r) else RepoTask.from_dict(r) for r in records]
    else:
        out = [t if isinstance(t, RepoTask) else from_swebench(t) if is_swebench_record(t) else RepoTask.from_dict(t)
               for t in tasks]
    if packages is not None and not (isinstance(tasks, str) and tasks == "catalogue"):
        wanted = {p.lower() for p in packages}
        out = [t for t in out if t.package.lower() in wanted]
    return out[:limit] if limit else out


ENV_OPTIONS = ("hide_tests", "max_turns", "max_tool_calls", "max_tokens", "max_tool_seconds", "command_timeout",
               "test_timeout", "output_limit", "pool_size", "tool_timeout", "system_prompt")


def repo_fix(tasks: Any = "catalogue", packages: Sequence[str] | None = None, limit: int | None = None,
             mode: str = "all", grade_timeout: float = 300.0, **options: Any) -> RepoFixEnv:
    """The entry point of `rlvr/RepoFix-v0` (`tasks`, `packages`, `limit`, `mode`, and the env's options)."""
    unknown = set(options) - set(ENV_OPTIONS)
    if unknown:
        raise TypeError(f"unexpected keyword argument(s) for rlvr/RepoFix-v0: {', '.join(sorted(unknown))}")
    source = RepoTasks(repo_tasks(tasks, packages, limit), mode=mode, grade_timeout=grade_timeout)
    return RepoFixEnv(source, **options)


__all__ = ["MODES", "RepoFixEnv", "RepoGrader", "RepoTasks", "RepoTools", "repo_fix", "repo_tasks"]
