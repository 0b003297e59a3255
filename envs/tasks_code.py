"""Function-writing tasks from templates, with unit tests generated from a reference.

Each template names a function, describes it, draws inputs, and computes the expected
outputs with its own reference implementation (trusted code of ours, run here when the
item is made; the model's code runs only in the sandbox). The tests are MBPP-style
`assert` lines, so the code verifier scores them like any MBPP task. Difficulty 1..3 picks
the template tier and widens the inputs.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from rlvr.envs.tasks import CODE_HINT, Generator

TESTS_PER_TASK = 5


@dataclass(frozen=True)
class Template:
    name: str
    signature: str
    description: str
    tier: int
    inputs: Callable[[random.Random, int], tuple]  # (rng, difficulty) -> positional arguments
    reference: Callable[..., Any]


def _ints(rng: random.Random, n: int, low: int = -20, high: int = 20) -> list[int]:
    return [rng.randint(low, high) for _ in range(n)]


def _word(rng: random.Random, length: int, alphabet: str = "abcdefghij") -> str:
    return "".join(rng.choice(alphabet) for _ in range(length))


def _second_largest(xs: list[int]) -> int | None:
    distinct = sorted(set(xs))
    return distinct[-2] if len(distinct) > 1 else None


def _run_length(s: str) -> str:
    out, i = [], 0
    while i < len(s):
        j = i
        while j < len(s) and s[j] == s[i]:
            j += 1
        out.append(f"{s[i]}{j - i}")
        i = j
    return "".join(out)


def _balanced(s: str) -> bool:
    pairs, stack = {")": "(", "]": "[", "}": "{"}, []
    for ch in s:
        if ch in "([{":
            stack.append(ch)
        elif ch in pairs:
            if not stack or stack.pop() != pairs[ch]:
                return False
    return not stack


def _caesar(s: str, k: int) -> str:
    return "".join(chr((ord(c) - 97 + k) % 26 + 97) if c.islower() else c for c in s)


def _prefix_max(xs: list[int]) -> list[int]:
    out: list[int] = []
    for x in xs:
        out.append(x if not out else max(out[-1], x))
    return out


def _digital_root(n: int) -> int:
    while n >= 10:
        n = sum(int(d) for d in str(n))
    return n


TEMPLATES = [
    Template("sum_multiples", "sum_multiples(n, k)",
             "returns the sum of the positive integers below `n` that are divisible by `k`", 1,
             lambda r, d: (r.randint(1, 30 * d**2), r.randint(1, 9)),
             lambda n, k: sum(i for i in range(1, n) if i % k == 0)),
    Template("count_vowels", "count_vowels(s)",
             "returns how many characters of the string `s` are vowels (a, e, i, o, u, either case)", 1,
             lambda r, d: (_word(r, r.randint(0, 8 * d), "abcdeiouxyzAEIOU "),),
             lambda s: sum(c in "aeiouAEIOU" for c in s)),
    Template("digital_root", "digital_root(n)",
             "returns the digital root of the non-negative integer `n` (sum its digits until one digit is left)", 1,
             lambda r, d: (r.randint(0, 10 ** (2 + 2 * d)),), _digital_root),
    Template("prefix_max", "prefix_max(xs)",
             "returns the list whose i-th item is the largest of `xs[0..i]`", 1,
             lambda r, d: (_ints(r, r.randint(0, 4 * d)),), _prefix_max),
    Template("second_largest", "second_largest(xs)",
             "returns the second largest distinct value in the list `xs`, or None if there is none", 2,
             lambda r, d: (_ints(r, r.randint(0, 4 * d), -5, 5),), _second_largest),
    Template("rotate_right", "rotate_right(xs, k)",
             "returns the list `xs` rotated right by `k` places (k >= 0 may exceed len(xs))", 2,
             lambda r, d: (_ints(r, r.randint(0, 4 * d)), r.randint(0, 10 * d)),
             lambda xs, k: xs[-(k % len(xs)):] + xs[:-(k % len(xs))] if xs and k % len(xs) else list(xs)),
    Template("run_length", "run_length(s)",
             "returns the run-length encoding of `s`: each run of a repeated character as the character "
             "followed by the run length, e.g. 'aaab' -> 'a3b1'", 2,
             lambda r, d: (_word(r, r.randint(0, 6 * d), "aab"),), _run_length),
    Template("caesar", "caesar(s, k)",
             "shifts every lowercase letter of `s` forward by `k` places in the alphabet (wrapping around "
             "after 'z') and leaves other characters unchanged", 2,
             lambda r, d: (_word(r, r.randint(0, 6 * d), "abxyz .!"), r.randint(0, 60)), _caesar),
    Template("is_balanced", "is_balanced(s)",
             "returns True if the brackets (), [] and {} in `s` are balanced and properly nested, else False", 3,
             lambda r, d: (_word(r, r.randint(0, 4 * d), "()[]{}a"),), _balanced),
    Template("count_pair_sums", "count_pair_sums(xs, target)",
             "returns the number of index pairs i < j with xs[i] + xs[j] == target", 3,
             lambda r, d: (_ints(r, r.randint(0, 5 * d), -6, 6), r.randint(-6, 6)),
             lambda xs, t: sum(xs[i] + xs[j] == t for i in range(len(xs)) for j in range(i + 1, len(xs)))),
    Template("longest_increasing_run", "longest_increasing_run(xs)",
             "returns the length of the longest run of consecutive strictly increasing items in `xs` "
             "(0 for an empty list)", 3,
             lambda r, d: (_ints(r, r.randint(0, 5 * d), 0, 9),),
             lambda xs: max((j - i for i in range(len(xs)) for j in range(i + 1, len(xs) + 1)
                             if all(xs[t] < xs[t + 1] for t in range(i, j - 1))), default=0)),
]


class CodeTasks(Generator):
    """Templated function-writing problems; difficulty 1..3 selects the template tier."""

    family = "codegen"
    levels = range(1, 4)
    system_hint = CODE_HINT

    def verifier_spec(self) -> tuple[str, dict[str, Any]]:
        return "code", {}

    def make(self, rng: random.Random) -> tuple[str, Any, dict[str, Any]]:
        template = rng.choice([t for t in TEMPLATES if t.tier == self.difficulty])
        tests, seen = [], set()
        for _ in range(TESTS_PER_TASK * 20):  # distinct inputs; templates with few inputs give fewer tests
            args = template.inputs(rng, self.difficulty)
            key = repr(args)
            if key in seen:
                continue
            seen.add(key)
            expected = template.reference(*args)
            tests.append(f"assert {template.name}({', '.join(map(repr, args))}) == {expected!r}")
            if len(tests) == TESTS_PER_TASK:
                break
        prompt = (f"Write a Python function `{template.signature}` that {template.description}.\n\n"
                  f"Your code should pass this test:\n{tests[0]}")
        return prompt, None, {"test_list": tests, "entry_point": template.name}
