"""Shared test helpers."""

import os

import pytest
from llama_server import llama_server  # noqa: F401  (the real llama.cpp server, one per session)
from vf_runtimes import runtimes  # noqa: F401  (verifiers' runtimes in the test's own folder)

from rlvr.sandbox.pool import SandboxUnavailable


def require_docker(make):
    """Return `make()`; without a Docker engine skip with the reason, except under CI, where it must run."""
    try:
        return make()
    except SandboxUnavailable as exc:
        if os.environ.get("CI"):
            raise
        pytest.skip(f"Docker sandbox unavailable: {exc}")
