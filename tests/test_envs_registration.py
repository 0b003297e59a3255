"""A task of the user's own, registered in a few lines; plugins; the curriculum."""

from __future__ import annotations

import re
import textwrap

import gymnasium as gym
import pytest
import sympy
from gymnasium.utils.env_checker import check_env

import rlvr
import rlvr.registry
from rlvr.cli import main
from rlvr.envs import Curriculum, CurriculumWrapper, score_groups
from rlvr.registry import RegistryError


@pytest.fixture
def forget():
    """Unregister the env ids a test adds."""
    added: list[str] = []
    yield added
    for env_id in added:
        gym.registry.pop(env_id, None)
        rlvr.registry._ENVS.pop(env_id, None)


def test_user_env_in_twenty_lines_end_to_end(forget, capsys):
    forget.append("acme/Capitals-v0")
    # --- what a user writes -------------------------------------------------------------
    from rlvr.verifiers import Score, Verifier, completion_text

    class OneWord(Verifier):
        """1 when the reply is exactly the reference word (case-insensitive)."""

        def score(self, completion, reference=None, **task_fields):
            words = completion_text(completion).strip().rstrip(".").split()
            if len(words) != 1:
                return Score(0.0, "no_answer", info={"why": "not one word"})
            return Score(1.0) if words[0].lower() == reference.lower() else Score(0.0, "wrong")

    capitals = [{"prompt": f"What is the capital of {c}?", "answer": a}
                for c, a in [("France", "Paris"), ("Peru", "Lima"), ("Kenya", "Nairobi")]]
    rlvr.register_env("acme/Capitals-v0", tasks=capitals, verifier=OneWord(), description="capital cities, one word",
                      kwargs={"system_prompt": "Answer with one word."})
    env = gym.make("acme/Capitals-v0")
    # --------------------------------------------------------------------------------------
    check_env(env.unwrapped)
    obs, info = env.reset(options={"index": 1})
    assert obs == [{"role": "system", "content": "Answer with one word."},
                   {"role": "user", "content": "What is the capital of Peru?"}]
    assert info["task_id"] == "custom/1" and "Lima" not in str(info)
    _, reward, terminated, _, info = env.step("lima.")
    assert reward == 1.0 and terminated and info["correct"]
    envs = [gym.make("acme/Capitals-v0") for _ in range(3)]
    for i, e in enumerate(envs):
        e.reset(options={"index": i})
    results = score_groups(envs, [["Paris", "Lyon"], ["It is Lima"], ["Nairobi"]])
    assert [[r for r, _ in row] for row in results] == [[1.0, 0.0], [0.0], [1.0]]
    assert results[1][0][1]["score"]["reason"] == "no_answer"
    assert main(["list"]) == 0 and "capital cities, one word" in capsys.readouterr().out
    with pytest.raises(RegistryError, match="already registered"):
        rlvr.register_env("acme/Capitals-v0", tasks=capitals, verifier=OneWord())


def squares_oracle(prompts, n):
    """A policy that squares the number in the prompt."""
    numbers = [int(re.search(r"What is (\d+)", p[-1]["content"]).group(1)) for p in prompts]
    return [["\\boxed{" + str(x * x) + "}"] * n for x in numbers]


def test_user_generator_with_difficulty_and_eval(forget, capsys):
    forget.append("acme/Squares-v0")
    from rlvr.envs import Generator

    class Squares(Generator):
        family = "squares"
        levels = range(1, 4)

        def make(self, rng):
            n = rng.randint(10 ** (self.difficulty - 1), 10**self.difficulty)
            return f"What is {n} squared?", str(n * n), {}

    rlvr.register_env("acme/Squares-v0", tasks=lambda **kw: Squares(**kw), description="squares")
    env = gym.make("acme/Squares-v0", difficulty=3, think=True)
    check_env(env.unwrapped)
    env.reset(seed=0)
    assert env.unwrapped.task.difficulty == 3 and env.unwrapped.reward.components.keys() == {"correct", "format"}

    assert main(["eval", "--env", "acme/Squares-v0", "--policy", "test_envs_registration:squares_oracle", "--limit", "5",
                 "--env-arg", "difficulty=2", "--json", "--no-progress"]) == 0
    assert '"pass@1": 1.0' in capsys.readouterr().out


def test_plugin_entry_point_registers_an_env(forget, tmp_path, monkeypatch):
    forget.append("acme/Plugin-v0")
    (tmp_path / "acme_rlvr_plugin.py").write_text(textwrap.dedent("""
        import rlvr

        def register():
            rlvr.register_env("acme/Plugin-v0", tasks=[{"prompt": "2+2?", "answer": "4"}],
                              description="a plugin task")
    """))
    dist = tmp_path / "acme_rlvr_plugin-0.1.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: acme-rlvr-plugin\nVersion: 0.1\n")
    (dist / "entry_points.txt").write_text("[rlvr.plugins]\nacme = acme_rlvr_plugin:register\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(rlvr.registry, "_plugins_loaded", False)
    env = rlvr.envs.make("acme/Plugin-v0")  # unknown to gymnasium until the plugins are loaded
    env.reset(seed=0)
    assert env.step("\\boxed{4}")[1] == 1.0
    assert rlvr.registry.list_envs()["acme/Plugin-v0"] == "a plugin task"


def test_register_env_rejects_bad_input(forget):
    with pytest.raises(ValueError, match="bad env id"):
        rlvr.register_env("not an id!", tasks=[{"prompt": "x", "answer": "1"}])
    with pytest.raises(ValueError, match="exactly one of"):
        rlvr.register_env("acme/Empty-v0")
    with pytest.raises(ValueError, match="at least one task"):
        rlvr.register_env("acme/Empty-v0", tasks=[])
    with pytest.raises(TypeError, match="tasks must be"):
        rlvr.register_env("acme/Empty-v0", tasks=42)
    forget.append("acme/Listed-v0")
    rlvr.register_env("acme/Listed-v0", tasks=[{"prompt": "x", "answer": "1"}])
    with pytest.raises(TypeError, match="unexpected keyword"):
        gym.make("acme/Listed-v0", split="test")


def _solve(prompt: list[dict]) -> str:
    return str(sympy.sympify(re.search(r"Compute (.+?)\. Give", prompt[-1]["content"]).group(1)))


def test_curriculum_raises_difficulty_as_accuracy_rises():
    env = CurriculumWrapper(gym.make("rlvr/Arithmetic-v0", digits=1), raise_at=0.75, window=4)
    levels = []
    for episode in range(12):
        obs, info = env.reset(seed=episode)
        levels.append(info["difficulty"])
        right = episode % 4 != 3  # 3 of 4 right: 0.75 accuracy
        _, _, _, _, info = env.step(f"\\boxed{{{_solve(obs)}}}" if right else "\\boxed{x}")
    assert levels == [1] * 4 + [2] * 4 + [3] * 4
    assert env.curriculum.history == [(4, 2), (8, 3), (12, 4)]
    assert len(re.search(r"Compute (\d+)", env.reset(seed=0)[0][-1]["content"]).group(1)) == 4


def test_curriculum_over_a_batch_of_envs_with_lowering():
    envs = [gym.make("rlvr/Countdown-v0", difficulty=3) for _ in range(4)]
    curriculum = Curriculum(envs, raise_at=0.9, lower_at=0.25, window=8)
    for env in envs:
        env.reset(seed=0)
    results = score_groups(envs, [["\\boxed{0}"] * 2 for _ in envs])  # all wrong
    assert curriculum.record(info for row in results for _, info in row) == 2
    assert all(env.unwrapped.source.difficulty == 2 for env in envs)
    assert len(envs[0].reset(seed=0)[1]["task_id"]) > 0 and envs[0].unwrapped.task.difficulty == 2
    assert curriculum.record([True] * 8) == 3
    with pytest.raises(ValueError, match="no difficulty levels"):
        Curriculum(gym.make("rlvr/GSM8K-v0"))
    with pytest.raises(ValueError, match="lower_at < raise_at"):
        Curriculum(envs, raise_at=0.5, lower_at=0.6)
