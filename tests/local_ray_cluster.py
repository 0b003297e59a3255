"""A real multi-node Ray cluster on this machine, for the Ray scoring tests and `bench/ray_scoring.py`.

Kept out of the package on purpose: it exists to fail nodes on demand (`kill_node`) and to
notice their death in a second, which a user's cluster never wants. A user trying distributed
scoring on one machine runs `ray start --head` and `ray start --address` (docs/scaling.md).

`ray start --head` plus `ray start --address` for each further node, all with
`--node-ip-address 127.0.0.1`, each node with its own CPUs and a `node<i>` resource. Every
port Ray would otherwise take at a fixed number (the head's 6379 and 10001, each node's 52365)
is one the OS reports free, so two test runs on one machine do not collide. The nodes'
processes are told apart from any other Ray on the machine by this cluster's own temp folder,
so `stop()` and `kill_node()` end exactly the processes this cluster started.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from waiting import free_port

# a dead node is noticed in about a second instead of Ray's default half minute
FAST_HEALTH_CHECKS = {"RAY_health_check_period_ms": "500", "RAY_health_check_failure_threshold": "3",
                      "RAY_health_check_timeout_ms": "500"}


class LocalRayCluster:
    def __init__(self, nodes: int = 2, cpus_per_node: int = 1):
        self.port = free_port()
        self.address = f"127.0.0.1:{self.port}"
        self.temp_dir = tempfile.mkdtemp(prefix="rlvr_ray_")
        self._ray = str(Path(sys.executable).with_name("ray"))
        self._env = {**os.environ, **FAST_HEALTH_CHECKS}
        try:
            self._start(["--head", "--port", str(self.port), "--ray-client-server-port", str(free_port()),
                         "--temp-dir", self.temp_dir, "--include-dashboard=false", "--disable-usage-stats"],
                        0, cpus_per_node)
            self.nodes = 1
            for _ in range(1, nodes):
                self.add_node(cpus_per_node)
        except BaseException:
            self.stop()
            raise

    def add_node(self, cpus: int = 1) -> None:
        """One more node joins the cluster (`ray start --address`), with resource `node<i>`."""
        self._start(["--address", self.address], self.nodes, cpus)
        self.nodes += 1

    def _start(self, args: list[str], index: int, cpus: int) -> None:
        cmd = [self._ray, "start", *args, "--node-ip-address", "127.0.0.1", "--num-cpus", str(cpus),
               "--dashboard-agent-listen-port", str(free_port()), "--resources", f'{{"node{index}": 1}}']
        done = subprocess.run(cmd, env=self._env, capture_output=True, text=True, timeout=180)
        if done.returncode:
            raise RuntimeError(f"ray start failed: {(done.stdout + done.stderr)[-1500:]}")
    def processes(self) -> list:
        """This cluster's processes (every one names the cluster's temp folder or session in its arguments)."""
        import psutil

        mine = []
        for proc in psutil.process_iter(["pid", "cmdline"]):
            try:
                if any(self.temp_dir in arg for arg in proc.info["cmdline"] or []):
                    mine.append(proc)
            except (psutil.NoSuchProcess, psutil.AccessDenied):
                continue
        return mine

    def raylet_pid(self, node_id: str) -> int:
        """The pid of the raylet of a node (by its id, as `ray.nodes()` gives it)."""
        import ray

        socket = next(n["RayletSocketName"] for n in ray.nodes() if n["NodeID"] == node_id)
        for proc in self.processes():
            args = proc.info["cmdline"] or []
            if args and args[0].endswith("raylet") and f"--raylet_socket_name={socket}" in args:
                return proc.info["pid"]
        raise LookupError(f"no raylet of node {node_id} in this cluster")

    def kill_node(self, node_id: str) -> None:
        """SIGKILL a node's raylet: the node dies as if its machine had failed."""
        os.kill(self.raylet_pid(node_id), signal.SIGKILL)

    def stop(self) -> None:
        procs = self.processes()
        for proc in procs:
            try:
                proc.send_signal(signal.SIGTERM)
            except Exception:
                continue
        deadline = time.monotonic() + 10
        for proc in procs:
            try:
                proc.wait(max(0.1, deadline - time.monotonic()))
            except Exception:
                try:
                    proc.kill()
                except Exception:
                    continue
        shutil.rmtree(self.temp_dir, ignore_errors=True)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.stop()
