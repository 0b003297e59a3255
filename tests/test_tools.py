"""Tools in envs: schemas from signatures, the tool-call parser, the tool env's errors and limits."""

import subprocess
import sys
import textwrap
import threading
from typing import Literal

import gymnasium as gym
import pytest

from rlvr.envs import ListTasks, tool_env
from rlvr.envs.python_tool import clip
from rlvr.envs.tool_calls import CallError, CodeBlockParser, HermesParser, ToolCall, ends_with_call
from rlvr.envs.tool_env import ToolEnv
from rlvr.envs.tools import ToolUnavailable, render_chat, template_takes_tools, tool_schema, with_tool_prompt


def lookup(city: str, year: int = 2020, metric: bool | None = None, unit: Literal["C", "F"] = "C") -> str:
    """Look up the weather of a city.

    Args:
        city: the city's name,
            in English.
        year: which year.
    """
    return f"{city} {year}"


def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


def test_schema_from_signature_and_docstring():
    fn = tool_schema(lookup)["function"]
    assert fn["name"] == "lookup" and fn["description"] == "Look up the weather of a city."
    props = fn["parameters"]["properties"]
    assert props["city"] == {"type": "string", "description": "the city's name, in English."}
    assert props["year"] == {"type": "integer", "description": "which year."}
    assert props["metric"] == {"type": "boolean"}
    assert props["unit"] == {"type": "string", "enum": ["C", "F"]}
    assert fn["parameters"]["required"] == ["city"]


def test_schema_refuses_what_a_model_cannot_be_told():
    def nodoc(x: int) -> int:
        return x

    def star(*args: int) -> int:
        """Varargs."""

    with pytest.raises(ValueError, match="docstring"):
        tool_schema(nodoc)
    with pytest.raises(TypeError, match=r"\*args"):
        tool_schema(star)
    with pytest.raises(TypeError, match="callable"):
        tool_schema(42)


def test_parser_reads_calls_and_skips_think():
    parse = HermesParser()
    text = ('<think>maybe <tool_call>{"name": "add", "arguments": {"a": 9, "b": 9}}</tool_call></think>'
            'Sure. <tool_call>{"name": "add", "arguments": {"a": 1, "b": 2}}</tool_call>'
            '<tool_call>{"name": "add", "arguments": "{\\"a\\": 3, \\"b\\": 4}"}</tool_call>')
    assert parse(text).calls == [ToolCall("add", {"a": 1, "b": 2}), ToolCall("add", {"a": 3, "b": 4})]
    assert not parse("The answer is 3.").attempted
    assert not parse("<think><tool_call>{}</tool_call></think> 3").attempted  # only thought about it
    assert ends_with_call('x <tool_call>{"name": "add"}</tool_call>\n')
    assert not ends_with_call("<think>x <tool_call>{}</tool_call>")


@pytest.mark.parametrize("text", [
    "<tool_call>{not json}</tool_call>",
    "<tool_call>[1, 2]</tool_call>",
    '<tool_call>{"arguments": {}}</tool_call>',
    '<tool_call>{"name": "add", "arguments": [1, 2]}</tool_call>',
    '<tool_call>{"name": "add", "arguments": {"a": 1}',
    '</tool_call>{"name": "add"}',
    '<tool_call><tool_call>{"name": "add", "arguments": {"a": 1, "b": 2}}</tool_call></tool_call>',
    '<tool_call>{"name": "add", "arguments": {"a": "' + "9" * 50_000 + '"}}</tool_call>',
    "<tool_call>" + "[" * 100_000 + "</tool_call>",
])
def test_parser_turns_bad_calls_into_errors(text):
    parsed = HermesParser()(text)
    assert parsed.attempted
    assert all(isinstance(c, CallError) and c.kind == "malformed" for c in parsed.calls)
    assert not any(isinstance(c, ToolCall) for c in parsed.calls)  # nested: the inner call does not run


def test_code_block_parser_runs_python_fences_only():
    parse = CodeBlockParser()
    text = ("<think>```python\nprint('thought')\n```</think>Let me compute.\n```python\nx = 3 * 4\nprint(x)\n```\n"
            "and ```\nprint(x + 1)\n``` then ```print(2)```")
    assert parse(text).calls == [ToolCall("python", {"code": "x = 3 * 4\nprint(x)\n"}),
                                 ToolCall("python", {"code": "print(x + 1)\n"}), ToolCall("python", {"code": "print(2)"})]
    assert not parse("The product is \\boxed{12}.").attempted
    assert not parse("<think>```python\n1\n```</think> 12").attempted  # only thought about it
    for bad in ("```javascript\nconsole.log(1)\n```", "```python\nprint(1)\n", "ok\n```py\n" + "1" * 30_000 + "\n```"):
        calls = parse(bad).calls
        assert calls and all(isinstance(c, CallError) and c.kind == "malformed" for c in calls), bad
    # a closed block, then one left open: the first runs, the second is an error
    assert [type(c) for c in parse("```python\n1\n``` and ```python\n2").calls] == [ToolCall, CallError]
    assert parse.call_ended("```python\nprint(1)\n```\n") and not parse.call_ended("```python\nprint(1)")
    assert not parse.call_ended("```python") and not parse.call_ended("<think>```python\n1\n```")
    assert parse.format_call("python", {"code": "print(1)"}) == "```python\nprint(1)\n```"
    assert "```python" in parse.describe([])


def test_a_parser_that_describes_its_format_replaces_the_tools_block():
    from rlvr.trainer.models import load_tokenizer

    env = make_env(parser=CodeBlockParser(tool="add", argument="a"))
    assert env.tool_prompt == CodeBlockParser().describe([])
    shown = with_tool_prompt([{"role": "user", "content": "hi"}], env.tool_schemas, env.tool_prompt)
    assert shown[0] == {"role": "system", "content": env.tool_prompt}
    text = render_chat(load_tokenizer("smollm2"), [{"role": "user", "content": "hi"}], env.tool_schemas,
                       tool_prompt=env.tool_prompt)
    assert "```python block" in text and "<tools>" not in text and "<tool_call>" not in text
    assert make_env().tool_prompt is None  # Hermes: the schemas are shown


class Broken:
    name = "broken"

    def __call__(self, x: int) -> str:
        """Always down."""
        raise ToolUnavailable("sandbox down")


def make_env(**kw):
    tasks = ListTasks([{"prompt": "What is 2 + 3?", "answer": "5"}])
    return ToolEnv(tasks, tools=[add, Broken()], require_boxed=False, **kw)


def call(name, **args):
    import json

    return "<tool_call>" + json.dumps({"name": name, "arguments": args}) + "</tool_call>"


def test_episode_with_errors_counted_then_answer():
    env = make_env()
    _, info = env.reset(seed=0)
    assert [t["function"]["name"] for t in info["tools"]] == ["add", "broken"]
    obs, r, term, trunc, info = env.step(call("add", a=2, b=3) + call("nope") + call("add", a=1) + "<tool_call>{")
    assert (r, term, trunc) == (0.0, False, False)
    assert [m["content"] for m in obs[-4:]][0] == "5"
    assert all(m["role"] == "tool" and m["content"].startswith("Error:") for m in obs[-3:])
    assert info["tool_errors"] == {"unknown_tool": 1, "bad_arguments": 1, "malformed": 1} and info["tool_calls"] == 4
    assert env.observation_space.contains(obs)
    obs, r, term, trunc, info = env.step("It is 5.")
    assert (r, term, trunc, info["correct"], info["ended_by"], info["turn"]) == (1.0, True, False, True, "answer", 2)


@pytest.mark.parametrize("limits, turns, ended_by", [
    ({"max_turns": 2}, 2, "max_turns"),
    ({"max_tool_calls": 3}, 2, "max_tool_calls"),
    ({"max_tokens": 60}, 2, "max_tokens"),
])
def test_limits_end_the_episode_as_truncated(limits, turns, ended_by):
    env = make_env(**limits)
    env.reset(seed=0)
    for _ in range(10):
        _, r, term, trunc, info = env.step(call("add", a=1, b=1) + call("add", a=2, b=2))
        if term or trunc:
            break
    assert (info["turn"], term, trunc, r, info["ended_by"], info["correct"]) == (turns, False, True, 0.0, ended_by, False)
    with pytest.raises(gym.error.ResetNeeded):
        env.step("5")


def test_infrastructure_failure_is_an_error_not_a_wrong_answer():
    env = make_env()
    env.reset(seed=0)
    _, r, term, trunc, info = env.step(call("broken", x=1))
    assert (r, term, trunc, info["ended_by"], info["score"]["reason"]) == (0.0, False, True, "error", "error")


def test_tool_unavailable_lives_with_the_tool_machinery_and_keeps_its_old_path():
    from rlvr.envs import python_tool

    assert python_tool.ToolUnavailable is ToolUnavailable and ToolUnavailable.__module__ == "rlvr.envs.tools"


class Hang:
    """A tool that blocks until the test releases it."""

    name = "hang"

    def __init__(self):
        self.release = threading.Event()

    def __call__(self, x: int) -> str:
        """Wait for a release."""
        self.release.wait()
        return "late"


def boom(x: int) -> str:
    """Always refuses."""
    raise KeyError(x)


def step_in_thread(env, action, wait=60.0):
    """env.step(action), or None if it has not returned after `wait` seconds (the env blocked)."""
    out = []
    stepper = threading.Thread(target=lambda: out.append(env.step(action)), daemon=True)
    stepper.start()
    stepper.join(wait)
    return out[0] if out else None


def release_all(hang):
    hang.release.set()
    for thread in threading.enumerate():
        if thread.name.startswith("rlvr-tool-"):
            thread.join(10)


def test_a_tool_that_hangs_times_out_as_an_error_the_model_sees():
    hang = Hang()
    tasks = ListTasks([{"prompt": "What is 2 + 3?", "answer": "5"}])
    env = ToolEnv(tasks, tools=[add, hang, boom], tool_timeout=0.2, require_boxed=False)
    env.reset(seed=0)
    try:
        out = step_in_thread(env, call("hang", x=1) + call("boom", x=7) + call("add", a=2, b=3))
        assert out is not None, "the env waited for a tool that hangs"
        obs, r, term, trunc, info = out
        assert [m["content"] for m in obs[-3:]] == [
            "Error: hang did not finish within 0.2 seconds; the call was abandoned.",
            "Error: boom failed: KeyError: 7", "5"]
        assert (r, term, trunc, info["tool_calls"]) == (0.0, False, False, 3)
        assert info["tool_errors"] == {"timeout": 1, "tool_failed": 1}
    finally:
        release_all(hang)  # the abandoned call now returns "late": nobody reads it
    obs, r, term, trunc, info = env.step("It is 5.")
    assert (r, term, info["ended_by"]) == (1.0, True, "answer")
    assert "late" not in [m["content"] for m in obs]
    with pytest.raises(ValueError, match="tool_timeout"):
        ToolEnv(tasks, tools=[add], tool_timeout=0)
    assert ToolEnv(tasks, tools=[add]).tool_timeout == 60.0
    assert gym.make("rlvr/ToolMath-v0", tasks="arithmetic", tool_timeout=7).unwrapped.tool_timeout == 7.0


def test_calls_left_hanging_past_the_cap_end_the_episode_as_an_error(monkeypatch):
    monkeypatch.setattr(tool_env, "MAX_HUNG_CALLS", 1)
    hang = Hang()
    env = ToolEnv(ListTasks([{"prompt": "2 + 3?", "answer": "5"}]), tools=[hang], tool_timeout=0.1)
    env.reset(seed=0)
    try:
        first = step_in_thread(env, call("hang", x=1))
        assert first is not None and first[4]["tool_errors"] == {"timeout": 1} and not (first[2] or first[3])
        second = step_in_thread(env, call("hang", x=2))
        assert second is not None
        assert (second[3], second[4]["ended_by"], second[4]["score"]["reason"]) == (True, "error", "error")
    finally:
        release_all(hang)
    env.reset(seed=0)  # once the hung calls have returned, calls run again (the event is set: at once)
    obs, _, _, _, info = step_in_thread(env, call("hang", x=3))
    assert obs[-1]["content"] == "late" and info["tool_errors"] == {}


def test_an_abandoned_call_does_not_hold_up_the_interpreters_exit():
    program = textwrap.dedent("""
        import json, time
        from rlvr.envs import ListTasks
        from rlvr.envs.tool_env import ToolEnv

        def sleep(seconds: int) -> str:
            \"\"\"Sleep.\"\"\"
            time.sleep(seconds)
            return "awake"

        env = ToolEnv(ListTasks([{"prompt": "p", "answer": "1"}]), tools=[sleep], tool_timeout=0.2)
        env.reset(seed=0)
        call = {"name": "sleep", "arguments": {"seconds": 3600}}
        print(env.step("<tool_call>" + json.dumps(call) + "</tool_call>")[4]["tool_errors"])
    """)
    done = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and done.stdout.strip() == "{'timeout': 1}", done.stderr


def test_tools_are_advertised_by_template_or_system_prompt():
    from rlvr.trainer.models import load_tokenizer

    tok = load_tokenizer("smollm2")
    schemas = [tool_schema(add)]
    assert not template_takes_tools(tok)
    text = render_chat(tok, [{"role": "user", "content": "hi"}], schemas)
    assert '<tools>\n{"type": "function", "function": {"name": "add"' in text and "<tool_call>" in text
    assert with_tool_prompt([{"role": "system", "content": "S"}], schemas)[0]["content"].startswith("S\n\n")

    class Templated:  # a template that renders `tools` itself gets them as tools=
        chat_template = "{% for t in tools %}{{ t.function.name }}{% endfor %}"

        def apply_chat_template(self, messages, tools=None, **kw):
            return "tools:" + ",".join(t["function"]["name"] for t in tools)

    assert template_takes_tools(Templated()) and render_chat(Templated(), [], schemas) == "tools:add"


def test_long_output_is_clipped_with_a_marker():
    out = clip("a" * 500 + "b" * 5000 + "c" * 500, 1000)
    assert len(out) < 1100 and out.startswith("a") and out.endswith("c") and "characters cut" in out
    assert clip("short", 1000) == "short"


gym.register("test_tools/Add-v0", entry_point=lambda **kw: make_env(**kw))


def test_rlvr_eval_runs_whole_episodes():
    from rlvr.evaluation.passk import evaluate_pass_at_k

    def policy(prompts, n):
        assert n == 1 and all("<tools>" in p[0]["content"] for p in prompts)  # advertised in the system message
        return [[f"It is {p[-1]['content']}." if p[-1]["role"] == "tool" else call("add", a=2, b=3)] for p in prompts]

    result = evaluate_pass_at_k("test_tools/Add-v0", policy, n=2, ks=(1, 2), limit=1, batch_size=1, progress=False)
    assert (result.pass_at, result.turns_mean, result.tool_calls_mean) == ({1: 1.0, 2: 1.0}, 2.0, 1.0)


def test_rlvr_eval_scores_the_last_turn_of_a_self_check():
    from rlvr.evaluation.passk import evaluate_pass_at_k

    def policy(prompts, n):  # right at first, then talked out of it by the self-check
        return [["\\boxed{7}" if len(p) > 2 else f"\\boxed{{{eval(p[-1]['content'][8:].split('.')[0])}}}"]
                for p in prompts]

    result = evaluate_pass_at_k("rlvr/MathSelfCheck-v0", policy, limit=3, batch_size=2, progress=False,
                      env_kwargs={"tasks": "arithmetic", "digits": 2})
    assert result.turns_mean == 2.0 and result.pass_at[1] == 0.0
