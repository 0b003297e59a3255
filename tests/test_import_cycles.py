"""No import cycles among rlvr's modules, counting the imports inside functions.

An import inside a function hides a cycle from Python at import time, not from the reader: two
modules that import each other are one idea split in two, or a dependency pointing the wrong way.
This test reads every import statement of every module of the installed packages (wherever it sits
in the file) and fails on any strongly connected group of modules, listing each one.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# the package each folder installs as (pyproject.toml's package-dir)
PACKAGES = {"rlvr": "rlvr", "verifiers": "rlvr.verifiers", "sandbox": "rlvr.sandbox", "envs": "rlvr.envs",
            "trainer": "rlvr.trainer", "data": "rlvr.data", "rlvr_env": "rlvr_env"}


def modules() -> dict[str, tuple[Path, bool]]:
    """Every project module: name -> (file, is a package)."""
    found = {}
    for folder, package in PACKAGES.items():
        for path in sorted((ROOT / folder).rglob("*.py")):
            parts = path.relative_to(ROOT / folder).with_suffix("").parts
            if not all(part.isidentifier() for part in parts):
                continue
            is_package = parts[-1] == "__init__"
            name = ".".join([package, *(parts[:-1] if is_package else parts)])
            found[name] = (path, is_package)
    return found


def imported(path: Path, module: str, is_package: bool, known: set[str]) -> set[str]:
    """The project modules an import statement of `path` names, wherever the statement sits."""
    names = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = module.split(".")
                parts = parts[:len(parts) - node.level + (1 if is_package else 0)]
                base = ".".join(parts + ([base] if base else []))
            for alias in node.names:  # `from pkg import submodule` names the submodule, else pkg itself
                names.add(f"{base}.{alias.name}" if f"{base}.{alias.name}" in known else base)
    return {name for name in names if name in known and name != module}


def graph() -> dict[str, set[str]]:
    found = modules()
    known = set(found)
    return {name: imported(path, name, is_package, known) for name, (path, is_package) in found.items()}


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected groups of more than one module (Tarjan), each sorted, largest first."""
    index, low, stack, on_stack, out = {}, {}, [], set(), []
    sys.setrecursionlimit(max(10_000, sys.getrecursionlimit()))

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in edges.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                group.append(w)
                if w == v:
                    break
            if len(group) > 1:
                out.append(sorted(group))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return sorted(out, key=lambda g: (-len(g), g))


def test_the_cycle_finder_finds_a_cycle_through_a_lazy_import(tmp_path):
    (tmp_path / "a.py").write_text("import b\n")
    (tmp_path / "b.py").write_text("def f():\n    from a import x\n")
    (tmp_path / "c.py").write_text("import a\n")
    known = {"a", "b", "c"}
    edges = {name: imported(tmp_path / f"{name}.py", name, False, known) for name in known}
    assert cycles(edges) == [["a", "b"]]


def test_the_graph_reads_lazy_and_relative_imports():
    edges = graph()
    assert "rlvr.trainer.grpo" in edges and "rlvr.envs" in edges and "rlvr.verifiers.core" in edges
    assert "rlvr.trainer.loss" in edges["rlvr.trainer.grpo"]


def test_no_import_cycles():
    found = cycles(graph())
    assert not found, "import cycles:\n" + "\n".join(" <-> ".join(group) for group in found)
