"""`rlvr eval --policy` helpers for the vault taskset: scripted turns, one per call (multi-turn envs)."""

import json
import re


def locksmith(conversations, n):
    """Opens the locker the task names with the tool, then answers with the code the tool returned."""
    out = []
    for messages in conversations:
        last = messages[-1]
        if last["role"] == "tool":
            code = re.search(r"the code (\d+)", last["content"])
            out.append([f"The code is \\boxed{{{code.group(1) if code else 0}}}."] * n)
        else:
            locker = int(re.search(r"Open locker (\d+)", last["content"]).group(1))
            call = {"name": "vault_open_locker", "arguments": {"number": locker}}
            out.append([f"<tool_call>{json.dumps(call)}</tool_call>"] * n)
    return out
