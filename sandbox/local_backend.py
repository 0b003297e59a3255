"""The same job server as a plain local subprocess: weaker isolation, for hosts already isolated.

Use it only where the whole machine is a throwaway sandbox (a CI runner, a VM per job) or
for measuring what isolation costs. The tester still keeps tests and expected values out of
the program's process, and each job still gets rlimits (CPU, address space, file size), a
fresh temporary directory, a clean environment and a kill of its whole process tree when its
main process ends or at the deadline. But the program runs as *your* user: it can read your files, reach the network,
and signal or trace your processes. It is never picked unless asked for by name.
"""

from __future__ import annotations

import json
import os
import select
import subprocess
import sys
import time
from pathlib import Path

from rlvr.sandbox.docker_backend import WorkerError, await_verdict, read_reply
from rlvr.sandbox.protocol import Limits

HARNESS = Path(__file__).resolve().parent / "harness.py"


class LocalWorker:
    backend = "local"

    def __init__(self, limits: Limits, python: str | None = None):
        self.limits = limits
        self._out = bytearray()
        self.proc = subprocess.Popen(
            [python or sys.executable, "-I", "-B", str(HARNESS), "serve", "--local"],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
            env={"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LANG": "C.UTF-8"},
            start_new_session=True,
        )
        self.ident = f"local-{self.proc.pid}"
        try:
            hello = self._read_line(time.monotonic() + 30)
            if not hello.get("ready"):
                raise WorkerError(f"the local job server did not start: {hello}")
        except BaseException:
            self.close()
            raise

    def run(self, job: dict, due: float, budget: float) -> dict:
        try:
            self.proc.stdin.write(json.dumps(job).encode() + b"\n")
            self.proc.stdin.flush()
        except OSError as exc:
            raise WorkerError(f"the local job server is gone: {exc}") from None
        return await_verdict(self._read_line, due, budget)

    def _read_line(self, deadline: float) -> dict:
        return read_reply(self._out, deadline, self._receive, "the local job server")

    def _receive(self, timeout: float) -> None:
        fd = self.proc.stdout.fileno()
        if select.select([fd], [], [], timeout)[0]:
            chunk = os.read(fd, 1 << 20)
            if not chunk:
                raise WorkerError("the local job server exited")
            self._out.extend(chunk)

    def close(self):
        if self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, 9)
            except OSError:
                pass
            self.proc.wait()
        for stream in (self.proc.stdin, self.proc.stdout):
            try:
                stream.close()
            except OSError:
                pass
