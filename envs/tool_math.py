"""Math with a `python` tool: the model may run code in the sandbox before it answers.

Any math task source (`tasks`: arithmetic, gsm8k, math500, linear, fractions), e.g. products
of two 3-digit numbers (`tasks="arithmetic", digits=3, ops="*"`), which a small model cannot
do in its head but can with one call. The final answer is scored by the source's verifier.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from rlvr.envs.base import env_factory
from rlvr.envs.catalog import MATH_SOURCES, _pick
from rlvr.envs.python_tool import PythonTool
from rlvr.envs.tasks import TaskSource
from rlvr.envs.tool_calls import CodeBlockParser, HermesParser
from rlvr.envs.tool_env import ToolEnv

# Worked examples (`demos=k` puts the first k before the task): what a call and an answer look like.
# They compute other things than the packaged tasks ask, so the model still has to write its own code.
# `demos=[0, 1]` mixes: task `index` gets `demos[index % len(demos)]`, so a GRPO group (one task) shares
# its count, a batch holds scaffolded and bare prompts, and an evaluation is reproducible.
DEMOS = (
    ("Compute 9876 - 1234 + 55. Give the result as an integer in \\boxed{}.", "print(9876 - 1234 + 55)", "8697"),
    ("What is 2 to the power 20? Give the result as an integer in \\boxed{}.", "print(2 ** 20)", "1048576"),
)
PARSERS = {"hermes": HermesParser, "code": CodeBlockParser}
TOOL_HINT = ("You may run Python with the python tool to compute exact results. When you know the answer, "
             "reply without a tool call and give the final answer in \\boxed{}.")


class ToolMathEnv(ToolEnv):
    """Math tasks with the `python` tool (sandboxed, notebook-like).

    `parser` may be named: "hermes" (`<tool_call>` JSON, the default) or "code" (```python blocks).
    """

    def __init__(self, source: TaskSource, *, timeout: float = 5.0, backend: str = "docker",
                 demos: int | Sequence[int] = 0, parser: Any = None, **options: Any):
        counts = list(demos) if isinstance(demos, (list, tuple)) else [demos]
        if not counts or not all(isinstance(k, int) and not isinstance(k, bool) and 0 <= k <= len(DEMOS)
                                 for k in counts):
            raise ValueError(f"demos must be an int in 0..{len(DEMOS)} or a non-empty list of them, got {demos!r}")
        if isinstance(parser, str):
            if parser not in PARSERS:
                raise ValueError(f"parser must be one of {sorted(PARSERS)} or a callable, got {parser!r}")
            parser = PARSERS[parser]()
        options.setdefault("system_prompt", TOOL_HINT)
        super().__init__(source, tools=[PythonTool(timeout=timeout, backend=backend)], parser=parser, **options)
        self.demos = counts

    def _prompt_messages(self, task):
        messages = super()._prompt_messages(task)
        shown = []
        write = getattr(self.parser, "format_call", HermesParser.format_call)
        for question, code, output in DEMOS[:self.demos[self._index % len(self.demos)]]:
            shown += [{"role": "user", "content": question},
                      {"role": "assistant", "content": write("python", {"code": code})},
                      {"role": "tool", "content": output},
                      {"role": "assistant", "content": f"\\boxed{{{output}}}"}]
        return messages[:-1] + shown + messages[-1:]


math_tools = env_factory(_pick(MATH_SOURCES), ToolMathEnv,
                         ("max_turns", "max_tool_calls", "max_tokens", "timeout", "tool_timeout", "backend", "parser",
                          "demos"))

__all__ = ["TOOL_HINT", "ToolMathEnv", "math_tools"]
