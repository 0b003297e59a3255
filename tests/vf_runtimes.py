"""verifiers' subprocess runtimes in a folder of the test's own.

verifiers puts every runtime's work folder under `~/.cache/verifiers/runtimes/subprocess`, so two test
runs of one user on one machine see each other's runtimes there, and a check that the test left none
behind fails on the other run's. The fixture points HOME at a temporary folder for the processes the
test starts (tool servers and scoring workers read it when they import verifiers) and this process's
`SubprocessRuntime` at the same folder.
"""

from pathlib import Path

import pytest


@pytest.fixture
def runtimes(tmp_path, monkeypatch):
    """A function giving the runtime folders that exist now, all made by this test's envs."""
    import verifiers.v1.runtimes.subprocess as subprocess_runtime

    cache = tmp_path / "home" / ".cache" / "verifiers"
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setattr(subprocess_runtime, "CACHE_DIR", cache)
    folder = cache / "runtimes" / "subprocess"

    def now() -> set[Path]:
        return set(folder.iterdir()) if folder.exists() else set()

    now.folder = folder
    return now
