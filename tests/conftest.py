"""Shared test helpers."""

import os

import pytest

from rlvr.sandbox.pool import SandboxUnavailable


def require_docker(make):
    """Return `make()`; without a Docker engine skip with the reason, except under CI, where it must run."""
    try:
        return make()
    except SandboxUnavailable as exc:
        if os.environ.get("CI"):
            raise
        pytest.skip(f"Docker sandbox unavailable: {exc}")
