"""`rlvr eval --endpoint URL --model NAME` against the real llama.cpp server: single- and multi-turn envs."""

from __future__ import annotations

import json
import math
from collections import Counter

import pytest
from conftest import require_docker
from llama_server import Relay
from waiting import free_port

from rlvr.cli import main
from rlvr.envs import make
from rlvr.envs.python_tool import PythonTool
from rlvr.evaluation.endpoint import evaluate_endpoint
from rlvr.openai_client import ChatEndpoint, EndpointError, _token_logprobs, api_base

LOOP_TASKS = 3  # ToolMath tasks evaluated; greedy SmolLM2, shown two worked calls, calls python on each


def test_api_base():
    assert api_base("http://127.0.0.1:8080") == "http://127.0.0.1:8080/v1"
    assert api_base("http://127.0.0.1:8080/v1/") == "http://127.0.0.1:8080/v1"
    assert api_base("https://host/openai/v1") == "https://host/openai/v1"
    with pytest.raises(ValueError, match="http://host:port"):
        api_base("127.0.0.1:8080")


@pytest.mark.parametrize("choice,expected", [
    ({"logprobs": {"content": [{"token": "a", "logprob": -0.5}, {"token": "b", "logprob": 0}]}}, [-0.5, 0.0]),
    ({}, None), ({"logprobs": None}, None), ({"logprobs": {"content": None}}, None), ({"logprobs": "yes"}, None),
    ({"logprobs": {"content": []}}, None), ({"logprobs": {"content": [{"token": "a"}]}}, None),
    ({"logprobs": {"content": [{"token": "a", "logprob": "x"}]}}, None)])
def test_a_replys_token_logprobs_are_read_or_left_out(choice, expected):
    assert _token_logprobs(choice) == expected


# One-digit sums with the `make run` recipe's one-line system prompt, unboxed answers accepted: SmolLM2
# gets some right, and the server samples the same episodes every run (each request carries its seed).
SOLVABLE = ["--env-arg", "digits=1", "--env-arg", 'ops="+"', "--env-arg", "require_boxed=false", "--env-arg",
            'system_prompt="Answer in one line: write the sum, then its value in \\\\boxed{}. '
            'Example: 12 + 30 = \\\\boxed{42}"']


def test_single_turn_pass_at_k(llama_server, tmp_path, capsys):
    samples, n, tasks = tmp_path / "samples.jsonl", 4, 6
    code = main(["eval", "--env", "rlvr/Arithmetic-v0", "--endpoint", llama_server.url, "--model", llama_server.model,
                 "--limit", str(tasks), "-n", str(n), "-k", "1,2,4", "--temperature", "1.0", "--max-new-tokens", "28",
                 "--concurrency", "2", "--output", str(samples), "--json", "--no-progress", *SOLVABLE])
    out = json.loads(capsys.readouterr().out)
    assert code == 0 and out["items"] == tasks and out["n"] == n
    assert "error" not in out["reasons"]
    # pass@k from the episodes the server played, counted here with the unbiased estimator
    # 1 - C(n - c, k) / C(n, k) per task, averaged over tasks
    episodes = [json.loads(line) for line in samples.read_text().splitlines()]
    correct = Counter()
    for sample in episodes:
        correct[sample["task_id"]] += sample["correct"]
    assert len(episodes) == n * tasks and len(correct) == tasks and set(out["pass_at"]) == {"pass@1", "pass@2", "pass@4"}
    # the case is only a test if some tasks are solved by some samples and not others (else every pass@k is 0,
    # 1 or equal)
    assert any(0 < c < n for c in correct.values()), correct
    for k in (1, 2, 4):
        expected = sum(1 - math.comb(n - c, k) / math.comb(n, k) for c in correct.values()) / tasks
        assert out["pass_at"][f"pass@{k}"] == pytest.approx(expected), k
    assert out["pass_at"]["pass@1"] < out["pass_at"]["pass@2"] < out["pass_at"]["pass@4"]


def test_multi_turn_episodes_run_every_turn(llama_server, tmp_path, capsys):
    samples = tmp_path / "samples.jsonl"
    code = main(["eval", "--env", "rlvr/MathSelfCheck-v0", "--endpoint", llama_server.url + "/v1",
                 "--model", llama_server.model, "--limit", "2", "--max-new-tokens", "16", "--output", str(samples),
                 "--json", "--no-progress"])
    assert code == 0, capsys.readouterr().err
    rows = [json.loads(line) for line in samples.read_text().splitlines()]
    assert len(rows) == 2 and all(row["turns"] == 2 and len(row["replies"]) == 2 for row in rows)
    assert all(row["reason"] != "error" for row in rows)
    assert not any("logprobs" in row for row in rows)  # not asked for (--logprobs)


def test_the_servers_token_logprobs_reach_the_samples(llama_server, tmp_path, capsys):
    """`--logprobs`: every turn's request asks for them, and the episode's line in --output holds the server's
    log-prob of every token it sampled, turn after turn, exactly as the server sent them."""
    samples = tmp_path / "samples.jsonl"
    relay = Relay(llama_server.port)
    try:
        code = main(["eval", "--env", "rlvr/MathSelfCheck-v0", "--endpoint", relay.url, "--model", llama_server.model,
                     "--limit", "1", "--max-new-tokens", "16", "--logprobs", "--output", str(samples), "--json",
                     "--no-progress"])
    finally:
        relay.close()
    assert code == 0, capsys.readouterr().err
    row, = [json.loads(line) for line in samples.read_text().splitlines()]
    (_, *requests), (_, *replies) = relay.requests, relay.replies  # after the check, one episode's turns in order
    assert row["turns"] == len(requests) == len(replies) == 2 and all(r["logprobs"] is True for r in requests)
    sent = [[t["logprob"] for t in reply["choices"][0]["logprobs"]["content"]] for reply in replies]
    assert all(sent) and row["logprobs"] == sent[0] + sent[1]
    assert all(lp <= 0.0 for lp in row["logprobs"])
    assert row["replies"] == [reply["choices"][0]["message"]["content"] for reply in replies]


def test_instruction_env_and_bounded_concurrency(llama_server):
    relay = Relay(llama_server.port)
    try:
        endpoint = ChatEndpoint(relay.url, llama_server.model, max_concurrency=2)
        result = evaluate_endpoint("rlvr/InstructionFollowing-v0", endpoint, n=2, ks=(1, 2), limit=3, max_new_tokens=24,
                                   temperature=0.7, keep_samples=True, progress=False)
        assert result.items == 3 and len(result.samples) == 6 and "error" not in result.reasons
        assert len(relay.requests) == 6
        assert relay.max_in_flight == 2  # measured at the server side: two requests at once, never three
        endpoint.close()
    finally:
        relay.close()


def test_tool_env_tells_the_served_model_its_tools(llama_server, tmp_path, capsys):
    """`rlvr eval --endpoint` on ToolMath: `tools=`, the tool prompt, ids pairing calls and replies, a real tool loop."""
    require_docker(lambda: PythonTool().pool())
    kwargs = {"tasks": "arithmetic", "digits": 3, "ops": "*", "require_boxed": False, "demos": 2, "max_turns": 3}
    samples = tmp_path / "samples.jsonl"
    relay = Relay(llama_server.port)
    try:
        code = main(["eval", "--env", "rlvr/ToolMath-v0", "--endpoint", relay.url, "--model", llama_server.model,
                     "--limit", str(LOOP_TASKS), "--max-new-tokens", "64", "--concurrency", "1", "--output", str(samples),
                     "--json", "--no-progress", *[f"--env-arg={k}={json.dumps(v)}" for k, v in kwargs.items()]])
    finally:
        relay.close()
    assert code == 0, capsys.readouterr().err
    rows = [json.loads(line) for line in samples.read_text().splitlines()]
    assert len(rows) == LOOP_TASKS and all(row["reason"] != "error" for row in rows), rows
    check, *requests = relay.requests  # the one-token request that checks the server answers, then the episodes
    assert "tools" not in check
    schemas = make("rlvr/ToolMath-v0", **kwargs).unwrapped.tool_schemas
    assert all(r["tools"] == schemas for r in requests)
    assert all("<tools>" in r["messages"][0]["content"] for r in requests)  # SmolLM2's template ignores tools=
    looped = [row for row in rows if row["tool_calls"] >= 1 and row["turns"] >= 2]
    assert any(row["correct"] for row in looped), [row["replies"] for row in rows]  # the product came from python
    # Each request after a call of the model's own: the call with an id, then the tool's reply under that id.
    # A call in an episode's last turn (it ran out of turns) is answered by the env but asks the server nothing more.
    after = [r["messages"] for r in requests if r["messages"][-1]["role"] == "tool"]
    last_turn_calls = sum(s["ended_by"] == "max_turns" and "<tool_call>" in s["replies"][-1] for s in looped)
    assert len(after) == sum(s["tool_calls"] for s in looped) - last_turn_calls, rows
    ran = 0
    for messages in after:
        call, reply = messages[-2], messages[-1]
        assert reply["tool_call_id"] == call["tool_calls"][0]["id"] and len(call["tool_calls"]) == 1
        if call["tool_calls"][0]["function"]["name"] == "python":  # else a call the env could not read
            source = json.loads(call["tool_calls"][0]["function"]["arguments"])["code"]
            assert call["content"].startswith("<tool_call>") and source in call["content"]
            ran += reply["content"].isdigit()  # the sandbox's output: the product
    assert ran >= 1
    first = requests[0]["messages"]  # the worked examples are paired the same way
    assert first[3]["role"] == "tool" and first[3]["tool_call_id"] == first[2]["tool_calls"][0]["id"]


def test_structured_tool_calls_from_the_server_run_in_the_env(llama_server):
    """llama.cpp answers with structured `tool_calls` when `tool_choice` names a tool: they reach the env as calls."""
    require_docker(lambda: PythonTool().pool())
    relay = Relay(llama_server.port)
    try:
        endpoint = ChatEndpoint(relay.url, llama_server.model)
        forced = {"type": "function", "function": {"name": "python"}}
        result = evaluate_endpoint("rlvr/ToolMath-v0", endpoint, limit=1, max_new_tokens=48, keep_samples=True,
                                   progress=False, params={"tool_choice": forced},
                                   env_kwargs={"tasks": "arithmetic", "digits": 3, "ops": "*", "max_turns": 2})
        endpoint.close()
    finally:
        relay.close()
    outcome, = result.samples
    assert (outcome["tool_calls"], outcome["turns"], outcome["ended_by"]) == (2, 2, "max_turns")
    assert all(reply.startswith("<tool_call>") for reply in outcome["replies"])  # written in the env's format
    second = relay.requests[1]["messages"]
    call, reply = second[-2], second[-1]
    assert call["role"] == "assistant" and call["content"] == ""  # as the server sent it: the call is structured
    assert reply["role"] == "tool" and reply["tool_call_id"] == call["tool_calls"][0]["id"] and reply["content"]


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
