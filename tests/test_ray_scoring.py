"""Scoring on a real two-node Ray cluster started on this machine (`ray start --head` + a second
node, on ports the OS reports free), with the Docker sandbox: results in input order and equal
to local scoring, for math, code and env groups; and when a node's raylet is killed mid-batch,
every item's result still reaches the caller exactly once. Delivery is counted from what the
workers record (the scorer's receipts, and a log the test's own verifier writes where each
chunk runs), not from the scorer's own bookkeeping; re-executions are counted and reported."""

from __future__ import annotations

import json
import os
import threading
import time
from collections import Counter

import needs
import pytest

from rlvr.registry import make_verifier

ray = needs.module("ray")

from local_ray_cluster import LocalRayCluster  # noqa: E402

from rlvr.ray_scoring import RayScorer  # noqa: E402

ADD_TESTS = "assert add(1, 2) == 3\nassert add(-1, 1) == 0\n"


def fenced(body: str) -> str:
    return f"```python\n{body}```"


def code_batch(n: int):
    bodies = ["def add(a, b):\n    return a + b\n", "def add(a, b):\n    return a - b\n",
              "def add(a, b):\n    return 3\n"]
    completions = [fenced(bodies[i % 3]) for i in range(n)]
    return completions, [None] * n, [{"tests": ADD_TESTS, "entry_point": "add"}] * n


def delivered(receipts) -> Counter:
    """How many times each item's result reached the caller, by the receipts the workers wrote."""
    return Counter(item for receipt in receipts for item in receipt["items"])


def logged(verifier, log):
    """`verifier` wrapped so that each run appends its item ids and pid to `log` on the worker that
    runs it, and tags each score with its item id there (the ids travel in the task fields)."""

    class Logged:  # defined here, so that Ray ships it by value to workers that cannot import this module
        def score_batch(self, completions, references, task_fields):
            items = [fields["item"] for fields in task_fields]
            with open(log, "a") as out:
                out.write(json.dumps({"items": items, "pid": os.getpid()}) + "\n")
            rest = [{k: v for k, v in fields.items() if k != "item"} for fields in task_fields]
            scores = verifier.score_batch(completions, references, rest)
            for item, score in zip(items, scores):
                score.info["item"] = item
            return scores

    return Logged()


@pytest.fixture(scope="module")
def cluster():
    try:
        local = LocalRayCluster(nodes=2, cpus_per_node=1)
    except Exception as exc:  # no Ray runtime here: skip, except under CI where it must run
        if os.environ.get("CI"):
            raise
        pytest.skip(f"cannot start a local Ray cluster: {exc}")
    try:
        ray.init(address=local.address, include_dashboard=False, log_to_driver=False)
        yield local
    finally:
        ray.shutdown()
        local.stop()


@pytest.fixture(scope="module")
def code_verifier():
    from conftest import require_docker

    from rlvr.sandbox.pool import get_pool

    verifier = make_verifier("code", pool_size=2)
    pool = require_docker(lambda: get_pool(verifier.backend, verifier.pool_size, verifier.image, verifier.limits))
    pool.close()  # the engine and the image are there; the nodes start their own pools
    return verifier


def test_results_come_back_in_order_and_equal_local_scoring(cluster, code_verifier):
    scorer = RayScorer(chunk_size=3)
    assert len(scorer.nodes()) == 2
    math = make_verifier("math")
    completions = [f"The answer is \\boxed{{{i * 7}}}." for i in range(30)]
    references = [str(i * 7 if i % 4 else i * 7 + 1) for i in range(30)]
    remote = scorer.score_batch(math, completions, references)
    local = math.score_batch(completions, references)
    assert [s.value for s in remote] == [s.value for s in local]
    assert [s.value for s in remote] == [0.0 if i % 4 == 0 else 1.0 for i in range(30)]
    assert delivered(scorer.last["receipts"]) == Counter(range(30))  # each item once, none missing
    assert {r["attempt"] for r in scorer.last["receipts"]} == {1}
    assert {r["node"] for r in scorer.last["receipts"]} == set(scorer.nodes())  # both nodes took work

    completions, references, fields = code_batch(9)
    scores = scorer.score_batch(code_verifier, completions, references, fields)
    assert [s.value for s in scores] == [1.0, 0.0, 0.5] * 3, [(s.value, s.reason, s.info.get("error")) for s in scores]
    assert {s.info["backend"] for s in scores} == {"docker"}


def test_env_groups_on_ray_equal_local(cluster):
    import gymnasium as gym

    from rlvr.envs import score_groups

    envs = [gym.make("rlvr/Arithmetic-v0") for _ in range(3)]
    for seed, env in enumerate(envs):
        env.reset(seed=seed)
    answers = [env.unwrapped.task.reference for env in envs]
    completions = [[f"\\boxed{{{a}}}", "\\boxed{-1}", f"so {a}"] for a in answers]
    remote = RayScorer(chunk_size=2).score_groups(envs, completions)
    assert remote == score_groups(envs, completions)
    assert [[r for r, _ in g] for g in remote][0][:2] == [1.0, 0.0]


def test_a_node_killed_mid_batch_delivers_every_result_once(cluster, code_verifier, tmp_path):
    scorer = RayScorer(chunk_size=2, depth=1)
    nodes = scorer.nodes()
    victim = next(n["NodeID"] for n in ray.nodes() if n["Alive"] and "node1" in n["Resources"])
    assert victim in nodes
    completions, references, fields = code_batch(48)
    fields = [{**f, "item": i} for i, f in enumerate(fields)]
    log = tmp_path / "runs.jsonl"
    out: dict = {}

    def score():
        try:
            out["scores"] = scorer.score_batch(logged(code_verifier, str(log)), completions, references, fields)
        except BaseException as exc:
            out["error"] = exc

    worker = threading.Thread(target=score)
    worker.start()
    deadline = time.monotonic() + 240
    while scorer.last["per_node"].get(victim, 0) == 0 and worker.is_alive() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert worker.is_alive(), "the batch finished before the node could be killed"
    cluster.kill_node(victim)
    worker.join(300)
    assert not worker.is_alive() and "error" not in out, out.get("error")
    scores, receipts = out["scores"], scorer.last["receipts"]
    # what the caller received: slot i holds the result the worker tagged as item i, every slot filled
    assert [s.info.get("item") if s is not None else None for s in scores] == list(range(48))
    assert delivered(receipts) == Counter(range(48))  # no duplicate, no omission
    assert [s.value for s in scores] == [1.0, 0.0, 0.5] * 16, [(s.value, s.reason) for s in scores]
    resent = {item for r in receipts if r["attempt"] > 1 for item in r["items"]}
    assert resent and scorer.last["retried"] >= 1
    assert {r["node"] for r in receipts if r["attempt"] > 1} <= set(nodes) - {victim}
    # what ran: every item at least once; only a re-sent item may have run twice (its first run on the victim)
    runs = Counter(item for line in log.read_text().splitlines() for item in json.loads(line)["items"])
    assert set(runs) == set(range(48))
    reexecuted = {item: n - 1 for item, n in runs.items() if n > 1}
    assert set(reexecuted) <= resent and max(runs.values()) <= 2, runs
    print(f"\n48 items delivered once each; {len(resent)} re-sent after the node died, "
          f"{sum(reexecuted.values())} of them executed twice")
    assert scorer.nodes() == [n for n in nodes if n != victim]


def test_a_second_cluster_starts_beside_the_first(cluster):
    """Two test runs on one machine: each cluster takes ports the OS reports free, so the second starts."""
    with LocalRayCluster(nodes=1) as other:
        assert other.port != cluster.port
        mine, theirs = {p.pid for p in other.processes()}, {p.pid for p in cluster.processes()}
        assert mine and theirs and not mine & theirs


def test_every_node_address_is_routed_on_this_machine(cluster):
    """Ray advertises the interface address for `--node-ip-address 127.0.0.1`; the kernel routes a
    local address through the loopback device, so no node traffic leaves the machine."""
    import subprocess

    addresses = {node["NodeManagerAddress"] for node in ray.nodes() if node["Alive"]}
    assert len(addresses) >= 1
    for address in addresses:
        route = subprocess.run(["ip", "route", "get", address], capture_output=True, text=True, check=True).stdout
        assert route.startswith("local ") and " dev lo " in route, route
