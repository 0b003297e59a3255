"""The packaged stdin/stdout problems: every one is solvable (our solutions pass in the sandbox)."""

from __future__ import annotations

import gymnasium as gym
import pytest
from gymnasium.utils.env_checker import check_env

import rlvr.envs  # noqa: F401
from rlvr.envs import score_groups
from rlvr.envs.tasks_stdio import StdioTasks

pytestmark = pytest.mark.docker

# Our reference programs for data/stdio_tasks.jsonl.
SOLUTIONS = {
    'stdio/sum_list': 'n = int(input())\nprint(sum(map(int, input().split()[:n])) if n else 0)',
    'stdio/reverse_words': "print(' '.join(reversed(input().split())))",
    'stdio/tri_pen': "n = int(input())\nfor i in range(1, n + 1):\n    print('TriPen' if i % 15 == 0 else 'Tri' if i % 3 == 0 else 'Pen' if i % 5 == 0 else i)",
    'stdio/distinct_words': 'print(len({w.lower() for w in input().split()}))',
    'stdio/gcd_list': 'import math\nn = int(input())\nxs = list(map(int, input().split()))\ng = 0\nfor x in xs: g = math.gcd(g, x)\nprint(g)',
    'stdio/transpose': "r, c = map(int, input().split())\nm = [input().split() for _ in range(r)]\nfor j in range(c):\n    print(' '.join(m[i][j] for i in range(r)))",
    'stdio/brackets': "pairs = {')': '(', ']': '[', '}': '{'}\nfor _ in range(int(input())):\n    stack, ok = [], True\n    for ch in input().strip():\n        if ch in '([{': stack.append(ch)\n        elif not stack or stack.pop() != pairs[ch]: ok = False; break\n    print('YES' if ok and not stack else 'NO')",
    'stdio/rle_decode': "import re\nprint(''.join(ch * int(k) for ch, k in re.findall(r'([a-z])(\\d+)', input())))",
    'stdio/second_smallest': "n = int(input())\nxs = sorted(set(map(int, input().split())))\nprint(xs[1] if len(xs) > 1 else 'NONE')",
    'stdio/count_primes': 'n = int(input())\nsieve = bytearray([1]) * (n + 1)\nsieve[:2] = bytes(min(2, n + 1))\nfor i in range(2, int(n ** 0.5) + 1):\n    if sieve[i]: sieve[i*i::i] = bytes(len(range(i*i, n + 1, i)))\nprint(sum(sieve))',
    'stdio/common_prefix': 'import os\nk = int(input())\nws = [input().strip() for _ in range(k)]\nprint(os.path.commonprefix(ws))',
    'stdio/roman': "v = {'I': 1, 'V': 5, 'X': 10, 'L': 50, 'C': 100, 'D': 500, 'M': 1000}\ns = input().strip()\ntotal = 0\nfor a, b in zip(s, s[1:] + ' '):\n    total += -v[a] if b != ' ' and v[a] < v[b] else v[a]\nprint(total)",
}


def fenced(code: str) -> str:
    return f"```python\n{code}\n```"


def test_the_set_is_complete_and_tiered():
    source = StdioTasks()
    assert source.size == len(SOLUTIONS) == 12
    assert {t.task_id for t in source.tasks} == set(SOLUTIONS)
    assert [StdioTasks(difficulty=d).size for d in (1, 2, 3)] == [4, 5, 3]
    for task in source.tasks:
        assert len(task.fields["io_tests"]) >= 3 and task.fields["io_tests"][0]["input"] in task.prompt
    with pytest.raises(ValueError, match="1..3"):
        StdioTasks(difficulty=4)


def test_every_problem_is_solved_by_its_reference_and_not_by_a_constant():
    envs = []
    for i in range(12):
        env = gym.make("rlvr/StdioCode-v0")
        env.reset(options={"index": i})
        envs.append(env)
    results = score_groups(envs, [[fenced(SOLUTIONS[e.unwrapped.task.task_id]), fenced("print(1)")] for e in envs])
    assert [row[0][0] for row in results] == [1.0] * 12
    assert all(row[1][0] < 1.0 and row[1][1]["score"]["reason"] == "tests_failed" for row in results)
    check_env(envs[0].unwrapped)


def test_feedback_shows_input_expected_and_actual_output():
    env = gym.make("rlvr/CodeFeedback-v0", tasks="stdio", difficulty=1)
    env.reset(options={"index": 0})
    first = env.unwrapped.task.fields["io_tests"][0]
    obs, reward, terminated, _, info = env.step(fenced("print('nope')"))
    assert not terminated and reward == 0.0
    feedback = obs[-1]["content"]
    assert first["input"].strip() in feedback and first["output"].strip() in feedback and "nope" in feedback
    _, reward, terminated, _, info = env.step(fenced(SOLUTIONS[env.unwrapped.task.task_id]))
    assert terminated and reward == 1.0 and info["turn_rewards"] == [0.0, 1.0]
