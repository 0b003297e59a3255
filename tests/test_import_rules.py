"""Dependencies point one way: verifiers know nothing of envs or the trainer, and never import torch.

Checked twice: by importing every module under `rlvr.verifiers` in a fresh interpreter and
looking at what got loaded, and by following every import statement a verifier module
writes (also those inside functions, which run later) through the rlvr modules it names.
"""

from __future__ import annotations

import ast
import importlib.util
import json
import subprocess
import sys
from pathlib import Path

FORBIDDEN = ("rlvr.envs", "rlvr.trainer", "torch")

WALK = """
import importlib, json, pkgutil, sys
import rlvr.verifiers as package
names = [package.__name__] + [m.name for m in pkgutil.walk_packages(package.__path__, package.__name__ + ".")]
for name in names:
    importlib.import_module(name)
print(json.dumps({"imported": names, "loaded": sorted(sys.modules)}))
"""


def forbidden(name: str) -> bool:
    return any(name == f or name.startswith(f + ".") for f in FORBIDDEN)


def test_importing_every_verifier_loads_no_env_trainer_or_torch():
    done = subprocess.run([sys.executable, "-c", WALK], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    report = json.loads(done.stdout.splitlines()[-1])
    assert {"rlvr.verifiers.judge", "rlvr.verifiers.code", "rlvr.verifiers.math.grader"} <= set(report["imported"])
    assert [name for name in report["loaded"] if forbidden(name)] == []


def _imports(path: Path, module: str, is_package: bool) -> set[str]:
    """Every module an import statement in `path` names, wherever the statement sits."""
    names = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = module.split(".")[: len(module.split(".")) - node.level + (1 if is_package else 0)]
                base = ".".join(parts + ([base] if base else []))
            names.add(base)
            names.update(f"{base}.{alias.name}" for alias in node.names)  # `from pkg import submodule`
    return names


def _source(name: str) -> tuple[Path, bool] | None:
    try:
        spec = importlib.util.find_spec(name)
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.origin or not spec.origin.endswith(".py"):
        return None
    return Path(spec.origin), spec.submodule_search_locations is not None


def test_no_verifier_module_names_envs_or_trainer_even_lazily():
    import pkgutil

    import rlvr.verifiers as package

    start = [package.__name__] + [m.name for m in pkgutil.walk_packages(package.__path__, package.__name__ + ".")]
    seen = {name: [name] for name in start}  # module -> the chain of imports that reached it
    queue = list(start)
    reached = []
    while queue:
        name = queue.pop()
        found = _source(name)
        if found is None:
            continue
        for target in sorted(_imports(found[0], name, found[1])):
            if forbidden(target):
                reached.append(" -> ".join(seen[name] + [target]))
            elif target.startswith("rlvr") and target not in seen:
                seen[target] = seen[name] + [target]
                queue.append(target)
    assert reached == []
