"""`verifiers` (0.4, its v1 stack) and rlvr envs, both ways.

Out: `RlvrTaskset` is a verifiers Taskset over any rlvr env id. Its tasks are the env's prompts
(reset seeds `seed`..`seed+num_tasks-1`); their reward, `rlvr`, is the env's composite score of the
model's last reply, and the composite's components and the failure reason are recorded as metrics.
An rlvr `error` (the sandbox down) raises, so verifiers records an errored rollout, not a 0. A
tool env's tools are served to the model by `RlvrToolset`, an MCP tool server that verifiers starts
per rollout; the calls go through the env's own `step`, so its limits and error replies apply. This
module is the taskset id for `vf-eval`:

    vf-eval rlvr.integrations.verifiers_env --env.taskset.env-id rlvr/Arithmetic-v0 \\
        --env.taskset.env-kwargs '{"digits": 1}' --model M --client.base-url URL -n 4

In: `VerifiersTasks` is an rlvr task source over a verifiers taskset (loaded by id, as vf-eval
does) and `VerifiersRubric` its rewards as an rlvr verifier. Each completion is scored as a verifiers
rollout ends, in a worker process: on a subprocess runtime of its own (verifiers' `SubprocessRuntime`,
a work folder) the task's `setup` hook runs, the completion becomes a one-turn verifiers trace (with the
state `setup` left), `finalize` runs, then the task's own `score` with that runtime, so rewards that need
a runtime run too; the runtime is then stopped. The model never sees the runtime in a single-turn
taskset, so running `setup` at scoring time has the effect it has before the model's turn in vf-eval.
The total is the reward; each verifiers reward is a component. A reward or hook that raises (a judge
endpoint down) is an rlvr `error`, which the trainer leaves out. The env id is `rlvr/Verifiers-v0`
(`taskset=` the verifiers taskset id, `limit=`, `options=` its config); for tasks with toolsets (or a
taskset with shared toolsets) it is a tool env (`rlvr.integrations.verifiers_tools`) scored on the
whole trace. Refused at `gym.make`, with the reason: tasks that need a container (`NEEDS_CONTAINER`,
a task `image`), and `@vf.stop` / `@vf.intercept` hooks (they act on a verifiers harness's model
calls, which rlvr's loop does not make). The per-task stage timeouts (`task.data.timeout`) are not
applied: the rubric's batch limit bounds a hook or reward that hangs.
"""

from __future__ import annotations

import asyncio
import inspect
import json
import multiprocessing
import threading
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

import verifiers.v1 as vf
from pydantic import TypeAdapter
from verifiers.v1.errors import TaskError, boundary
from verifiers.v1.runtimes import SubprocessConfig, make_runtime
from verifiers.v1.runtimes.subprocess import SubprocessRuntime
from verifiers.v1.state import state_cls
from verifiers.v1.utils.decorators import discover_decorated, invoke

from rlvr.envs.tasks import Task, TaskSource
from rlvr.integrations.tool_bridge import call_tool
from rlvr.verifiers.core import ERROR, Score, Verifier, align_batch, completion_text

# --- out: an rlvr env as a verifiers taskset ------------------------------------------------------

_envs: dict[str, Any] = {}
_envs_lock = threading.Lock()


def _rlvr_env(env_id: str, env_kwargs: dict[str, Any]):
    """One unwrapped env per (id, options) and process, with the lock that guards its episode state."""
    key = json.dumps([env_id, env_kwargs], sort_keys=True, default=repr)
    with _envs_lock:
        if key not in _envs:
            import gymnasium

            import rlvr.envs  # noqa: F401  (registers the rlvr/* ids)

            _envs[key] = (gymnasium.make(env_id, **env_kwargs).unwrapped, threading.Lock())
        return _envs[key]


def score_reply(env_id: str, env_kwargs: dict[str, Any], seed: int, reply: str) -> Score:
    """The env's composite score of `reply` to the prompt of reset seed `seed` (also used by
    bench/interop.py to time this adapter)."""
    env, lock = _rlvr_env(env_id, env_kwargs)
    with lock:
        env.reset(seed=seed)
        reward, reference, fields = env.scoring_inputs()
    return reward.score(reply, reference, **fields)


class RlvrData(vf.TaskData):
    env_id: str
    env_kwargs: dict[str, Any] = {}
    seed: int


class RlvrToolsetConfig(vf.ToolsetConfig):
    env_id: str = ""
    env_kwargs: dict[str, Any] = {}


class RlvrState(vf.State):
    rlvr_score: dict[str, Any] | None = None
    """The env's own score when a tool call ended the episode (RepoFix-v0's `submit`), sent from the
    toolset's process over verifiers' state channel: such an episode is scored by it, not by the last reply."""


class RlvrToolset(vf.Toolset[RlvrToolsetConfig, RlvrState]):
    """The rlvr env's tools, for one rollout (verifiers runs this module as the server process)."""

    TOOL_PREFIX = None  # the tools keep their own names ("python"), as in rlvr

    def __init__(self, config: RlvrToolsetConfig):
        super().__init__(config)
        import gymnasium

        import rlvr.envs  # noqa: F401

        self.env = gymnasium.make(config.env_id, **config.env_kwargs)
        self._ended: str | None = None

    async def setup_task(self, data: RlvrData) -> None:  # verifiers hands over the task's data
        self.env.reset(seed=data.seed)

    def register(self, mcp) -> None:
        for name, (tool, schema) in self.env.unwrapped.tools.items():
            mcp.add_tool(self._with_state(_mcp_tool(self, name, tool)), name=name,
                         description=schema["function"]["description"])

    def call(self, name: str, arguments: dict[str, Any]) -> str:
        reply, ended = call_tool(self.env, name, arguments, self._ended)
        if ended is not None:
            self._ended = ended.get("ended_by", "answer")
            self.state.rlvr_score = ended["score"]
        return reply


def _mcp_tool(toolset: RlvrToolset, name: str, tool):
    """An async function with the tool's signature (the MCP server reads it) that calls through the env."""
    target = tool if inspect.isfunction(tool) or inspect.ismethod(tool) else tool.__call__
    signature = inspect.signature(target)

    async def call(**arguments: Any) -> str:
        return await asyncio.to_thread(toolset.call, name, arguments)

    call.__name__ = name
    call.__signature__ = signature.replace(return_annotation=str)
    call.__annotations__ = {**{p.name: p.annotation for p in signature.parameters.values()}, "return": str}
    return call


class RlvrTaskConfig(vf.TaskConfig):
    tools: RlvrToolsetConfig = RlvrToolsetConfig()
    """Filled in by the taskset for tool envs."""


class RlvrTask(vf.Task[RlvrData, RlvrState, RlvrTaskConfig]):
    """One prompt of an rlvr env, rewarded by the env's composite score."""

    @classmethod
    def toolsets(cls, config: RlvrTaskConfig) -> list[vf.Toolset]:
        return [RlvrToolset(config.tools)] if config.tools.env_id else []

    async def _score(self, trace: vf.Trace) -> Score:
        cache = self.__dict__.setdefault("_scores", {})
        ended = getattr(trace.state, "rlvr_score", None)
        if trace.id not in cache and ended is not None:  # a tool call ended the episode: the env scored it
            cache[trace.id] = Score(ended["score"], ended["reason"], ended["components"], ended["reasons"],
                                    ended["info"])
        if trace.id not in cache:
            data = self.data
            cache[trace.id] = await asyncio.to_thread(score_reply, data.env_id, data.env_kwargs, data.seed,
                                                      trace.last_reply)
        score = cache[trace.id]
        if score.reason == ERROR:
            raise RuntimeError(f"rlvr could not score this rollout (an infrastructure error): {score.info}")
        return score

    @vf.metric
    async def rlvr_breakdown(self, trace: vf.Trace) -> dict[str, float]:
        score = await self._score(trace)
        reason = {f"reason/{score.reason}": 1.0} if score.reason else {}
        return {**score.components, **reason}

    @vf.reward(weight=1.0)
    async def rlvr(self, trace: vf.Trace) -> float:
        return float((await self._score(trace)).value)


class RlvrTasksetConfig(vf.TasksetConfig):
    env_id: str = "rlvr/Arithmetic-v0"
    """The rlvr env id."""
    env_kwargs: dict[str, Any] = {}
    """Options for `gymnasium.make`."""
    num_tasks: int = 100
    seed: int = 0
    """Reset seed of the first task."""
    task: RlvrTaskConfig = RlvrTaskConfig()


class RlvrTaskset(vf.Taskset[RlvrTask, RlvrTasksetConfig]):
    """The prompts of an rlvr env (system message, then the task) as verifiers tasks."""

    def load(self) -> list[RlvrTask]:
        config = self.config
        env, lock = _rlvr_env(config.env_id, config.env_kwargs)
        task_config = config.task
        if getattr(env, "tools", None):
            task_config = task_config.model_copy(update={"tools": RlvrToolsetConfig(
                env_id=config.env_id, env_kwargs=config.env_kwargs)})
        tasks = []
        for seed in range(config.seed, config.seed + config.num_tasks):
            with lock:
                messages, info = env.reset(seed=seed)
            system = "\n\n".join(m["content"] for m in messages if m["role"] == "system") or None
            prompt = [m for m in messages if m["role"] != "system"]
            data = RlvrData(id=str(info["task_id"]), prompt=prompt, system_prompt=system,
                            env_id=config.env_id, env_kwargs=config.env_kwargs, seed=seed)
            tasks.append(RlvrTask(data, task_config))
        return tasks


# --- in: a verifiers taskset as an rlvr task source -----------------------------------------------

class VerifiersRubric(Verifier):
    """The verifiers tasks' own rewards as an rlvr verifier (task field `vf_index` picks the task).

    The rewards run in a worker process of their own, on its main thread and in its event loop, as
    in vf-eval: rlvr scores from worker threads, and a reward may need the main thread (verifiers'
    `verify_boxed_math_answer` times math-verify out with SIGALRM, and off the main thread scores 0).
    """

    name = "verifiers"
    timeout = 600.0  # seconds for a batch: past it, the batch is an infrastructure error

    def __init__(self, source: VerifiersTasks):
        self.spec = source.spec
        self.best = source.best
        self._pool: ProcessPoolExecutor | None = None
        self._lock = threading.Lock()

    def score(self, completion: Any, reference: Any = None, **fields: Any) -> Score:
        return self.score_batch([completion], [reference], [fields])[0]

    def score_batch(self, completions, references=None, task_fields=None) -> list[Score]:
        references, task_fields = align_batch(completions, references, task_fields)
        jobs = [(f["vf_index"], completion_text(c), f.get("vf_turns"), f.get("vf_tools"), f.get("vf_state"),
                 f.get("vf_runtime")) for c, f in zip(completions, task_fields)]
        try:
            with self._lock:
                if self._pool is None:
                    self._pool = ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn"))
                future = self._pool.submit(_score_in_worker, self.spec, jobs)
            results = future.result(timeout=self.timeout)
        except Exception as exc:  # the worker died or hung: no score is the model's
            with self._lock:
                self._pool = None
            results = [{"error": f"{type(exc).__name__}: {exc}"}] * len(jobs)
        return [self._score(r) for r in results]

    def _score(self, result: dict[str, Any]) -> Score:
        if "error" in result:  # the rubric failed (a judge down): not the model's doing
            return Score(0.0, ERROR, info={"error": result["error"][:500]})
        rewards, value = result["rewards"], result["reward"]
        return Score(value, None if value >= self.best else "wrong", components=rewards,
                     reasons={k: "wrong" for k, v in rewards.items() if v <= 0},
                     info={"rewards": rewards, "metrics": result["metrics"]})

    def __getstate__(self) -> dict[str, Any]:
        return {"spec": self.spec, "best": self.best}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state, _pool=None, _lock=threading.Lock())


_worker_tasks: dict[tuple, list] = {}


def _score_in_worker(spec: tuple, jobs: list[tuple]) -> list[dict[str, Any]]:
    """In the worker: each episode finished and scored as a verifiers rollout ends, concurrently in one loop."""
    if spec not in _worker_tasks:
        _worker_tasks[spec] = _load(*spec)[1]
    tasks = _worker_tasks[spec]

    async def one(index: int, reply: str, turns: list | None, tools: list | None, state: Any,
                  workdir: str | None) -> dict[str, Any]:
        task = tasks[index]
        try:
            trace = await _finish(task, reply, turns, tools, state, workdir)
        except Exception as exc:
            return {"error": f"{type(exc).__name__}: {exc}"}
        return {"reward": float(trace.reward), "metrics": dict(trace.metrics),
                "rewards": {k: r.score for k, r in trace.rewards.items() if r is not None}}

    async def run() -> list[dict[str, Any]]:
        return list(await asyncio.gather(*(one(*job) for job in jobs)))

    return asyncio.run(run())


async def _finish(task: vf.Task, reply: str, turns: list | None, tools: list | None, state: Any,
                  workdir: str | None) -> vf.Trace:
    """Setup (with no runtime of the episode's: a single-turn one), finalize and score, as `Rollout` runs them.

    A tool episode's runtime (`workdir`) is still up: its toolsets' servers ran there after its `setup`,
    and `state` is the trace state they left; it is the episode's to stop."""
    if workdir == "":
        raise RuntimeError("the episode's toolsets and runtime were down before it was scored")
    trace = _trace(task, reply, turns, tools, state)
    runtime = rollout_runtime(task, f"rlvr-{trace.id}") if workdir is None else _episode_runtime(task, workdir)
    try:
        if workdir is None:  # setup sees the prompt only: it runs before the model's turn in a rollout
            nodes, trace.nodes, trace.root_reply = trace.nodes, trace.nodes[:_prompt_length(task)], None
            await start_rollout(task, trace, runtime)
            trace.nodes, trace.root_reply = nodes, reply
        async with boundary(TaskError, "task finalize"):
            await invoke(task.finalize, {"trace": trace, "runtime": runtime})
        await task.score(trace, runtime)
    finally:
        if workdir is None:
            await runtime.stop()
    return trace


def rollout_runtime(task: vf.Task, name: str):
    """A subprocess runtime for one rollout of `task`, with the task's environment variables."""
    runtime = make_runtime(SubprocessConfig(), name=name)
    runtime.env = dict(task.runtime_env())
    return runtime


async def start_rollout(task: vf.Task, trace: vf.Trace, runtime) -> None:
    """Start the rollout's runtime and run the task's `setup` on it, as verifiers' `Rollout.open` does."""
    await runtime.start()
    await runtime.prepare_setup()
    async with boundary(TaskError, "task setup"):
        await invoke(task.setup, {"trace": trace, "runtime": runtime})


def _episode_runtime(task: vf.Task, workdir: str) -> SubprocessRuntime:
    """A view of a tool episode's subprocess runtime (its work folder), started and stopped by the episode."""
    runtime = SubprocessRuntime(SubprocessConfig(), name=Path(workdir).name)
    runtime.workdir, runtime.info.id = Path(workdir), workdir
    runtime.env = dict(task.runtime_env())
    return runtime


def _load(taskset: str, limit: int | None, options_json: str) -> tuple[vf.Taskset, list]:
    """The taskset (its first `limit` tasks) and those tasks."""
    from verifiers.v1.utils.loaders import taskset_config_type

    config = taskset_config_type(taskset).model_validate({**json.loads(options_json), "id": taskset})
    loaded = vf.load_taskset(config)
    if limit is not None:
        loaded = loaded.take(limit)
    elif not loaded.bounded:
        raise ValueError(f"verifiers taskset {taskset!r} is infinite: give limit=")
    return loaded, list(loaded)


def _refusal(task: vf.Task, hooks: bool = True) -> str | None:
    """Why rlvr cannot run this task as verifiers would (None: it can); `hooks`: look at its hooks too."""
    name = type(task).__name__
    if type(task).NEEDS_CONTAINER or task.data.image:
        return (f"task {name} needs a container (NEEDS_CONTAINER or an image): rlvr/Verifiers-v0 runs a task's "
                "setup, tools and rewards on verifiers' subprocess runtime only")
    if not hooks:
        return None
    for kind, found in (("stop", task.hooks("stop")), ("intercept", discover_decorated(task, "intercept"))):
        if found:
            return (f"task {name} has @vf.{kind} hook {found[0].__name__}: it acts on a verifiers harness's model "
                    "calls, which rlvr/Verifiers-v0 does not make, so it would never run")
    return None


class VerifiersTasks(TaskSource):
    """The first `limit` tasks of verifiers taskset `taskset` (its id; `options`: its config)."""

    family = "verifiers"
    system_hint = ""

    def __init__(self, taskset: str, limit: int | None = None, options: dict[str, Any] | None = None,
                 best: float = 1.0):
        self.spec = (taskset, limit, json.dumps(options or {}, sort_keys=True))
        loaded, self.tasks = _load(*self.spec)
        if not self.tasks:
            raise ValueError(f"verifiers taskset {taskset!r} has no tasks")
        classes: set[type] = set()
        for task in self.tasks:
            if (why := _refusal(task, type(task) not in classes)) is not None:
                raise ValueError(f"verifiers taskset {taskset!r}: {why}")
            classes.add(type(task))
        self.shared_toolsets = type(loaded).toolsets(loaded.config)
        """Taskset-scoped toolsets: started once per env, shared by its episodes."""
        self.size, self.best, self.name = len(self.tasks), best, taskset

    def get(self, index: int) -> Task:
        """The task's text (a system prompt of its own first) as the user message."""
        data = self.tasks[index].data
        prompt = "\n\n".join(text for text in (data.system_prompt, data.prompt_text) if text)
        return Task(task_id=f"{self.name}/{data.id or index}", prompt=prompt, fields={"vf_index": index},
                    family=self.family)

    def make_verifier(self, require_boxed: bool | None = None) -> Verifier:
        return VerifiersRubric(self)


def _trace(task: vf.Task, reply: str, turns: list[dict] | None = None, tools: list[dict] | None = None,
           state: Any = None) -> vf.Trace:
    """The task's prompt, then the episode's `turns` (verifiers messages as dicts: a tool env's turns and
    tool replies), or else `reply` as the model's one message; `tools` (their schemas) on the root node;
    `state` the episode's trace state (a fresh one by default)."""
    data = task.data
    messages: list[Any] = [vf.SystemMessage(content=data.system_prompt)] if data.system_prompt else []
    prompt = data.prompt if isinstance(data.prompt, list) else [vf.UserMessage(content=data.prompt or "")]
    messages += prompt
    nodes = [vf.MessageNode(parent=i - 1 if i else None, message=m) for i, m in enumerate(messages)]
    for message in _MESSAGES.validate_python(turns) if turns else [vf.AssistantMessage(content=reply)]:
        nodes.append(vf.MessageNode(parent=len(nodes) - 1 if nodes else None, message=message,
                                    sampled=message.role == "assistant"))
    listed = [vf.Tool(**schema["function"]) for schema in tools or []]
    if nodes and listed:
        nodes[0].tools = listed
    return vf.Trace(task=vf.TraceTask(type=type(task).__name__, data=data, key=task.key, hash=task.hash),
                    tools=listed, agent=vf.AgentInfo(config=vf.AgentConfig()), nodes=nodes, root_reply=reply,
                    state=state if state is not None else state_cls(type(task))())


def _prompt_length(task: vf.Task) -> int:
    data = task.data
    return bool(data.system_prompt) + (len(data.prompt) if isinstance(data.prompt, list) else 1)


_MESSAGES = TypeAdapter(vf.Messages)


__all__ = ["RlvrTaskset"]  # verifiers finds the taskset class here; the rest is imported by name

if __name__ == "__main__":  # verifiers starts the tool server as `python -m` this module
    RlvrToolset.run()
