"""The `python` tool: the model's code runs in the Docker sandbox, like a notebook.

Each call is one sandbox job (the same isolation as code rewards: `rlvr.sandbox`, a
stdin/stdout job with no tests to pass), so nothing of the host is reachable and nothing
survives the job. State is kept across the calls of one episode by replay: a call runs every
earlier cell of the episode that finished without an exception (their output discarded),
then the new one. Cells are expected to be deterministic, as notebook cells usually are; a cell
that raised is not replayed. As in a notebook, the value of a final bare expression is shown.

Limits: `timeout` seconds of wall clock per call (replay included), `memory_mb` of address
space, and the reply is clipped to `max_output_chars` with a marker saying how much was cut.
A sandbox that fails (`error`: no Docker, a dead worker) raises `ToolUnavailable`: the env ends
the episode as an infrastructure error, which the trainer never trains on.
"""

from __future__ import annotations

import json
import secrets

from rlvr.envs.tools import ToolUnavailable  # (its home is tools.py; importable from here as before)
from rlvr.sandbox.protocol import Job, Limits

MAX_OUTPUT_CHARS = 1000
_PROGRAM = r'''
import ast, io, json, sys, traceback
_cells = json.loads(%(cells)s)
_ns = {"__name__": "__main__", "__builtins__": __builtins__}
def _run(source, show):
    tree = ast.parse(source, "<cell>")
    last = None
    if tree.body and isinstance(tree.body[-1], ast.Expr):
        last = ast.Expression(tree.body.pop().value)
    exec(compile(tree, "<cell>", "exec"), _ns)
    if last is not None:
        value = eval(compile(last, "<cell>", "eval"), _ns)
        if show and value is not None:
            print(repr(value))
_stdout = sys.stdout
sys.stdout = io.StringIO()
for _c in _cells[:-1]:
    try:
        _run(_c, False)
    except BaseException:
        pass
sys.stdout = _stdout
try:
    _run(_cells[-1], True)
    _ok = True
except SystemExit:
    _ok = True
except BaseException as _e:
    sys.stdout.flush()
    print("".join(traceback.format_exception_only(type(_e), _e)).rstrip())
    _ok = False
sys.stdout.flush()
print(%(marker)s if _ok else "")
'''


class PythonTool:
    """The `python` tool of one env: `tool(code)` runs a cell; `reset()` starts a new episode's notebook."""

    name = "python"

    def __init__(self, *, timeout: float = 5.0, memory_mb: int = 256, max_output_chars: int = MAX_OUTPUT_CHARS,
                 backend: str = "docker", pool=None):
        if not (isinstance(timeout, (int, float)) and timeout > 0):
            raise ValueError(f"timeout must be a positive number of seconds, got {timeout!r}")
        if not (isinstance(max_output_chars, int) and max_output_chars >= 100):
            raise ValueError(f"max_output_chars must be an int >= 100, got {max_output_chars!r}")
        self.timeout, self.max_output_chars, self.backend = float(timeout), max_output_chars, backend
        self.limits = Limits(memory_mb=memory_mb, output_limit=max(64 * 1024, 4 * max_output_chars))
        self._pool = pool
        self.cells: list[str] = []

    def reset(self) -> None:
        self.cells = []

    def __call__(self, code: str) -> str:
        """Run Python code and return what it prints (and the value of a final expression).

        Args:
            code: Python source. Variables and imports persist between calls.
        """
        if not isinstance(code, str):
            raise TypeError("code must be a string")
        marker = "__cell_ok_" + secrets.token_hex(8)
        program = _PROGRAM % {"cells": repr(json.dumps([*self.cells, code])), "marker": repr(marker)}
        result = self.pool().run(Job(code=program, io_tests=[{"input": "", "output": ""}], timeout=self.timeout))
        if result.status == "error":
            raise ToolUnavailable(result.error or "the sandbox failed")
        output = result.stdout
        if not output and result.tests:
            output = str(result.tests[0].get("got", ""))
        ok = output.rstrip().endswith(marker)
        if ok:
            output = output.rstrip()[: -len(marker)]
            self.cells.append(code)
        if result.status == "timeout":
            output += f"\nTimeoutError: the code ran longer than {self.timeout:g} seconds"
        elif result.status == "memory":
            output += f"\nMemoryError: the code used more than {self.limits.memory_mb} MB"
        elif result.status == "crash" and not ok:
            output += f"\nthe Python process died ({result.error or 'crash'})"
        elif result.truncated or any("output limit" in str(t.get("error", "")) for t in result.tests):
            output += "\n[output limit exceeded: the process was stopped]"
        return clip(output.strip("\n"), self.max_output_chars)

    def pool(self):
        if self._pool is None:
            from rlvr.sandbox import get_pool

            self._pool = get_pool(self.backend, limits=self.limits)
        return self._pool


def clip(text: str, limit: int) -> str:
    """`text` cut to `limit` characters (head and tail kept) with a marker saying how much was cut."""
    if len(text) <= limit:
        return text
    keep = limit - 60
    head, tail = text[: keep * 3 // 4], text[len(text) - keep // 4:]
    return f"{head}\n... [output truncated: {len(text) - len(head) - len(tail)} characters cut] ...\n{tail}"


__all__ = ["MAX_OUTPUT_CHARS", "PythonTool", "ToolUnavailable", "clip"]
