"""What a test needs from outside rlvr: an optional package, or a file under ../shared.

Without it, a test skips on a developer's machine. Under CI (`CI` set) it fails instead: CI installs
every extra (`make install`) and always has ../shared, so a dependency that drops out of the install or
a data file that moves must turn tests red, not into skips nobody reads.
"""

from __future__ import annotations

import importlib
import os

import pytest

CI = bool(os.environ.get("CI"))


def module(name: str, reason: str | None = None):
    """The imported module `name`: `pytest.importorskip`, except under CI, where a missing one fails."""
    return importlib.import_module(name) if CI else pytest.importorskip(name, reason=reason)


def skip(reason: str) -> None:
    """Skip for a missing dependency or file; under CI, fail with the same reason."""
    if CI:
        pytest.fail(f"under CI this must be present: {reason}")
    pytest.skip(reason)


def skip_unless(present: bool, reason: str):
    """A `skipif` mark that never skips under CI (the test then fails on what is missing)."""
    return pytest.mark.skipif(not present and not CI, reason=reason)
