"""A verifiers (0.4) taskset laid out as `vf-init` scaffolds one, for the rlvr/Verifiers-v0 tests.

Sums of two small numbers. The reward is verifiers' own boxed-math check, or, with `judge_url`
set in the task config, a judge model asked over HTTP (an OpenAI-compatible server): the remote
rubric whose outage the tests cause. verifiers imports it by module name (`taskset="vf_sums"`).
"""

import random

import httpx
import verifiers.v1 as vf


class SumData(vf.TaskData):
    answer: str


class SumTaskConfig(vf.TaskConfig):
    judge_url: str | None = None
    """An OpenAI-compatible server (`.../v1/chat/completions`) that judges the reply."""
    judge_model: str = "smollm2"


class SumTask(vf.Task[SumData, vf.State, SumTaskConfig]):
    @vf.reward(weight=1.0)
    async def correct(self, trace: vf.Trace) -> float:
        if self.config.judge_url is None:
            return vf.verify_boxed_math_answer(trace.last_reply, self.data.answer)
        question = f"Is {trace.last_reply!r} the sum asked for in {self.data.prompt_text!r}? Answer yes or no."
        async with httpx.AsyncClient(timeout=60) as client:
            reply = await client.post(f"{self.config.judge_url}/v1/chat/completions", json={
                "model": self.config.judge_model, "max_tokens": 4, "temperature": 0,
                "messages": [{"role": "user", "content": question}]})
            reply.raise_for_status()
        return 1.0 if "yes" in reply.json()["choices"][0]["message"]["content"].lower() else 0.0

    @vf.metric
    async def reply_chars(self, trace: vf.Trace) -> float:
        return float(len(trace.last_reply))


class SumConfig(vf.TasksetConfig):
    num_tasks: int = 8
    task: SumTaskConfig = SumTaskConfig()


class SumTaskset(vf.Taskset[SumTask, SumConfig]):
    def load(self) -> list[SumTask]:
        rng = random.Random(0)
        tasks = []
        for i in range(self.config.num_tasks):
            a, b = rng.randint(1, 9), rng.randint(1, 9)
            data = SumData(id=f"sum-{i}", prompt=f"What is {a} + {b}? Put the answer in \\boxed{{}}.",
                           answer=str(a + b))
            tasks.append(SumTask(data, self.config.task))
        return tasks


def adder(prompts, n):
    """An `rlvr eval --policy`: for each prompt the right sum, then wrong ones (n completions)."""
    out = []
    for prompt in prompts:
        a, b = (int(x) for x in prompt[-1]["content"].split("What is ", 1)[1].split("?")[0].split(" + "))
        out.append([f"It is \\boxed{{{a + b + k}}}." for k in range(n)])
    return out


__all__ = ["SumTaskset"]
