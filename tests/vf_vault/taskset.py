import json
import random

import verifiers.v1 as vf

from vf_vault.servers.tool import VaultToolset


class VaultData(vf.TaskData):
    locker: int
    code: str


class VaultTaskConfig(vf.TaskConfig):
    tools: vf.ToolsetConfig = vf.ToolsetConfig()


class VaultTask(vf.Task[VaultData, vf.State, VaultTaskConfig]):
    """The reward reads the whole trace: the final answer, and whether a call opened the right locker."""

    @classmethod
    def toolsets(cls, config: VaultTaskConfig) -> list[vf.Toolset]:
        return [VaultToolset(config.tools)]

    @vf.reward(weight=0.75)
    async def correct(self, trace: vf.Trace) -> float:
        return float(vf.verify_boxed_math_answer(trace.last_reply, self.data.code))

    @vf.reward(weight=0.25)
    async def looked_up(self, trace: vf.Trace) -> float:
        """1 when the model called the tool on the task's locker and got the code back."""
        calls = {c.id: c for n in trace.nodes if n.message.role == "assistant" for c in n.message.tool_calls or []}
        for node in trace.nodes:
            message = node.message
            call = calls.get(message.tool_call_id) if message.role == "tool" else None
            if call and json.loads(call.arguments).get("number") == self.data.locker and self.data.code in str(
                    message.content):
                return 1.0
        return 0.0

    @vf.metric
    async def tool_calls(self, trace: vf.Trace) -> float:
        return float(sum(len(n.message.tool_calls or []) for n in trace.nodes if n.message.role == "assistant"))


class VaultConfig(vf.TasksetConfig):
    num_tasks: int = 8
    task: VaultTaskConfig = VaultTaskConfig()


class VaultTaskset(vf.Taskset[VaultTask, VaultConfig]):
    def load(self) -> list[VaultTask]:
        rng = random.Random(7)
        tasks = []
        for i in range(self.config.num_tasks):
            locker, code = rng.randint(1, 20), str(rng.randint(100000, 999999))
            data = VaultData(id=f"vault-{i}", locker=locker, code=code,
                             prompt=f"Open locker {locker} with the tool and tell me the code inside, in \\boxed{{}}.")
            tasks.append(VaultTask(data, self.config.task))
        return tasks
