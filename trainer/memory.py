"""Give freed heap memory back to the operating system.

glibc keeps memory freed by large short-lived objects (the de-quantized copy of a GGUF model,
the gradients of the previous step) in its heap, so the process's resident size stays at its
high-water mark. `malloc_trim(0)` returns it. A no-op where glibc is not the allocator.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools


@functools.cache
def _libc():
    name = ctypes.util.find_library("c")
    try:
        libc = ctypes.CDLL(name) if name else None
    except OSError:
        return None
    return libc if libc is not None and hasattr(libc, "malloc_trim") else None


def release_freed_memory() -> None:
    libc = _libc()
    if libc is not None:
        libc.malloc_trim(0)
