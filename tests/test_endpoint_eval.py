"""`rlvr eval --endpoint URL --model NAME` against the real llama.cpp server: single- and multi-turn envs."""

from __future__ import annotations

import json

import pytest
from llama_server import Relay, free_port

from rlvr.cli import main
from rlvr.endpoint import ChatEndpoint, EndpointError, api_base, evaluate_endpoint


def test_api_base():
    assert api_base("http://127.0.0.1:8080") == "http://127.0.0.1:8080/v1"
    assert api_base("http://127.0.0.1:8080/v1/") == "http://127.0.0.1:8080/v1"
    assert api_base("https://host/openai/v1") == "https://host/openai/v1"
    with pytest.raises(ValueError, match="http://host:port"):
        api_base("127.0.0.1:8080")


def test_single_turn_pass_at_k(llama_server, capsys):
    code = main(["eval", "--env", "rlvr/Arithmetic-v0", "--endpoint", llama_server.url, "--model", llama_server.model,
                 "--limit", "3", "-n", "2", "-k", "1,2", "--temperature", "0.8", "--max-new-tokens", "24",
                 "--concurrency", "2", "--json", "--no-progress"])
    out = json.loads(capsys.readouterr().out)
    assert code == 0 and out["items"] == 3 and out["n"] == 2
    assert set(out["pass_at"]) == {"pass@1", "pass@2"} and 0.0 <= out["pass_at"]["pass@1"] <= out["pass_at"]["pass@2"]
    assert "error" not in out["reasons"]


def test_multi_turn_episodes_run_every_turn(llama_server, tmp_path, capsys):
    samples = tmp_path / "samples.jsonl"
    code = main(["eval", "--env", "rlvr/MathSelfCheck-v0", "--endpoint", llama_server.url + "/v1",
                 "--model", llama_server.model, "--limit", "2", "--max-new-tokens", "16", "--output", str(samples),
                 "--json", "--no-progress"])
    assert code == 0, capsys.readouterr().err
    rows = [json.loads(line) for line in samples.read_text().splitlines()]
    assert len(rows) == 2 and all(row["turns"] == 2 and len(row["replies"]) == 2 for row in rows)
    assert all(row["reason"] != "error" for row in rows)


def test_instruction_env_and_bounded_concurrency(llama_server):
    relay = Relay(llama_server.port)
    try:
        endpoint = ChatEndpoint(relay.url, llama_server.model, max_concurrency=2)
        result = evaluate_endpoint("rlvr/InstructionFollowing-v0", endpoint, n=2, ks=(1, 2), limit=3, max_tokens=24,
                                   temperature=0.7, keep_samples=True, progress=False)
        assert result.items == 3 and len(result.samples) == 6 and "error" not in result.reasons
        assert 1 <= relay.connections <= 2  # never more than two requests in flight
        endpoint.close()
    finally:
        relay.close()


def test_outage_mid_run_is_error_not_wrong(llama_server):
    relay = Relay(llama_server.port)
    endpoint = ChatEndpoint(relay.url, llama_server.model, retries=1, backoff=0.05, timeout=5)
    endpoint.check()
    relay.close()
    result = evaluate_endpoint("rlvr/Arithmetic-v0", endpoint, limit=2, progress=False, keep_samples=True)
    assert result.reasons == {"error": 2} and result.pass_at[1] == 0.0
    assert all("unreachable" in s["error"] or "timeout" in s["error"] for s in result.samples)


def test_cli_mistakes_are_one_line(capsys):
    port = free_port()
    assert main(["eval", "--env", "rlvr/Arithmetic-v0", "--endpoint", f"http://127.0.0.1:{port}", "--model", "m",
                 "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "did not answer" in err and "Traceback" not in err
    assert main(["eval", "--env", "rlvr/Arithmetic-v0", "--endpoint", "http://127.0.0.1:1", "--policy", "x:y"]) == 2
    assert "--model NAME" in capsys.readouterr().err
    assert main(["eval", "--env", "rlvr/Nope-v0", "--endpoint", "http://127.0.0.1:1", "--model", "m"]) == 2
    with pytest.raises(EndpointError) as info:
        ChatEndpoint(f"http://127.0.0.1:{port}", "m", retries=0).check()
    assert info.value.kind == "unreachable"
