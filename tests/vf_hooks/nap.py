import time

import verifiers.v1 as vf


class NapToolset(vf.Toolset[vf.ToolsetConfig]):
    TOOL_PREFIX = "slow"

    @vf.tool
    def nap(self, seconds: float) -> str:
        """Sleep this many seconds."""
        time.sleep(seconds)
        return "awake"


if __name__ == "__main__":
    NapToolset.run()
