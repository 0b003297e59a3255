"""Reward scoring spread over a Ray cluster (optional: `pip install rlvr[ray]`).

One `NodeScorer` actor is pinned to each alive node. It runs `verifier.score_batch` in its
own process, where the verifiers keep their pools at module level: the warm Docker sandbox
pool and the math worker processes start on the first batch and stay warm for the next ones.
Verifiers hold only their settings, so each chunk ships the verifier object itself.

A batch is cut into chunks, and chunks go to whichever actor has the fewest in flight (a
fast node takes more); results are written to their input positions, so they come back in
order. If a node dies mid-batch, its unfinished chunks are sent again (attempt 2, 3, ...)
to the surviving actors. Every result is delivered once, but a re-sent chunk may have run,
in part or whole, on the node that died: its code can execute twice.

Each chunk's worker returns a receipt beside its scores (item ids, attempt, node, pid), made
where the chunk ran; `last["receipts"]` holds those of the delivered chunks, so delivery can
be counted apart from the bookkeeping that fills the result list.

    scorer = RayScorer(address="127.0.0.1:6379")
    scores = scorer.score_batch(make_verifier("math"), completions, references)
    groups = scorer.score_groups(envs, completions)   # like rlvr.envs.score_groups

The local path (`verifier.score_batch`, `rlvr.envs.score_groups`) stays the default.
"""

from __future__ import annotations

import math
import os
import threading
from collections import deque
from collections.abc import Sequence
from typing import Any

from rlvr.verifiers.core import Score, align_batch


class NodeScorer:
    """The per-node actor: scores chunks with the verifier it is sent, its pools warm between calls."""

    def node(self) -> str:
        import ray

        return ray.get_runtime_context().get_node_id()

    def score(self, verifier, items, attempt, completions, references, task_fields) -> tuple[list[Score], dict]:
        """The chunk's scores and its receipt: which items ran, at which attempt, on which node and process."""
        scores = verifier.score_batch(completions, references, task_fields)
        return scores, {"items": list(items), "attempt": attempt, "node": self.node(), "pid": os.getpid()}


class RayScorer:
    """Scores batches on every alive node of a Ray cluster (`address`: "auto", "host:port", or None
    for the cluster this process is already connected to, or a new local one)."""

    def __init__(self, address: str | None = None, chunk_size: int | None = None, depth: int = 2):
        try:
            import ray
        except ModuleNotFoundError:
            raise ModuleNotFoundError("Ray scoring needs the ray extra: pip install 'rlvr[ray]'") from None
        self._ray = ray
        if not ray.is_initialized():
            ray.init(address=address, include_dashboard=False, log_to_driver=False)
        self.chunk_size, self.depth = chunk_size, depth
        self._actors: dict[str, Any] = {}  # node id -> actor handle
        self._lock = threading.Lock()
        self.last = {"chunks": 0, "retried": 0, "per_node": {}, "receipts": []}

    def nodes(self) -> list[str]:
        """Ids of the nodes with a live actor (actors are started for new nodes)."""
        ray = self._ray
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        with self._lock:
            alive = {n["NodeID"] for n in ray.nodes() if n["Alive"]}
            for node in list(self._actors):
                if node not in alive:
                    del self._actors[node]
            started = {}
            for node in sorted(alive - set(self._actors)):
                actor_class = ray.remote(num_cpus=0, max_restarts=0, max_concurrency=self.depth)(NodeScorer)
                started[node] = actor_class.options(
                    scheduling_strategy=NodeAffinitySchedulingStrategy(node, soft=False)).remote()
            for node, actor in started.items():
                try:
                    ray.get(actor.node.remote(), timeout=120)
                    self._actors[node] = actor
                except Exception:  # a node that is going away: no actor there
                    continue
            return sorted(self._actors)

    def _forget(self, actor) -> None:
        with self._lock:
            for node, known in list(self._actors.items()):
                if known is actor:
                    del self._actors[node]

    def score_batch(self, verifier, completions: Sequence[Any], references: Sequence[Any] | None = None,
                    task_fields: Sequence[dict] | None = None) -> list[Score]:
        """`verifier.score_batch(completions, references, task_fields)`, computed across the cluster."""
        ray = self._ray
        from ray.exceptions import ActorUnavailableError, ObjectLostError, RayActorError

        references, task_fields = align_batch(completions, references, task_fields)
        n = len(completions)
        if n == 0:
            return []
        nodes = self.nodes()
        if not nodes:
            raise RuntimeError("Ray scoring: no alive node in the cluster")
        size = self.chunk_size or max(1, math.ceil(n / (4 * len(nodes))))
        pending = deque((start, min(n, start + size), 1) for start in range(0, n, size))
        verifier_ref = ray.put(verifier)
        results: list[Score | None] = [None] * n
        in_flight: dict[Any, tuple[str, Any, tuple[int, int, int]]] = {}  # ref -> node, actor, chunk
        load = dict.fromkeys(nodes, 0)
        actors = {node: self._actors[node] for node in nodes}
        stats = {"chunks": len(pending), "retried": 0, "per_node": dict.fromkeys(nodes, 0), "receipts": []}
        self.last = stats  # live: progress can be watched while the batch runs
        while pending or in_flight:
            for node in sorted(load, key=load.get):  # least loaded first
                while pending and load[node] < self.depth:
                    start, end, attempt = chunk = pending.popleft()
                    ref = actors[node].score.remote(verifier_ref, range(start, end), attempt, list(completions[start:end]),
                                                    references[start:end], task_fields[start:end])
                    in_flight[ref] = (node, actors[node], chunk)
                    load[node] += 1
            if not in_flight:
                raise RuntimeError(f"Ray scoring: every node died; {sum(r is None for r in results)} items unscored")
            [done], _ = ray.wait(list(in_flight), num_returns=1)
            node, actor, (start, end, attempt) = in_flight.pop(done)
            try:
                scores, receipt = ray.get(done)
            except (RayActorError, ActorUnavailableError, ObjectLostError):
                # the node (or its actor) is gone: its chunks go back to the queue for the others
                load.pop(node, None)
                self._forget(actor)
                for ref, (other, _, (first, last, tries)) in list(in_flight.items()):
                    if other == node:
                        del in_flight[ref]
                        pending.appendleft((first, last, tries + 1))
                        stats["retried"] += 1
                pending.appendleft((start, end, attempt + 1))
                stats["retried"] += 1
                continue
            if node in load:
                load[node] -= 1
            if len(scores) != end - start:
                raise RuntimeError(f"Ray scoring: a chunk of {end - start} items came back with {len(scores)}")
            for i, score in zip(range(start, end), scores):
                if results[i] is not None:
                    raise RuntimeError(f"Ray scoring: item {i} reported twice")
                results[i] = score
            stats["receipts"].append(receipt)
            stats["per_node"][receipt["node"]] = stats["per_node"].get(receipt["node"], 0) + len(receipt["items"])
        return results  # type: ignore[return-value]

    def score_groups(self, envs: Sequence[Any], completions: Sequence[Sequence[str]]) -> list[list[tuple[float, dict]]]:
        """`rlvr.envs.score_groups` with each reward's batch scored on the cluster."""
        from rlvr.envs import score_groups

        return score_groups(envs, completions, score_batch=self.score_batch)
