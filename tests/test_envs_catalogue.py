"""The env catalogue: reasoning-gym's datasets as `rg/<dataset>-v0`, registered lazily and listed.

For every reasoning-gym env, on a sample of seeded items, the gold answer in a box scores
1 and a changed answer scores 0 (boxnet and rush hour carry no gold: they are solved here);
the curriculum levels are reasoning-gym's own.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections import deque
from importlib.metadata import version

import gymnasium as gym
import pytest
from reasoning_gym.factory import CURRICULA, DATASETS, create_curriculum

import rlvr.envs  # noqa: F401
from rlvr.cli import main
from rlvr.envs import Curriculum, CurriculumWrapper, score_groups
from rlvr.envs import tasks_reasoning_gym as rg
from rlvr.envs.tasks_reasoning_gym import ReasoningGymTasks, box_answer
from rlvr.registry import env_entries

RG_IDS = [rg.env_id(name) for name in rg.DATASETS]
NUMBER = re.compile(r"-?\d+(\.\d+)?")


def test_the_table_is_the_pinned_packages_registry():
    assert version("reasoning-gym") == rg.VERSION  # (the package's own __version__ string lags)
    assert set(rg.DATASETS) | set(rg.EXCLUDED) == set(DATASETS) and not set(rg.DATASETS) & set(rg.EXCLUDED)
    for name, (category, levels) in rg.DATASETS.items():
        dataset_cls, config_cls = DATASETS[name]
        assert dataset_cls.__module__.split(".")[1] == category, name
        assert name in CURRICULA or not levels, name
        if name not in CURRICULA:
            continue
        # the levels offered give valid configurations; reasoning-gym's other levels do not
        curriculum = create_curriculum(name)
        defined = max(len(a.levels) for a in curriculum.attributes.values())
        offered = [rg.global_level(name, k) for k in range(1, levels + 1)]
        size = rg.SIZES.get(name, rg.DEFAULT_SIZE)
        for level in range(defined):
            curriculum.set_global_level(level)
            config = curriculum.generate_configuration({"seed": 0, "size": size})
            try:
                valid = config.validate() is None if hasattr(config, "validate") else True
            except (AssertionError, ValueError):
                valid = False
            assert valid == (level in offered), (name, level)
        assert levels <= defined


def test_at_least_100_ids_each_with_a_family_and_a_description():
    entries = env_entries()
    assert len(entries) >= 100
    assert set(RG_IDS) <= {e.name for e in entries}
    assert all(e.family and e.family != "other" and len(e.description) > 10 for e in entries if e.name in RG_IDS)
    families = {e.family for e in entries}
    assert {"arithmetic", "algebra", "games", "logic", "code", "math"} <= families


def test_importing_the_catalogue_imports_nothing_heavy():
    code = ("import sys, rlvr.envs; from rlvr.registry import list_envs; n = len(list_envs()); "
            "print(n, [m for m in ('reasoning_gym', 'datasets', 'torch', 'sympy') if m in sys.modules])")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    count, heavy = out.stdout.split(" ", 1)
    assert int(count) >= 100 and heavy.strip() == "[]", out.stdout + out.stderr


BOARD = 6  # rush hour's board is 6 x 6


def solve_rush_hour(board: str) -> str:
    """A shortest move list for a reasoning-gym rush hour board (breadth-first search).

    reasoning-gym letters the pieces A, B, ... in the order of their labels (the board may skip
    a letter), the red car first; its exit is the right end of the third row."""
    cells: dict[str, list[int]] = {}
    for i, label in enumerate(board):
        if label not in "ox":
            cells.setdefault(label, []).append(i)
    labels = sorted(cells)
    strides = [cells[label][1] - cells[label][0] for label in labels]
    sizes = [len(cells[label]) for label in labels]
    walls = {i for i, label in enumerate(board) if label == "x"}
    start = tuple(cells[label][0] for label in labels)
    came: dict[tuple, tuple | None] = {start: None}
    queue = deque([start])
    while queue:
        state = queue.popleft()
        if state[0] == 2 * BOARD + BOARD - 2:
            moves = []
            while came[state] is not None:
                state, move = came[state]
                moves.append(move)
            return " ".join(reversed(moves))
        taken = set(walls)
        for head, stride, size in zip(state, strides, sizes):
            taken.update(head + k * stride for k in range(size))
        for piece, (head, stride, size) in enumerate(zip(state, strides, sizes)):
            for sign in (-1, 1):
                for steps in range(1, BOARD):
                    new = head + sign * steps * stride
                    lead = new if sign < 0 else new + (size - 1) * stride
                    if stride == 1 and not new // BOARD == lead // BOARD == head // BOARD:
                        break
                    if not 0 <= lead < BOARD * BOARD or lead in taken:
                        break
                    nxt = state[:piece] + (new,) + state[piece + 1:]
                    if nxt not in came:
                        came[nxt] = (state, f"{chr(ord('A') + piece)}{'+' if sign > 0 else '-'}{steps}")
                        queue.append(nxt)
    raise ValueError(f"no solution for {board}")


def solve_boxnet(state: dict[str, list[str]]) -> str:
    """A plan for a reasoning-gym boxnet field: each box walked to its colour's target, one move a step."""
    targets = {key: list(items) for key, items in state.items()}
    plan = []
    for key, items in state.items():
        for box in (item for item in items if item.startswith("box_")):
            target = "target_" + box[4:]
            goal = next(k for k, v in targets.items() if target in v)
            targets[goal].remove(target)
            (row, col), (to_row, to_col) = (map(float, k.split("_")) for k in (key, goal))
            while (row, col) != (to_row, to_col):
                step = ((row + (to_row > row) - (to_row < row), col) if row != to_row
                        else (row, col + (to_col > col) - (to_col < col)))
                plan.append({f"Agent[{row}, {col}]": f"move({box}, square[{step[0]}, {step[1]}])"})
                row, col = step
            plan.append({f"Agent[{row}, {col}]": f"move({box}, {target})"})
    return json.dumps(plan)


def solution(name: str, task) -> str | None:
    """The task's gold answer; for the two puzzles that carry none, a solution worked out here."""
    meta = task.fields["entry"]["metadata"]
    if name == "rush_hour":
        return solve_rush_hour(meta["board_config"])
    if name == "boxnet":
        return solve_boxnet(meta["initial_state"])
    return task.reference


def changed_answer(name: str, gold: str, others: list[str | None], entry: dict) -> str:
    """An answer that must be wrong, whatever else the puzzle accepts.

    A number moved (by one, or by half its size plus one for decimals, beyond any
    tolerance); for puzzles that accept any valid solution, a broken one: a colouring with a
    colour not offered, a queen moved into an occupied column, a conclusion about a variable
    the premises never mention, an expression one more than the target, a push plan one move short of the
    solver's, a shortest rush hour plan without its last move, a boxnet plan without its last match;
    else another item's different gold
    answer (another puzzle's solution, the other truth value); else the gold with a word added.
    """
    if NUMBER.fullmatch(gold.strip()):
        return str(int(gold) + 1) if "." not in gold else repr(float(gold) * 1.5 + 1)
    if name == "graph_color":
        return json.dumps({vertex: 0 for vertex in json.loads(gold)})
    if name == "n_queens":  # every column holds a queen, so moving the first row's one makes a clash
        rows = gold.split("\n")
        cells = rows[0].split(" ")
        q = cells.index("Q")
        cells[q], cells[(q + 1) % len(cells)] = cells[(q + 1) % len(cells)], cells[q]
        return "\n".join([" ".join(cells), *rows[1:]])
    if name == "propositional_logic":  # premises can be inconsistent (then anything follows): a foreign atom
        return f"({gold} ∧ Z)" if "Z" not in entry["metadata"]["variables"] else f"({gold} ∧ Y)"
    if name in ("puzzle24", "countdown"):
        return f"({gold}) + 1"
    if name == "sokoban":  # longer move strings may solve it too; one move short of the solver's does not
        return gold[:-1]
    if name == "rush_hour":
        return gold.rsplit(" ", 1)[0]
    if name == "boxnet":
        return json.dumps(json.loads(gold)[:-1])
    for other in others:
        if other is not None and other.strip() != gold.strip():
            return other
    return gold + " extra"


@pytest.mark.parametrize("name", list(rg.DATASETS))
def test_gold_scores_one_and_a_changed_answer_zero(name):
    env = gym.make(rg.env_id(name), seed=11)
    items = []
    for index in (0, 1, 2, 3):
        env.reset(options={"index": index})
        items.append(env.unwrapped.task)
    assert items[0].task_id == f"{name}/11/None/0" and items[0].family == name
    assert (items[0].reference is None) == (name in ("boxnet", "rush_hour"))  # these two carry no answer
    golds = [solution(name, t) for t in items]
    for k, (task, gold) in enumerate(zip(items[:3], golds)):
        env.reset(options={"index": k})
        _, reward, _, _, info = env.step(f"Working it out.\n\n{box_answer(gold)}")
        assert reward == 1.0 and info["correct"], (gold, info["score"])
        wrong = changed_answer(name, gold, golds[k + 1:] + golds[:k], task.fields["entry"])
        rows = env.unwrapped.score_group([box_answer(wrong), f"{box_answer(gold)} or {box_answer(wrong)}", gold])
        assert [r for r, _ in rows] == [0.0, 0.0, 0.0], (gold, wrong)
        assert rows[0][1]["score"]["reason"] in ("wrong", "parse_error")
        assert [i["score"]["reason"] for _, i in rows[1:]] == ["hedge", "no_answer"]
    if rg.DATASETS[name][1] and name != "sokoban":  # the first curriculum level too (sokoban's takes ~10 s an item)
        easy = gym.make(rg.env_id(name), seed=11, difficulty=1)
        easy.reset(options={"index": 0})
        task = easy.unwrapped.task
        assert task.difficulty == 1 and task.task_id == f"{name}/11/1/0"
        assert easy.step(box_answer(solution(name, task)))[1] == 1.0


def test_items_are_seeded_and_deterministic():
    def prompts(**kw):
        source = ReasoningGymTasks("chain_sum", **kw)
        return [source.get(i).prompt for i in range(5)]

    assert prompts(seed=1) == prompts(seed=1)
    assert prompts(seed=1) != prompts(seed=2)
    assert prompts(seed=1, difficulty=3) != prompts(seed=1, difficulty=1)
    env = gym.make("rg/chain_sum-v0", size=50)
    assert env.reset(seed=5) == env.reset(seed=5)
    assert env.unwrapped.source.size is None  # unbounded, like rlvr's generators: indices wrap around
    env.reset(options={"index": 7})
    first = env.unwrapped.task
    env.reset(options={"index": 57})
    assert env.unwrapped.task == first
    with pytest.raises(ValueError, match="1..11"):
        gym.make("rg/chain_sum-v0", difficulty=12)
    with pytest.raises(ValueError, match="no curriculum"):
        gym.make("rg/acre-v0", difficulty=1)


def _terms(prompt: str) -> int:
    return len(re.findall(r"\d+", prompt))


def test_curriculum_levels_drive_reasoning_gyms_curriculum():
    env = gym.make("rg/chain_sum-v0", difficulty=1, seed=0)
    low = [_terms(env.unwrapped.source.get(i).prompt) for i in range(20)]
    curriculum = Curriculum(env, raise_at=0.75, window=4)
    gold = []
    for i in range(4):
        env.reset(options={"index": i})
        gold.append(env.unwrapped.score_group([box_answer(env.unwrapped.task.reference)])[0][1])
    assert curriculum.record(gold) == 2 and env.unwrapped.source.difficulty == 2
    high = [_terms(env.unwrapped.source.get(i).prompt) for i in range(20)]
    assert max(low) < max(high)  # level 2 sets more terms than level 1
    wrapped = CurriculumWrapper(gym.make("rg/basic_arithmetic-v0", difficulty=1), raise_at=1.0, window=2)
    for seed in range(2):
        wrapped.reset(seed=seed)
        info = wrapped.step(box_answer(wrapped.unwrapped.task.reference))[4]
    assert info["level"] == 2 and wrapped.unwrapped.task.difficulty == 1


def test_score_groups_across_reasoning_gym_envs_share_one_verifier():
    envs = [gym.make("rg/gcd-v0"), gym.make("rg/word_sorting-v0"), gym.make("rg/gcd-v0", difficulty=2)]
    for env in envs:
        env.reset(seed=3)
    assert envs[0].unwrapped.reward is envs[1].unwrapped.reward is envs[2].unwrapped.reward
    results = score_groups(envs, [[box_answer(e.unwrapped.task.reference), "no box"] for e in envs])
    assert [[r for r, _ in row] for row in results] == [[1.0, 0.0]] * 3


def test_partial_credit_is_opt_in():
    from rlvr.envs.tasks_reasoning_gym import ReasoningGymVerifier

    source = ReasoningGymTasks("power_function", seed=0)  # reasoning-gym gives 0.01 to a wrong number
    task = source.get(0)
    wrong = box_answer(str(float(task.reference) * 3 + 7))
    assert ReasoningGymVerifier().score(wrong, task.reference, **task.fields).value == 0.0
    partial = ReasoningGymVerifier(partial=True).score(wrong, task.reference, **task.fields)
    assert 0 < partial.value < 1 and partial.reason == "wrong"
    bad = ReasoningGymVerifier().score("\\boxed{1}", None, entry={"question": "q"})
    assert bad.value == 0.0 and bad.reason == "bad_reference"


def test_puzzle24_answers_must_use_the_puzzles_numbers():
    from rlvr.envs.tasks_reasoning_gym import ReasoningGymVerifier

    source = ReasoningGymTasks("puzzle24", seed=0)
    for index in range(3):
        task = source.get(index)
        numbers = sorted(task.fields["entry"]["metadata"]["numbers"])
        foreign = next(e for e in ("4*6*1*1", "3*8*1*1") if sorted(map(int, re.findall(r"\d+", e))) != numbers)
        score = ReasoningGymVerifier().score(box_answer(foreign), task.reference, **task.fields)
        assert (score.value, score.reason, score.info["rg_score"]) == (0.0, "wrong", 1.0)  # reasoning-gym: 1
        assert ReasoningGymVerifier().score(box_answer(task.reference), task.reference, **task.fields).value == 1.0


def test_a_scorer_that_hangs_is_killed_with_reason_timeout():
    from rlvr.envs.tasks_reasoning_gym import ReasoningGymVerifier

    task = ReasoningGymTasks("simple_integration", seed=0).get(0)  # scored through sympy
    verifier = ReasoningGymVerifier(timeout=3)
    assert verifier.score(box_answer(task.reference), task.reference, **task.fields).value == 1.0
    gold, hang = box_answer(task.reference), "\\boxed{9**9**9**9}"
    scores = verifier.score_batch([gold, hang, gold], [task.reference] * 3, [task.fields] * 3)
    assert [(s.value, s.reason) for s in scores] == [(1.0, None), (0.0, "timeout"), (1.0, None)]  # a fresh worker


def test_braces_that_do_not_balance_are_escaped_in_the_box():
    source = ReasoningGymTasks("spell_backward", seed=0)  # scored by comparison with the entry's answer
    task = source.get(0)
    entry = {**task.fields["entry"], "answer": "a}, {b"}
    from rlvr.envs.tasks_reasoning_gym import ReasoningGymVerifier

    assert box_answer("a}, {b") == "\\boxed{a\\}, \\{b}"
    assert ReasoningGymVerifier().score(box_answer("a}, {b"), "a}, {b", entry=entry).value == 1.0


def test_rlvr_list_filters_counts_and_searches(capsys):
    assert main(["list", "--envs", "--family", "arithmetic"]) == 0
    out = capsys.readouterr().out
    assert "rg/basic_arithmetic-v0" in out and "rlvr/Arithmetic-v0" in out and "rg/sudoku-v0" not in out
    assert "verifiers:" not in out and out.startswith("envs: ")
    assert main(["list", "sudoku"]) == 0
    out = capsys.readouterr().out
    assert "rg/sudoku-v0" in out and "rg/mini_sudoku-v0" in out and "rg/chain_sum-v0" not in out
    assert main(["list", "--families", "--json"]) == 0
    counts = json.loads(capsys.readouterr().out)["families"]
    assert counts["algorithmic"] == sum(c == "algorithmic" for c, _ in rg.DATASETS.values())
    assert sum(counts.values()) == len(env_entries())
    assert main(["list", "--family", "nope"]) == 2
    assert "unknown env family 'nope'" in capsys.readouterr().err


def test_without_the_extra_list_and_make_say_how_to_install(monkeypatch, capsys):
    monkeypatch.setattr(rg, "available", lambda: False)
    assert main(["list", "--family", "games"]) == 0
    assert "rg/* envs need the optional extra: pip install 'rlvr[reasoning-gym]'" in capsys.readouterr().out
    with pytest.raises(LookupError, match=r"optional extra: pip install 'rlvr\[reasoning-gym\]'"):
        gym.make("rg/sudoku-v0")
