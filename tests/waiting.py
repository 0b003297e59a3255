"""Test helpers for things that take time: a free TCP port, and polling until something holds."""

from __future__ import annotations

import socket
import time


def free_port() -> int:
    """A TCP port nothing listens on now on the loopback, as the OS picks it."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def wait_for(predicate, seconds: float, what: str, interval: float = 0.2):
    """`predicate()`'s first truthy value, polled every `interval` seconds; an AssertionError naming `what`
    when `seconds` pass without one."""
    deadline = time.monotonic() + seconds
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() >= deadline:
            raise AssertionError(f"timed out after {seconds:g}s waiting for {what}")
        time.sleep(interval)
