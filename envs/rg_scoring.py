"""reasoning-gym's scorers run in a worker process, under a hard time limit.

Some of reasoning-gym's `score_answer` functions hand the model's answer to sympy, which
can run for hours on an answer such as `9**9**9**9`. A thread cannot be stopped, so the
scorers run in a child process (`serve` below) that answers one request
at a time over a pipe; the caller waits with a deadline and, past it, kills the child and
starts a fresh one. The child imports reasoning-gym once and keeps one scorer per dataset
configuration. One worker per calling process, shared by its threads under a lock.
"""

from __future__ import annotations

import atexit
import json
import socket
import subprocess
import sys
import threading
from multiprocessing.connection import Connection
from typing import Any

STARTUP_TIMEOUT = 120.0  # importing reasoning-gym on a loaded machine


class _Worker:
    def __init__(self):
        ours, theirs = socket.socketpair()
        code = f"from rlvr.envs.rg_scoring import serve; serve({theirs.fileno()})"
        self.process = subprocess.Popen([sys.executable, "-c", code], pass_fds=(theirs.fileno(),),
                                        stdin=subprocess.DEVNULL)
        theirs.close()
        self.conn = Connection(ours.detach())
        if not self.conn.poll(STARTUP_TIMEOUT):
            self.close()
            raise RuntimeError("the reasoning-gym scoring process did not start")
        ready = self.conn.recv()
        if ready != "ready":
            self.close()
            raise RuntimeError(f"the reasoning-gym scoring process failed to start: {ready}")

    def close(self) -> None:
        self.process.kill()
        self.process.wait()
        self.conn.close()


_lock = threading.Lock()
_worker: _Worker | None = None


CHUNK = 256  # requests in flight at once (their replies are small; the pipe never fills)


def score_many(requests: list[tuple[str, str | None, Any, str, dict]], timeout: float) -> list[tuple[str, Any]]:
    """Score `(dataset, key, config, answer, entry)` requests in one exchange with the worker.

    Each reply is ("ok", score), ("raised", message) when the scorer failed on the answer,
    or ("timeout", message) when it ran past `timeout` seconds (or its process died): the
    worker is then replaced and the requests after it go to the fresh one.
    """
    global _worker
    replies: list[tuple[str, Any]] = []
    with _lock:
        pending = list(requests)
        while pending:
            if _worker is None or _worker.process.poll() is not None:
                _worker = _Worker()
            batch, pending = pending[:CHUNK], pending[CHUNK:]
            done = 0
            try:
                for request in batch:
                    _worker.conn.send(request)
                while done < len(batch) and _worker.conn.poll(timeout):
                    replies.append(_worker.conn.recv())
                    done += 1
            except (EOFError, OSError):
                pass
            if done < len(batch):  # past the limit, or the process died: a fresh one for the rest
                _worker.close()
                _worker = None
                replies.append(("timeout", f"reasoning-gym's scorer ran past {timeout:g} s (or its process died)"))
                pending = batch[done + 1:] + pending
    return replies


@atexit.register
def _shutdown() -> None:
    if _worker is not None:
        _worker.close()


def serve(fd: int) -> None:
    """The child: build scorers on demand and answer requests until the pipe closes."""
    conn = Connection(fd)
    try:
        import reasoning_gym.factory as factory
    except Exception as exc:  # noqa: BLE001
        conn.send(f"{type(exc).__name__}: {exc}")
        return
    conn.send("ready")
    scorers: dict = {}
    while True:
        try:
            dataset, key, config, answer, entry = conn.recv()
        except (EOFError, OSError):
            return
        try:
            if (dataset, key) not in scorers:
                scorers[dataset, key] = _scorer(factory, dataset, key, config)
            reply = ("ok", float(scorers[dataset, key](answer, entry)))
        except Exception as exc:  # noqa: BLE001 - a model's answer may break a scorer in any way
            reply = ("raised", f"{type(exc).__name__}: {exc}"[:300])
        conn.send(reply)


def _scorer(factory, dataset: str, key: str | None, config: Any):
    """The dataset's `score_answer` under `config`; without the object (made in another
    process), the configuration rebuilt from its JSON `key`; failing that, the default."""
    dataset_cls, config_cls = factory.DATASETS[dataset]
    if config is None and key is not None:
        try:
            config = config_cls(**json.loads(key))
        except Exception:  # noqa: BLE001 - enums and other objects do not survive JSON
            config = None
    return dataset_cls(config=config).score_answer if config is not None else factory.get_score_answer_fn(dataset)

