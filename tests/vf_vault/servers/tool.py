import verifiers.v1 as vf


class VaultToolset(vf.Toolset[vf.ToolsetConfig]):
    TOOL_PREFIX = "vault"

    async def setup_task(self, task) -> None:  # verifiers hands over the rollout's task data
        self.locker, self.code = task.locker, task.code

    @vf.tool
    def open_locker(self, number: int) -> str:
        """Open the locker with this number and read what is inside."""
        return f"Locker {number} holds the code {self.code}." if number == self.locker else f"Locker {number} is empty."


if __name__ == "__main__":
    VaultToolset.run()
