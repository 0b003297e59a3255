"""The code that runs inside a worker process: symbolic grading that never raises.

Run as `python -m rlvr.verifiers.math.worker TASK_FD RESULT_FD` by the pool; it says
"ready" once sympy and latex2sympy are imported, then answers tasks one at a time.
"""

from __future__ import annotations

import sys
import time
from multiprocessing.connection import Connection

from rlvr.verifiers.math import grader, symbolic
from rlvr.verifiers.math.normalize import normalize
from rlvr.verifiers.math.structures import Node, parse_structure

_WARM_UP = (("\\sqrt{8}", "2\\sqrt{2}"), ("\\log_2 8", "3"), ("y=2x+1", "2x-y+1=0"), ("x^{y}+\\ln x", "x^y"))


def handle(task: tuple) -> tuple[str, object]:
    """`("grade", answer, reference, split_words, simplified)` -> ("ok", bool) or (reason, detail).

    Reasons: "guard" (refused as too costly), "bad_reference" (the reference does not
    parse), "parse_error" (the answer does not parse).
    """
    kind, answer, reference, split_words, simplified = task
    if kind != "grade":
        return "error", f"unknown task {kind!r}"
    try:
        verdict = grader.grade(answer, reference, symbolic=True, split_words=split_words, simplified=simplified)
        return "ok", bool(verdict)
    except symbolic.Guarded as exc:
        return ("bad_reference" if _side_fails(reference) else "guard"), str(exc)
    except RecursionError:
        return "guard", "recursion too deep"
    except Exception as exc:  # noqa: BLE001 - model output may break the parser in any way
        if _side_fails(reference):
            return "bad_reference", f"reference does not parse: {type(exc).__name__}"
        return "parse_error", f"{type(exc).__name__}: {str(exc)[:200]}"


def _side_fails(text: str) -> bool:
    """Whether some scalar leaf of `text` cannot be parsed."""
    try:
        for leaf in _leaves(parse_structure(normalize(text))):
            if leaf and not _cheap(leaf):
                symbolic.parse(leaf)
        return False
    except Exception:  # noqa: BLE001
        return True


def _cheap(leaf: str) -> bool:
    from rlvr.verifiers.math import numeric

    return numeric.to_rational(leaf) is not None


def _leaves(node: Node):
    if node.kind == "scalar":
        yield node.text
    for item in node.items:
        yield from _leaves(item)


def serve(tasks: Connection, results: Connection) -> None:
    """Answer tasks until the caller closes the pipe: send back (result, cpu seconds)."""
    for answer, reference in _WARM_UP:  # sympy imports and caches lazily: pay that before "ready"
        handle(("grade", answer, reference, False, False))
    results.send("ready")
    while True:
        try:
            task = tasks.recv()
        except (EOFError, OSError):
            return
        start = time.process_time()
        result = handle(task)
        try:
            results.send((result, time.process_time() - start))
        except (OSError, ValueError):
            return


if __name__ == "__main__":
    serve(Connection(int(sys.argv[1]), writable=False), Connection(int(sys.argv[2]), readable=False))
