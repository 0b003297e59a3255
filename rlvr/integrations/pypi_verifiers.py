"""`import verifiers` means the PyPI package (verifiers 0.4), wherever Python runs.

The repository's `verifiers/` folder is the source of `rlvr.verifiers`. When Python runs from the
repository root, the root is on `sys.path` (`python -c`, `python - <<EOF`, a script there) and a
plain `import verifiers` finds that folder before the installed package: `verifiers.v1` is then
missing. `install()` puts a finder first on `sys.meta_path` that looks the top-level name `verifiers`
up on `sys.path` without the folders whose `verifiers` is rlvr's own (the installed rlvr's, or any
rlvr checkout's: a second clone run with the first one's environment), so the interop modules
(verifiers_env, verifiers_tools) import the installed package; a `verifiers` already imported from
rlvr's folder is forgotten first. Where the PyPI package is not installed, the import fails as before.
"""

from __future__ import annotations

import importlib.machinery
import importlib.util
import sys
from pathlib import Path

NAME = "verifiers"


def own_folder() -> Path | None:
    """The folder of rlvr's verifiers (`rlvr.verifiers`), whose name shadows the PyPI package."""
    spec = importlib.util.find_spec("rlvr.verifiers")
    return Path(spec.origin).resolve().parent if spec and spec.origin else None


def rlvr_checkout(entry: Path) -> bool:
    """Whether `entry` is the root of an rlvr source tree (a pyproject beside the rlvr package), whose
    `verifiers/` folder is rlvr's verifiers, not the PyPI package. (An installed rlvr has no pyproject
    in site-packages, where the PyPI package lives.)"""
    return (entry / "pyproject.toml").is_file() and (entry / "rlvr" / "__init__.py").is_file()


def rlvr_folder(folder: Path, own: Path) -> bool:
    """Whether `folder` (a resolved path) is rlvr's `verifiers/`: the installed rlvr's or a checkout's."""
    return folder == own or (folder.is_dir() and rlvr_checkout(folder.parent))


class PyPIVerifiersFinder:
    """Finds the top-level `verifiers` on `sys.path` leaving out the entries that hold an rlvr `verifiers/`."""

    def __init__(self, own: Path):
        self.own = own

    def find_spec(self, name, path=None, target=None):
        if name != NAME:
            return None
        entries = [entry for entry in sys.path if not rlvr_folder(Path(entry or ".").resolve() / NAME, self.own)]
        return importlib.machinery.PathFinder.find_spec(name, entries, target)


def install() -> None:
    """Make `import verifiers` find the PyPI package from now on (once per process)."""
    if any(isinstance(finder, PyPIVerifiersFinder) for finder in sys.meta_path):
        return
    own = own_folder()
    if own is None:
        return
    loaded = sys.modules.get(NAME)
    if loaded is not None and any(rlvr_folder(Path(p).resolve(), own) for p in getattr(loaded, "__path__", [])):
        for name in [n for n in sys.modules if n == NAME or n.startswith(NAME + ".")]:
            del sys.modules[name]
    sys.meta_path.insert(0, PyPIVerifiersFinder(own))
