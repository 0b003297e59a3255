"""The README's and docs' ```python examples run as written (each file's blocks in one namespace)."""

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
BLOCK = re.compile(r"^```python\n(.*?)^```", re.S | re.M)


def test_readme_has_python_examples():
    assert BLOCK.findall((ROOT / "README.md").read_text())


@pytest.mark.parametrize("path", DOCS, ids=lambda p: p.name)
def test_examples_run(path, monkeypatch):
    monkeypatch.chdir(ROOT)
    namespace: dict = {"__name__": f"docs_{path.stem}"}
    for i, block in enumerate(BLOCK.findall(path.read_text())):
        exec(compile(block, f"{path.name}[block {i}]", "exec"), namespace)
