"""A warm pool of sandbox workers: jobs in parallel, results in input order.

Each worker (a container, or a local subprocess when asked for) runs one job at a time.
A worker whose result says `tainted` (a memory kill, a crash, a killed job whose processes
could not be cleaned up at once, a verdict overdue) or that failed outright is retired and a
fresh one is started in the background, so the next job never shares a worker with whatever a
bad job left behind.
A job that hit a broken worker is retried once on another: infrastructure failures are
reported as `error` only when they persist, and never scored as a wrong answer.

At most `size` jobs run at once, but `spares` more workers are kept warm (default: as many
again): a container takes one to several seconds to start on a loaded machine, and a burst of
hostile jobs retires a worker per job, so without spares the next job waited that long for a
replacement and ran past its deadline (bench/hostile.py). Spares start in the background.

`get_pool(...)` keeps one pool per configuration and process, so verifiers can stay
small picklable objects; pools close their workers at interpreter exit.

Jobs in a language other than Python go to a second pool of the same size and limits on
the image with every toolchain (`image.image_tag(languages=True)`), started (and built if
missing) only when the first such job arrives, so Python-only users never pay for it.
"""

from __future__ import annotations

import atexit
import os
import queue
import threading
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor

from rlvr.sandbox import languages
from rlvr.sandbox.docker_backend import DockerWorker, VerdictOverdue, WorkerError, remove_stale_containers
from rlvr.sandbox.local_backend import LocalWorker
from rlvr.sandbox.protocol import Job, Limits, Result

BACKENDS = ("docker", "local")


def default_size() -> int:
    """Two workers per CPU (a job waits on pipes and the scheduler about half of its time),
    at most 32 containers."""
    return min(32, 2 * max(1, os.cpu_count() or 1))


class SandboxUnavailable(RuntimeError):
    """No worker can be started (no Docker engine, no image): says why in one line."""


class SandboxPool:
    """`size` warm workers of one backend; `run(job)` and `run_batch(jobs)` are thread-safe."""

    def __init__(self, backend: str = "docker", size: int | None = None, image: str | None = None,
                 limits: Limits | None = None, build: bool = True, spares: int | None = None):
        if backend not in BACKENDS:
            raise ValueError(f"unknown sandbox backend {backend!r}; choose one of {BACKENDS}")
        self.backend = backend
        self.size = int(size or default_size())
        if self.size < 1:
            raise ValueError("a sandbox pool needs at least one worker")
        self.spares = self.size if spares is None else int(spares)
        if self.spares < 0:
            raise ValueError("a sandbox pool's spares must be 0 or more")
        self._slots = threading.BoundedSemaphore(self.size)  # jobs running at once
        self.limits = limits or Limits()
        self._client = None
        self._build = build
        self._language_pool: SandboxPool | None = None
        self._language_problem: str | None = None
        self.image = image
        if backend == "docker":
            self._client, self.image = _docker_setup(image, build)
        self._idle: queue.LifoQueue = queue.LifoQueue()  # the last worker back serves next: spares wait
        self._workers: set = set()  # every worker not yet closed, busy or idle
        self._starters: list[threading.Thread] = []
        self._lock = threading.Lock()
        self._alive = 0  # workers started or starting
        self._closed = False
        self._last_start_error: str | None = None
        self._executor = ThreadPoolExecutor(max_workers=self.size, thread_name_prefix="rlvr-sandbox")
        with self._lock:
            self._alive = self.size + self.spares
        starters = [self._spawn(self._start_worker) for _ in range(self.size)]
        for _ in range(self.spares):  # not waited for: the pool serves as soon as `size` are up
            self._spawn(self._start_worker)
        for t in starters:
            t.join()
        if self._idle.qsize() == 0:
            self.close()
            raise SandboxUnavailable(f"no sandbox worker could start: {self._last_start_error}")
        self._owner = os.getpid()
        atexit.register(self._close_at_exit)

    # -- workers --

    def _new_worker(self):
        if self.backend == "docker":
            return DockerWorker(self._client, self.image, self.limits)
        return LocalWorker(self.limits)

    def _start_worker(self):
        for attempt in range(3):
            if self._closed:
                break
            try:
                worker = self._new_worker()
            except Exception as exc:
                self._last_start_error = f"{type(exc).__name__}: {exc}"
                time.sleep(0.5 * (attempt + 1))
                continue
            with self._lock:
                if not self._closed:
                    self._workers.add(worker)
                    self._idle.put(worker)
                    return
            worker.close()
            break
        with self._lock:
            self._alive -= 1

    def _spawn(self, target, *args) -> threading.Thread:
        thread = threading.Thread(target=target, args=args, daemon=True)
        with self._lock:
            self._starters = [t for t in self._starters if t.is_alive()] + [thread]
        thread.start()
        return thread

    def _retire(self, worker):
        """Close a worker and start its replacement, both in the background."""
        with self._lock:
            self._workers.discard(worker)
        self._spawn(worker.close)
        if not self._closed:
            self._spawn(self._start_worker)

    def _acquire(self, timeout: float):
        deadline = time.monotonic() + timeout
        while True:
            with self._lock:
                if self._alive <= 0 or self._closed:
                    return None
            try:
                return self._idle.get(timeout=min(1.0, max(0.01, deadline - time.monotonic())))
            except queue.Empty:
                if time.monotonic() >= deadline:
                    return None

    # -- jobs --

    def run(self, job: Job) -> Result:
        """The verdict on one job (blocking). Bad jobs raise ValueError/TypeError; infrastructure gives `error`."""
        wire = job.to_wire(self.limits)
        if wire["language"] != "python" and not self.serves_all_languages():
            pool = self.language_pool()
            if pool is None:
                return Result.infrastructure_error(str(self._language_problem), self.backend)
            return pool.run(job)
        with self._slots:
            return self._run_on_worker(wire, job)

    def _run_on_worker(self, wire: dict, job: Job) -> Result:
        last_error = "no sandbox worker available"
        for _ in range(2):
            worker = self._acquire(timeout=120.0)
            if worker is None:
                detail = f": {self._last_start_error}" if self._last_start_error else ""
                return Result.infrastructure_error(f"{last_error}{detail}", self.backend)
            try:
                reply = worker.run(wire, job.verdict_due(), job.budget())
            except VerdictOverdue as exc:
                self._retire(worker)
                return Result.overdue(str(exc), self.backend, worker.ident)
            except WorkerError as exc:
                last_error = str(exc)
                self._retire(worker)
                continue
            result = Result.from_wire(reply, self.backend, worker.ident)
            if result.tainted or result.status == "error":
                self._retire(worker)
            else:
                self._idle.put(worker)
            if result.status == "error":
                last_error = result.error or "the sandbox failed"
                continue
            return result
        return Result.infrastructure_error(last_error, self.backend)

    def serves_all_languages(self) -> bool:
        """Local workers use the host's toolchains; a Docker image either has them all or only Python."""
        from rlvr.sandbox.image import LANGUAGE_REPOSITORY

        return self.backend == "local" or str(self.image).startswith(LANGUAGE_REPOSITORY + ":")

    def language_pool(self) -> SandboxPool | None:
        """The companion pool on the image with every toolchain (started on first use)."""
        with self._lock:
            if self._language_pool is None and self._language_problem is None and not self._closed:
                from rlvr.sandbox.image import ImageError, image_tag

                try:
                    self._language_pool = SandboxPool(self.backend, self.size, image_tag(languages=True),
                                                      self.limits, build=self._build)
                except (SandboxUnavailable, ImageError) as exc:
                    self._language_problem = f"no sandbox for {', '.join(languages.LANGUAGES)}: {exc}"
            return self._language_pool

    def run_batch(self, jobs: Sequence[Job]) -> list[Result]:
        """Verdicts on many jobs, run in parallel over the pool; results in input order."""
        for job in jobs:
            job.to_wire(self.limits)  # reject bad input before anything runs
        return list(self._executor.map(self.run, jobs))

    def close(self):
        """Stop every worker (idempotent)."""
        with self._lock:
            self._closed = True
            starters, self._starters = self._starters, []
            workers, self._workers = list(self._workers), set()
            companion, self._language_pool = self._language_pool, None
        if companion is not None:
            companion.close()
        for t in starters:
            t.join(timeout=60)
        closers = [threading.Thread(target=w.close, daemon=True) for w in workers]
        for t in closers:
            t.start()
        for t in closers:
            t.join(timeout=30)
        self._executor.shutdown(wait=False)

    def _close_at_exit(self):
        if os.getpid() == self._owner:  # a forked child must not remove its parent's workers
            self.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def _docker_setup(image: str | None, build: bool):
    from rlvr.sandbox.image import LANGUAGE_REPOSITORY, build_image, docker_client, image_exists, image_tag

    try:
        client = docker_client()
    except Exception as exc:
        raise SandboxUnavailable(
            f"no Docker engine answers ({type(exc).__name__}: {str(exc)[:160]}); start dockerd or set "
            "DOCKER_HOST, or pass backend='local' where the host is already isolated"
        ) from None
    languages_image = image is not None and image.startswith(LANGUAGE_REPOSITORY + ":")
    if image is None:
        image = image_tag()
    if build and not image_exists(client, image) and (languages_image or image == image_tag()):
        build_image(client, image, log=lambda _msg: None, languages=languages_image)
    if not image_exists(client, image):
        raise SandboxUnavailable(f"the sandbox image {image} is missing; run `rlvr sandbox build`")
    remove_stale_containers(client)
    return client, image


_POOLS: dict[tuple, SandboxPool] = {}
_POOLS_LOCK = threading.Lock()


def get_pool(backend: str = "docker", size: int | None = None, image: str | None = None,
             limits: Limits | None = None) -> SandboxPool:
    """The shared pool for this configuration in this process (created on first use)."""
    key = (os.getpid(), backend, size, image, limits or Limits())
    with _POOLS_LOCK:
        pool = _POOLS.get(key)
        if pool is None or pool._closed:
            pool = SandboxPool(backend=backend, size=size, image=image, limits=limits)
            _POOLS[key] = pool
        return pool
