"""`rlvr serve` as users run it: a real server process on loopback, driven over HTTP.

Every malformed request must get a 4xx JSON error and leave the server serving; SIGTERM must
let the request in flight finish.
"""

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx
import pytest

from rlvr.verifiers.core import Score, Verifier

TESTS = Path(__file__).resolve().parent
TOKEN = "test-token-5f1c"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
LIMITS = ["--max-batch", "8", "--max-chars", "2000", "--max-body-bytes", "65536"]


class Sleepy(Verifier):
    """A verifier that takes `seconds` per batch: keeps a request in flight while the test signals."""

    name = "sleepy"

    def __init__(self, seconds: float = 1.0):
        self.seconds = seconds

    def score(self, completion, reference=None, **fields):
        return Score(1.0)

    def score_batch(self, completions, references=None, task_fields=None):
        time.sleep(self.seconds)
        return [Score(1.0) for _ in completions]


class Broken(Verifier):
    """A verifier with a bug: it raises instead of returning a score."""

    name = "broken"

    def score(self, completion, reference=None, **fields):
        raise RuntimeError("verifier bug")


def start_server(*args, env_token=TOKEN):
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(TESTS), os.environ.get("PYTHONPATH", "")]))
    env.pop("RLVR_SERVE_TOKEN", None)
    if env_token:
        env["RLVR_SERVE_TOKEN"] = env_token
    proc = subprocess.Popen([sys.executable, "-m", "rlvr", "serve", "--port", "0", *args], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    line = proc.stdout.readline()
    if "listening on" not in line:
        proc.kill()
        raise AssertionError(f"server did not start: {line!r} {proc.stderr.read()}")
    url = line.split("listening on ")[1].strip()
    deadline = time.time() + 60
    while time.time() < deadline:
        try:
            if httpx.get(f"{url}/health", timeout=2).status_code == 200:
                return proc, url
        except httpx.TransportError:
            time.sleep(0.1)
    proc.kill()
    raise AssertionError("server did not answer /health")


def stop(proc):
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


@pytest.fixture(scope="module")
def server():
    proc, url = start_server(*LIMITS, "--register", "broken=test_serve:Broken")
    with httpx.Client(base_url=url, timeout=60) as client:
        yield client
    stop(proc)
    assert proc.returncode == 0, proc.stderr.read()


GOOD = "<think>2 + 2 = 4</think> The answer is \\boxed{4}."


def valid_request():
    return {"verifier": "think_format", "items": [{"completion": GOOD}, {"completion": "just 4"}]}


def test_health_is_open_and_the_rest_needs_the_token(server):
    health = server.get("/health").json()
    assert health["status"] == "ok" and "in_flight" in health
    for call in [lambda h: server.get("/verifiers", headers=h), lambda h: server.post("/score", json=valid_request(), headers=h)]:
        for headers in [{}, {"Authorization": "Bearer wrong"}, {"Authorization": TOKEN}]:
            response = call(headers)
            assert response.status_code == 401
            assert response.headers["www-authenticate"] == "Bearer"
            assert "token" in response.json()["error"]
    listing = server.get("/verifiers", headers=AUTH).json()
    assert {"math", "code", "think_format", "boxed"} <= set(listing["verifiers"])
    assert "rlvr/Arithmetic-v0" in listing["envs"]


def test_scores_come_back_in_order_with_breakdowns_and_reasons(server):
    body = {"items": [
        {"verifier": "think_format", "completion": GOOD},
        {"verifier": "boxed", "completion": "<think>x</think> \\boxed{1} or \\boxed{2}"},
        {"verifier": "think_format", "completion": [{"role": "user", "content": "q"},
                                                     {"role": "assistant", "content": "no think"}]},
        {"verifier": "think_format", "options": {"answer_tags": True}, "completion": GOOD},
        {"verifier": "tag_count", "completion": "<think>a</think><answer>4</answer>"},
    ]}
    response = server.post("/score", json=body, headers=AUTH)
    assert response.status_code == 200, response.text
    results = response.json()["results"]
    assert [r["score"] for r in results] == [1.0, 0.0, 0.0, 0.0, 1.0]
    assert [r["reason"] for r in results] == [None, "hedge", "format", "format", None]
    assert results[2]["info"]["why"] == "no <think> tag"
    assert all(set(r) >= {"score", "reason", "components", "reasons", "info"} for r in results)


def test_env_items_are_scored_at_their_reset_seed(server):
    from rlvr.integrations.trl import env_dataset

    kwargs = {"digits": 1, "ops": "+"}
    data = env_dataset("rlvr/Arithmetic-v0", 3, seed=5, **kwargs)
    answers = [str(eval(p[-1]["content"].split("Compute ", 1)[1].split(".", 1)[0])) for p in data["prompt"]]
    items = [{"seed": s, "completion": f"\\boxed{{{a}}}"} for s, a in zip(data["rlvr_seed"], answers)]
    items += [{"seed": 5, "completion": f"\\boxed{{{int(answers[0]) + 1}}}"}, {"seed": 6, "completion": "none"}]
    response = server.post("/score", json={"env": "rlvr/Arithmetic-v0", "options": kwargs, "items": items},
                           headers=AUTH)
    assert response.status_code == 200, response.text
    results = response.json()["results"]
    assert [r["score"] for r in results] == [1.0, 1.0, 1.0, 0.0, 0.0]
    assert [r["correct"] for r in results] == [True, True, True, False, False]
    assert [r["reason"] for r in results[3:]] == ["wrong", "no_answer"]
    assert [r["task_id"] for r in results[:3]] == list(data["task_id"])


MALFORMED = {
    "bad json": (b'{"items": [', {}),
    "not an object": (b'[1, 2]', {}),
    "items not a list": (b'{"items": {"completion": "x"}}', {}),
    "completion a number": (json.dumps({"verifier": "boxed", "items": [{"completion": 4}]}).encode(), {}),
    "fields a string": (json.dumps({"verifier": "boxed", "items": [{"completion": "x", "fields": "a"}]}).encode(), {}),
    "seed a string": (json.dumps({"env": "rlvr/Arithmetic-v0", "items": [{"completion": "x", "seed": "1"}]}).encode(), {}),
    "unknown key": (json.dumps({"verifier": "boxed", "items": [{"completion": "x", "answer": 1}]}).encode(), {}),
    "unknown verifier": (json.dumps({"verifier": "nope", "items": [{"completion": "x"}]}).encode(), {}),
    "unknown env": (json.dumps({"env": "rlvr/Nope-v0", "items": [{"completion": "x", "seed": 1}]}).encode(), {}),
    "env without seed": (json.dumps({"env": "rlvr/Arithmetic-v0", "items": [{"completion": "x"}]}).encode(), {}),
    "bad option": (json.dumps({"verifier": "boxed", "options": {"bogus": 1}, "items": [{"completion": "x"}]}).encode(), {}),
    "no verifier": (json.dumps({"items": [{"completion": "x"}]}).encode(), {}),
    "empty batch": (json.dumps({"verifier": "boxed", "items": []}).encode(), {}),
    "batch too large": (json.dumps({"verifier": "boxed", "items": [{"completion": "x"}] * 9}).encode(), {}),
    "string too long": (json.dumps({"verifier": "boxed", "items": [{"completion": "x" * 2001}]}).encode(), {}),
    "nested string too long": (json.dumps({"verifier": "boxed", "items": [{"completion": "x", "fields": {"t": ["y" * 2001]}}]}).encode(), {}),
    "body too large": (b'{"pad": "' + b"x" * 70000 + b'"}', {}),
    "not json content type": (json.dumps(valid_request()).encode(), {"content-type": "text/plain"}),
}
EXPECTED = {"batch too large": 413, "body too large": 413, "not json content type": 415}


@pytest.mark.parametrize("case", list(MALFORMED))
def test_malformed_requests_get_a_json_4xx_and_the_server_keeps_serving(server, case):
    body, extra = MALFORMED[case]
    headers = {**AUTH, "content-type": "application/json", **extra}
    response = server.post("/score", content=body, headers=headers)
    assert response.status_code == EXPECTED.get(case, 422), response.text
    assert response.headers["content-type"] == "application/json"
    assert isinstance(response.json()["error"], str) and response.json()["error"]
    after = server.post("/score", json=valid_request(), headers=AUTH)
    assert after.status_code == 200 and [r["score"] for r in after.json()["results"]] == [1.0, 0.0]


def test_a_verifier_that_crashes_gets_a_json_500_and_the_server_keeps_serving(server):
    response = server.post("/score", json={"verifier": "broken", "items": [{"completion": "x"}]}, headers=AUTH)
    assert response.status_code == 500
    assert response.json()["error"] == "internal error: RuntimeError: verifier bug"
    assert server.post("/score", json=valid_request(), headers=AUTH).status_code == 200


def test_error_messages_say_what_is_wrong(server):
    def error(case):
        body, extra = MALFORMED[case]
        return server.post("/score", content=body, headers={**AUTH, "content-type": "application/json", **extra}).json()["error"]

    assert "unknown verifier 'nope'" in error("unknown verifier")
    assert "over the limit of 8" in error("batch too large")
    assert "items.0.fields.t.0" in error("nested string too long")
    assert "65536 bytes" in error("body too large")
    assert "bogus" in error("bad option")
    assert error("bad json") == "the body is not valid JSON"


def test_a_streamed_body_without_length_is_cut_at_the_limit(server):
    def chunks():
        yield b'{"items": ["'
        for _ in range(100):
            yield b"x" * 1000
        yield b'"]}'

    response = server.post("/score", content=chunks(), headers={**AUTH, "content-type": "application/json"})
    assert response.status_code == 413 and "bytes" in response.json()["error"]
    assert server.get("/health").status_code == 200


def test_unknown_paths_and_methods_answer_json(server):
    for response in [server.get("/nope", headers=AUTH), server.get("/score", headers=AUTH)]:
        assert response.status_code in (404, 405) and "error" in response.json()


def test_concurrent_clients_all_get_their_own_results(server):
    results, errors = {}, []

    def client(k):
        try:
            with httpx.Client(base_url=str(server.base_url), timeout=60) as own:
                for j in range(5):
                    good = (k + j) % 2 == 0
                    body = {"verifier": "think_format", "items": [{"completion": GOOD if good else "x"}] * 3}
                    out = own.post("/score", json=body, headers=AUTH).json()["results"]
                    results[(k, j)] = ([r["score"] for r in out], good)
        except Exception as exc:  # surfaced below with the failing client's index
            errors.append((k, exc))

    threads = [threading.Thread(target=client, args=(k,)) for k in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert len(results) == 30
    assert all(scores == ([1.0] * 3 if good else [0.0] * 3) for scores, good in results.values())


def test_request_options_can_be_refused():
    from fastapi.testclient import TestClient

    from rlvr.integrations.server import ServerConfig, create_app

    client = TestClient(create_app(ServerConfig(request_options=False)))
    plain = client.post("/score", json=valid_request())
    assert plain.status_code == 200
    for body in [{**valid_request(), "options": {"answer_tags": True}},
                 {"items": [{"verifier": "math", "options": {"workers": 64}, "completion": "1"}]}]:
        refused = client.post("/score", json=body)
        assert refused.status_code == 422 and "--no-request-options" in refused.json()["error"]


def test_sigterm_finishes_the_request_in_flight_then_exits_cleanly():
    proc, url = start_server("--register", "sleepy=test_serve:Sleepy", "--grace", "20")
    try:
        outcome = {}

        def slow_request():
            body = {"verifier": "sleepy", "options": {"seconds": 2.0}, "items": [{"completion": "x"}] * 3}
            outcome["response"] = httpx.post(f"{url}/score", json=body, headers=AUTH, timeout=60)

        thread = threading.Thread(target=slow_request)
        thread.start()
        deadline = time.time() + 30
        while httpx.get(f"{url}/health").json()["in_flight"] < 1:
            assert time.time() < deadline, "the slow request never started"
            time.sleep(0.05)
        proc.send_signal(signal.SIGTERM)
        thread.join(timeout=60)
        response = outcome["response"]
        assert response.status_code == 200
        assert [r["score"] for r in response.json()["results"]] == [1.0, 1.0, 1.0]
        assert proc.wait(timeout=30) == 0
        host, port = url.removeprefix("http://").rsplit(":", 1)
        with pytest.raises(OSError):
            socket.create_connection((host, int(port)), timeout=2).close()
    finally:
        stop(proc)


def test_the_listening_socket_is_tcp_so_responses_are_not_delayed():
    from rlvr.integrations.serve import _bind

    # asyncio turns on TCP_NODELAY for accepted sockets only when the listener's proto is TCP;
    # without it each keep-alive response waited ~40 ms for a delayed ACK.
    sock = _bind("127.0.0.1", 0)
    try:
        assert sock.proto == socket.IPPROTO_TCP
    finally:
        sock.close()


def run_serve(*args, env_token=None):
    env = dict(os.environ)
    env.pop("RLVR_SERVE_TOKEN", None)
    return subprocess.run([sys.executable, "-m", "rlvr", "serve", *args], capture_output=True, text=True,
                          env=env, timeout=60)


def test_cli_mistakes_are_one_line_and_exit_2(tmp_path):
    empty = tmp_path / "token"
    empty.write_text("  \n")
    busy = socket.socket()
    busy.bind(("127.0.0.1", 0))
    busy.listen(1)
    try:
        cases = [
            (["--register", "nonsense"], "NAME=MODULE:ATTR"),
            (["--token-file", str(empty), "--port", "0"], "empty"),
            (["--token-file", str(tmp_path / "missing"), "--port", "0"], "No such file"),
            (["--port", str(busy.getsockname()[1])], "cannot bind"),
            (["--max-batch", "0", "--port", "0"], "max_batch must be at least 1"),
            (["--preload", "nope", "--port", "0"], "unknown verifier 'nope'"),
        ]
        for args, message in cases:
            done = run_serve(*args)
            assert done.returncode == 2, (args, done.stderr)
            assert message in done.stderr and "Traceback" not in done.stderr
            assert len(done.stderr.strip().splitlines()) == 1, done.stderr
    finally:
        busy.close()
