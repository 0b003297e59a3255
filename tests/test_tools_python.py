"""The sandboxed `python` tool: notebook state within an episode, limits, isolation (needs Docker)."""

import json
import subprocess
import sys
from pathlib import Path

import gymnasium as gym
import pytest
from conftest import require_docker
from host_listener import arrived, bridge_gateway, listening

import rlvr.envs  # noqa: F401  (registers rlvr/ToolMath-v0)
from rlvr.envs.python_tool import PythonTool


@pytest.fixture(scope="module")
def tool():
    made = PythonTool(timeout=3.0, max_output_chars=300)
    require_docker(made.pool)  # skips without Docker, fails under CI
    return made


def test_state_persists_across_calls_and_resets(tool):
    tool.reset()
    assert tool("import math\nx = 123 * 456") == ""
    assert tool("x + 1") == "56089"  # the value of a final expression is shown, as in a notebook
    assert tool("print(math.factorial(5)); y = x") == "120"
    assert tool("1 / 0") == "ZeroDivisionError: division by zero"
    assert tool("y") == "56088"  # the failed cell did not break the state
    tool.reset()
    assert tool("x").startswith("NameError")


def test_limits_time_memory_output(tool):
    tool.reset()
    assert "TimeoutError" in tool("while True:\n    pass")
    assert "MemoryError" in tool("b = bytearray(2 * 1024 ** 3)")
    out = tool("print('x' * 100_000)")
    assert len(out) <= 300 and "output truncated" in out
    assert tool("2 + 2") == "4"  # the notebook goes on after each


# Connects to each host address and says who it is; prints the addresses it reached.
REACH = """import socket
reached = []
for host in {hosts!r}:
    try:
        with socket.create_connection((host, {port}), timeout=3) as s:
            s.sendall(f'{tag} {{host}}'.encode())
        reached.append(host)
    except OSError:
        pass
print('reached', reached)"""


def test_code_runs_isolated(tool):
    tool.reset()
    here = str(Path(__file__).resolve())  # a host file, which the host sees and the tool must not
    assert Path(here).is_file() and tool(f"import os\nos.path.exists({here!r})") == "False"
    uid = tool("import os\nos.getuid()")
    assert uid.isdigit() and uid != "0", uid
    pool = tool.pool()
    hosts = ["127.0.0.1", bridge_gateway(pool._client)]  # the host's loopback, the host seen from a container
    with listening() as (port, received):
        assert tool(REACH.format(hosts=hosts, port=port, tag="sandbox")) == "reached []"
        # The same code unisolated reaches the listener: on the host, and in the same image with networking.
        on_host = subprocess.run([sys.executable, "-c", REACH.format(hosts=hosts, port=port, tag="host")],
                                 capture_output=True, text=True, timeout=30).stdout
        assert on_host.strip() == f"reached {hosts}"
        bridged = pool._client.containers.run(pool.image, ["python3", "-c", REACH.format(
            hosts=hosts[1:], port=port, tag="bridged")], network_mode="bridge", remove=True).decode()
        assert bridged.strip() == f"reached {hosts[1:]}"
        assert arrived(received, 3) == sorted([f"host {hosts[0]}", f"host {hosts[1]}", f"bridged {hosts[1]}"])


def test_tool_math_episode_end_to_end(tool):
    env = gym.make("rlvr/ToolMath-v0", tasks="arithmetic", digits=3, ops="*", require_boxed=False)
    obs, info = env.reset(seed=5)
    expression = obs[-1]["content"].split("Compute ")[1].split(".")[0]
    call = json.dumps({"name": "python", "arguments": {"code": f"r = {expression}\nprint(r)"}})
    obs, reward, term, trunc, info = env.step(f"<tool_call>{call}</tool_call>")
    assert obs[-1]["role"] == "tool" and (reward, term, trunc) == (0.0, False, False)
    obs, reward, term, trunc, info = env.step("<tool_call>" + json.dumps({"name": "python", "arguments": {"code": "r"}})
                                              + "</tool_call>")
    result = obs[-1]["content"]
    assert result == str(eval(expression))  # the second call saw the first one's variable
    _, reward, term, trunc, info = env.step(f"So the product is \\boxed{{{result}}}.")
    assert (reward, term, trunc, info["tool_calls"], info["ended_by"]) == (1.0, True, False, 2, "answer")
    env.close()


def test_tool_math_mixed_demos_follow_the_task_index(tool):
    env = gym.make("rlvr/ToolMath-v0", tasks="arithmetic", digits=3, ops="*", demos=[0, 2]).unwrapped
    roles = {i: [m["role"] for m in env.reset(options={"index": i})[0]] for i in range(4)}
    assert roles[0] == roles[2] == ["system", "user"]  # even index: demos[0] = 0 worked examples
    assert roles[1] == roles[3] == ["system"] + ["user", "assistant", "tool", "assistant"] * 2 + ["user"]
    first, _ = env.reset(seed=7)
    again, _ = env.reset(seed=7)
    assert first == again  # a GRPO group (one seed) shares its scaffold
    for bad in ([], [3], 1.5, [0, True]):
        with pytest.raises(ValueError, match="demos"):
            gym.make("rlvr/ToolMath-v0", tasks="arithmetic", demos=bad)
    env.close()


def test_tool_math_with_code_blocks_end_to_end(tool):
    env = gym.make("rlvr/ToolMath-v0", tasks="arithmetic", digits=3, ops="*", require_boxed=False, parser="code",
                   demos=1)
    obs, _ = env.reset(seed=5)
    assert obs[2] == {"role": "assistant", "content": "```python\nprint(9876 - 1234 + 55)\n```"}  # the demo's format
    expression = obs[-1]["content"].split("Compute ")[1].split(".")[0]
    obs, reward, term, trunc, info = env.step(f"Let me run it.\n```python\nprint({expression})\n```")
    assert obs[-1] == {"role": "tool", "content": str(eval(expression))} and (reward, term) == (0.0, False)
    _, reward, term, _, info = env.step(f"The product is {eval(expression)}.")
    assert (reward, term, info["tool_calls"], info["ended_by"]) == (1.0, True, 1, "answer")
    with pytest.raises(ValueError, match="parser"):
        gym.make("rlvr/ToolMath-v0", tasks="arithmetic", parser="xml")
    env.close()
