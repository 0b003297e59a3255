"""The verifiers integration imports the PyPI `verifiers` package even where the repository's own
`verifiers/` folder (the source of `rlvr.verifiers`) would shadow it: Python run from the repository root."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import needs

import rlvr.integrations  # noqa: F401  (pytest puts the root on sys.path: from here on `verifiers` is PyPI's)

ROOT = Path(__file__).resolve().parent.parent

CODE = """
import gymnasium as gym, rlvr.envs
env = gym.make("rlvr/Verifiers-v0", limit=2)
messages, info = env.reset(seed=0)
import verifiers, verifiers.v1
print(type(env.unwrapped).__name__, "/verifiers/" in verifiers.__file__.replace("\\\\", "/"), verifiers.__file__)
"""


def test_rlvr_verifiers_env_from_the_repository_root():
    needs.module("verifiers.v1", "the interop extra (verifiers 0.4)")
    done = subprocess.run([sys.executable, "-"], input=CODE, cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    kind, _, where = done.stdout.split()[-3:]
    assert kind == "TaskEnv"
    assert not Path(where).resolve().is_relative_to(ROOT / "verifiers")  # the installed package, not the folder


def test_a_shadowing_verifiers_imported_first_is_replaced():
    needs.module("verifiers.v1", "the interop extra (verifiers 0.4)")
    code = ("import verifiers, sys; shadow = verifiers.__path__[0]\n"
            "import rlvr.integrations.verifiers_env as v\n"
            "import verifiers\n"
            "print(shadow, verifiers.__file__, v.vf.__name__)\n")
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    shadow, real, name = done.stdout.split()
    assert Path(shadow).resolve() == ROOT / "verifiers"  # from the root, `import verifiers` found the folder
    assert not Path(real).resolve().is_relative_to(ROOT / "verifiers") and name == "verifiers.v1"


def test_another_checkouts_folder_does_not_shadow_either(tmp_path, monkeypatch):
    """A second clone run with the first one's environment (its root on sys.path, rlvr installed from the
    first): its `verifiers/` is rlvr's too, not the PyPI package; a plain project's folder still counts."""
    needs.module("verifiers.v1", "the interop extra (verifiers 0.4)")
    from rlvr.integrations.pypi_verifiers import PyPIVerifiersFinder, own_folder

    clone, project = tmp_path / "clone", tmp_path / "project"
    for root in (clone, project):
        (root / "verifiers").mkdir(parents=True)
        (root / "verifiers" / "__init__.py").write_text("")
    (clone / "pyproject.toml").write_text('[project]\nname = "rlvr"\n')
    (clone / "rlvr").mkdir()
    (clone / "rlvr" / "__init__.py").write_text("")
    finder = PyPIVerifiersFinder(own_folder())
    monkeypatch.setattr(sys, "path", [str(clone), *sys.path])
    spec = finder.find_spec("verifiers")
    assert not Path(spec.origin).resolve().is_relative_to(clone) and (Path(spec.origin).parent / "v1").is_dir()
    monkeypatch.setattr(sys, "path", [str(project), *sys.path])
    assert Path(finder.find_spec("verifiers").origin).resolve().is_relative_to(project)
