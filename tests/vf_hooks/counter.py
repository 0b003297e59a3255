import os

import verifiers.v1 as vf


class CounterToolset(vf.Toolset[vf.ToolsetConfig]):
    """Taskset-scoped: one server for every episode, so its count goes on across them."""

    TOOL_PREFIX = "shared"
    calls = 0

    @vf.tool
    def count(self) -> str:
        """Count this call."""
        CounterToolset.calls += 1
        return f"call {CounterToolset.calls} on server {os.getpid()}"


if __name__ == "__main__":
    CounterToolset.run()
