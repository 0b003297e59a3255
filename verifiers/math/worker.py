"""The code that runs inside a worker process: symbolic grading that never raises.

The pool runs `python -m rlvr.verifiers.math.worker --zygote FD`: a process that imports
and warms up sympy and latex2sympy once, then forks one worker per request. Each worker
answers tasks one at a time over its own pipes.
"""

from __future__ import annotations

import gc
import os
import signal
import socket
import sys
import time
from multiprocessing.connection import Connection

from rlvr.verifiers.math import grader, numeric, powers, symbolic
from rlvr.verifiers.math.normalize import normalize
from rlvr.verifiers.math.structures import parse_structure

_WARM_UP = (("\\sqrt{8}", "2\\sqrt{2}"), ("\\log_2 8", "3"), ("y=2x+1", "2x-y+1=0"), ("x^{y}+\\ln x", "x^y"),
            ("x^2 > 1", "(-\\infty,-1)\\cup(1,\\infty)"), ("\\sin^2 x+\\cos^2 x", "1"), ("\\binom{5}{2}", "10"))


def handle(task: tuple) -> tuple[str, object]:
    """`("grade", answer, reference, split_words, simplified)` -> ("ok", bool) or (reason, detail);
    `("sympy", a, b)` compares through sympy only (the canary); `("plan", text, reference, fields, options)`
    checks a long completion whole (-> ("ok", Score) or ("ok", (verdict, info))).

    Reasons: "guard" (refused as too costly), "bad_reference" (the reference does not
    parse), "parse_error" (the answer does not parse).
    """
    if task[0] == "sympy":  # the canary: latex2sympy and sympy alone
        try:
            return "ok", bool(symbolic.equal(symbolic.parse(task[1]), symbolic.parse(task[2])))
        except Exception as exc:  # noqa: BLE001
            return "error", f"{type(exc).__name__}: {exc}"
    if task[0] == "reference":  # does this reference parse at all?
        return "ok", not _side_fails(task[1])
    if task[0] == "plan":  # a long completion, checked whole here (extraction too), under the caller's deadline
        return "ok", _plan_whole(*task[1:])
    kind, answer, reference, split_words, simplified, *rounded = task  # rounded: (rounded_references,) or ()
    if kind != "grade":
        return "error", f"unknown task {kind!r}"
    try:
        verdict = grader.grade(answer, reference, symbolic=True, split_words=split_words, simplified=simplified,
                               rounded_references=bool(rounded[0]) if rounded else True)
        return "ok", bool(verdict)
    except symbolic.Guarded as exc:
        return ("bad_reference" if _side_fails(reference) else "guard"), str(exc)
    except RecursionError:
        return "guard", "recursion too deep"
    except Exception as exc:  # noqa: BLE001 - model output may break the parser in any way
        if _side_fails(reference):
            return "bad_reference", f"reference does not parse: {type(exc).__name__}"
        return "parse_error", f"{type(exc).__name__}: {str(exc)[:200]}"


def _plan_whole(text: str, reference: str, fields: dict, options: dict):
    """A Score, or the symbolic verdict with the info planning gathered: `MathVerifier._plan`, then the grade."""
    from rlvr.verifiers.math import MathVerifier

    try:
        planned = MathVerifier(**options)._plan(text, reference, fields)
    except RecursionError:
        return ("guard", "recursion too deep"), {"answer": None}
    if isinstance(planned, tuple):
        task, info = planned
        return handle(task), info
    return planned


def _side_fails(text: str) -> bool:
    """Whether some scalar part of `text` cannot be parsed."""
    try:
        for leaf in grader.leaves(parse_structure(normalize(text), split_words=True)):
            if leaf.strip() and numeric.to_rational(leaf) is None and powers.parse(leaf) is None:
                symbolic.parse(leaf)
        return False
    except Exception:  # noqa: BLE001
        return True


def serve(tasks: Connection, results: Connection) -> None:
    """Answer tasks until the caller closes the pipe: send back (result, cpu seconds)."""
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


def zygote(sock: socket.socket) -> None:
    """Warm up, say "R", then fork a worker for every request until the socket closes.

    A request carries two file descriptors (the worker's task and result pipes); the
    reply is the worker's pid. Single-threaded, so forking is safe.
    """
    for answer, reference in _WARM_UP:  # sympy imports and caches lazily: pay that once, here
        handle(("grade", answer, reference, False, False))
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # dead workers are reaped automatically
    gc.freeze()  # the warmed-up heap: a worker's garbage collections skip it, so its pages stay shared
    sock.sendall(b"R")
    while True:
        try:
            msg, fds, _, _ = socket.recv_fds(sock, 1, 2)
        except OSError:
            return
        if not msg or len(fds) != 2:
            return
        pid = os.fork()
        if pid == 0:
            sock.close()
            signal.signal(signal.SIGCHLD, signal.SIG_DFL)
            try:
                serve(Connection(fds[0], writable=False), Connection(fds[1], readable=False))
            finally:
                os._exit(0)
        for fd in fds:
            os.close(fd)
        sock.sendall(pid.to_bytes(8, "little"))


if __name__ == "__main__":
    if sys.argv[1:2] == ["--zygote"]:
        zygote(socket.socket(fileno=int(sys.argv[2])))
