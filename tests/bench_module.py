"""Load a bench/ script as a module by its file, for tests of what it defines.

Not by putting bench/ on sys.path: its bench/math_verify.py would then shadow the math_verify
package for every test that runs later in the session.
"""

import importlib.util
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parents[1] / "bench"


def load(name: str):
    spec = importlib.util.spec_from_file_location(f"bench_{name}", BENCH / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while the file runs
    spec.loader.exec_module(module)
    return module
