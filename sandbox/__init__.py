"""Untrusted code run against unit tests, isolated in Docker.

`SandboxPool(backend="docker", size=None, image=None, limits=None)` keeps warm containers
that each run the trusted job server (`harness.py`); `pool.run(Job(...)) -> Result` and
`pool.run_batch(jobs) -> list[Result]`. `get_pool(...)` shares one pool per configuration
and process. `rlvr sandbox build|check` makes and checks the image. Importing this package
is light: the Docker SDK loads only when a pool starts.
"""

from rlvr.sandbox.protocol import STATUSES, Job, Limits, Result

__all__ = ["STATUSES", "Job", "Limits", "Result", "SandboxPool", "SandboxUnavailable", "get_pool"]


def __getattr__(name):
    if name in ("SandboxPool", "SandboxUnavailable", "get_pool"):
        from rlvr.sandbox import pool

        return getattr(pool, name)
    raise AttributeError(f"module 'rlvr.sandbox' has no attribute {name!r}")
