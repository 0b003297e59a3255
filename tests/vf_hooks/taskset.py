import verifiers.v1 as vf

from vf_hooks.counter import CounterToolset
from vf_hooks.nap import NapToolset
from vf_hooks.notes import NOTE, NotesToolset

FINAL = "final.txt"


class HooksData(vf.TaskData):
    word: str


class HooksState(vf.State):
    note: str = ""


class HooksTaskConfig(vf.TaskConfig):
    notes: bool = False
    """Give the task the `notes` toolset (reads the note `setup` wrote into the runtime)."""
    nap: bool = False
    """Give the task the slow `nap` toolset."""
    fail: str | None = None
    """"setup" or "finalize": that hook raises."""


class HooksTask(vf.Task[HooksData, HooksState, HooksTaskConfig]):
    """Full marks only when setup ran (state), finalize ran (a file) and the runtime reward could read it."""

    @classmethod
    def toolsets(cls, config: HooksTaskConfig) -> list[vf.Toolset]:
        return [NotesToolset(vf.ToolsetConfig(colocated=True))] * config.notes + [NapToolset(vf.ToolsetConfig())] * config.nap

    async def setup(self, trace: vf.Trace, runtime) -> None:
        if self.config.fail == "setup":
            raise RuntimeError("setup failed on purpose")
        await runtime.write(NOTE, self.data.word.encode())
        trace.state.note = self.data.word

    async def finalize(self, trace: vf.Trace, runtime) -> None:
        if self.config.fail == "finalize":
            raise RuntimeError("finalize failed on purpose")
        await runtime.write(FINAL, trace.last_reply.encode())

    @vf.reward(weight=0.25)
    async def prepared(self, trace: vf.Trace) -> float:
        return float(trace.state.note == self.data.word)

    @vf.reward(weight=0.75)
    async def answered(self, trace: vf.Trace, runtime) -> float:
        """Reads what finalize left in the runtime: skipped by verifiers when scored without one."""
        return float(self.data.word in (await runtime.read(FINAL)).decode())


class StoppingTask(HooksTask):
    @vf.stop
    async def enough(self, trace: vf.Trace) -> bool:
        return trace.num_turns >= 1


class HooksConfig(vf.TasksetConfig):
    num_tasks: int = 2
    shared: bool = False
    """Give the taskset the shared `counter` toolset."""
    refuse: str | None = None
    """"container" (tasks with an image) or "stop" (tasks with a @vf.stop hook): tasks rlvr refuses."""
    task: HooksTaskConfig = HooksTaskConfig()


class HooksTaskset(vf.Taskset[HooksTask, HooksConfig]):
    @classmethod
    def toolsets(cls, config: HooksConfig) -> list[vf.Toolset]:
        return [CounterToolset(vf.ToolsetConfig())] if config.shared else []

    def load(self) -> list[HooksTask]:
        cls = StoppingTask if self.config.refuse == "stop" else HooksTask
        image = "python:3.11-slim" if self.config.refuse == "container" else None
        words = ["amber", "cobalt", "heron", "juniper", "saffron", "tundra"]
        return [cls(HooksData(id=f"hooks-{i}", word=f"{words[i % len(words)]}-{i}", image=image,
                              prompt="Read the note and say its word."), self.config.task)
                for i in range(self.config.num_tasks)]
