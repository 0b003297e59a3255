"""Scoring on a real two-node Ray cluster started on this machine (`ray start --head` + a second
node), with the Docker sandbox: results in input order and equal to local scoring, for math,
code and env groups; and a node whose raylet is killed mid-batch loses nothing and reports
each result exactly once."""

from __future__ import annotations

import os
import threading
import time

import pytest

from rlvr.registry import make_verifier

ray = pytest.importorskip("ray") if not os.environ.get("CI") else __import__("ray")

from rlvr.ray_cluster import LocalCluster  # noqa: E402
from rlvr.ray_scoring import RayScorer  # noqa: E402

ADD_TESTS = "assert add(1, 2) == 3\nassert add(-1, 1) == 0\n"


def fenced(body: str) -> str:
    return f"```python\n{body}```"


def code_batch(n: int):
    bodies = ["def add(a, b):\n    return a + b\n", "def add(a, b):\n    return a - b\n",
              "def add(a, b):\n    return 3\n"]
    completions = [fenced(bodies[i % 3]) for i in range(n)]
    return completions, [None] * n, [{"tests": ADD_TESTS, "entry_point": "add"}] * n


@pytest.fixture(scope="module")
def cluster():
    try:
        local = LocalCluster(nodes=2, cpus_per_node=1, port=6393)
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
    assert scorer.last["lost"] == 0 and sum(scorer.last["per_node"].values()) == 30
    assert all(count > 0 for count in scorer.last["per_node"].values())  # both nodes took work

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


def test_a_node_killed_mid_batch_loses_nothing_and_reports_each_result_once(cluster, code_verifier):
    scorer = RayScorer(chunk_size=2, depth=1)
    nodes = scorer.nodes()
    victim = next(n["NodeID"] for n in ray.nodes() if n["Alive"] and "node1" in n["Resources"])
    assert victim in nodes
    completions, references, fields = code_batch(48)
    out: dict = {}

    def score():
        try:
            out["scores"] = scorer.score_batch(code_verifier, completions, references, fields)
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
    scores = out["scores"]
    assert len(scores) == 48
    assert [s.value for s in scores] == [1.0, 0.0, 0.5] * 16, [(s.value, s.reason) for s in scores]
    assert scorer.last["retried"] >= 1 and scorer.last["lost"] == 0
    assert sum(scorer.last["per_node"].values()) == 48  # each item reported by exactly one node
    assert scorer.nodes() == [n for n in nodes if n != victim]
