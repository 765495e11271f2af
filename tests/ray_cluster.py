"""A real Ray cluster of two nodes on this machine, for the tests marked ``ray`` (a plugin of tests/conftest.py,
so that tests/ray and tests/conformance share one cluster per session): node ``a`` (the head) judges on
this machine's Docker engine, node ``b`` on the second engine (scripts/second-engine.sh), each offering three units
of ``deepgym_sandbox`` and three of a resource of its own (``deepgym_a``, ``deepgym_b``) so that a test can send
samples to one node. Every Ray port is chosen free, never Ray's defaults, and every process of the cluster is
found by the cluster's own temp folder (in its command line, or in its environment once Ray renamed it) and
ended by its pid, so nothing else on the machine is touched.
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from support import ROOT

UNITS = 3
"""Units per node: the conformance suite holds three sandboxes of one node at once (its leak sweep)."""
PORT_OPTIONS = ("--object-manager-port", "--dashboard-agent-listen-port", "--dashboard-agent-grpc-port",
                "--metrics-export-port", "--runtime-env-agent-port")


FIRST_ENGINE = "unix:///var/run/docker.sock"
"""This machine's engine, which node a judges on (the caller's own DOCKER_HOST points nowhere)."""
MARK = "DEEPGYM_TEST_RAY_CLUSTER"
"""Set to the cluster's temp folder in every node's environment, which its workers inherit: a worker renames
itself (``ray::IDLE``), so its command line no longer names the folder, but its environment still does."""
SHELL_ENV = "shell_fix_config"
"""The session environment whose episodes the cluster judges (its image is on both nodes)."""


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """A test that kills a node of the shared cluster runs after every other (the cluster has one node after it)."""
    items.sort(key=lambda item: bool(getattr(getattr(item, "function", None), "kills_a_node", False)))


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def bindable(port: int) -> bool:
    with socket.socket() as probe:
        try:
            probe.bind(("127.0.0.1", port))
        except OSError:
            return False
        return True


WORKER_PORTS = 100
_worker_ranges: set[int] = set()
"""The first port of each worker range this test run gave a node, so that no two nodes share one."""


def worker_ports() -> int:
    """The first of ``WORKER_PORTS`` free ports for a node's workers, below the machine's ephemeral range.

    ``free_port`` takes its ports from the ephemeral range, so a worker range inside it could hold a port already
    given to a component: Ray then refuses to start the node (it happened: the object manager's port fell among
    the workers')."""
    ephemeral_low = int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    for _ in range(200):
        low = random.randrange(10000, ephemeral_low - WORKER_PORTS, WORKER_PORTS)
        if low not in _worker_ranges and all(bindable(port) for port in range(low, low + WORKER_PORTS)):
            _worker_ranges.add(low)
            return low
    raise AssertionError(f"no {WORKER_PORTS} free ports in a row between 10000 and {ephemeral_low}")


@dataclass
class Node:
    name: str
    process: subprocess.Popen
    manager_port: int
    """Its raylet's port, which names that raylet's process among every raylet of the machine."""
    id: str = ""


@dataclass
class Cluster:
    address: str
    temp: Path
    nodes: dict[str, Node] = field(default_factory=dict)

    def pids(self, node: Node | None = None) -> list[int]:
        """Our cluster's processes, or one node's: its ``ray start`` (the process group it leads) and its raylet
        with everything under it."""
        found = []
        raylet = None if node is None else next(
            (pid for pid, argv in self._ours() if f"--node_manager_port={node.manager_port}" in argv and
             "raylet" in argv.split(" ", 1)[0]), None)
        for pid, _ in self._ours():
            if node is None or _in_group(pid, node.process.pid) or (raylet is not None and _descends(pid, raylet)):
                found.append(pid)
        return found

    def _ours(self) -> list[tuple[int, str]]:
        """Every live process of the cluster: its command line names the temp folder, or (a worker Ray renamed,
        ``ray::IDLE``) its environment carries the cluster's MARK."""
        mark = f"{MARK}={self.temp}".encode()
        listed = []
        for entry in Path("/proc").iterdir():
            if entry.name.isdigit():
                try:
                    argv = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
                    if str(self.temp) in argv or mark in (entry / "environ").read_bytes().split(b"\0"):
                        listed.append((int(entry.name), argv))
                except OSError:
                    continue
        return listed

    def workers(self) -> set[int]:
        """Every worker process the cluster's raylets started, dead or alive (their logs say so)."""
        started = set()
        for log in self.temp.glob("session_*/logs/raylet*.out"):
            started.update(int(pid) for pid in re.findall(r"Started worker process with pid (\d+)", log.read_text()))
        return started

    def kill(self, node: Node) -> list[int]:
        """SIGKILL every process of ``node`` at once: the node dies as a machine would."""
        pids = self.pids(node)
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        return pids


def _stat(pid: int) -> list[str]:
    """The fields of /proc/PID/stat after the command name (state, ppid, pgrp, ...); [] when it is gone."""
    try:
        return (Path("/proc") / str(pid) / "stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return []


def _in_group(pid: int, group: int) -> bool:
    fields = _stat(pid)
    return len(fields) > 2 and fields[2] == str(group)


def _descends(pid: int, ancestor: int) -> bool:
    while pid > 1:
        if pid == ancestor:
            return True
        fields = _stat(pid)
        if len(fields) < 2:
            return False
        pid = int(fields[1])
    return False


def start(node: str, docker_host: str, temp: Path, extra: list[str], auth: dict[str, str]) -> Node:
    """``ray start --block`` of node ``node`` judging on ``docker_host``, in a session of its own."""
    resources = json.dumps({"deepgym_sandbox": UNITS, f"deepgym_{node}": UNITS})
    low = worker_ports()
    manager = free_port()
    argv = [str(Path(sys.executable).parent / "ray"), "start", "--block", "--node-ip-address=127.0.0.1",
            f"--resources={resources}", "--num-cpus=1", "--disable-usage-stats", f"--temp-dir={temp}",
            f"--min-worker-port={low}", f"--max-worker-port={low + WORKER_PORTS - 1}", f"--node-manager-port={manager}",
            *[f"{option}={free_port()}" for option in PORT_OPTIONS], *extra]
    environment = {key: value for key, value in os.environ.items() if not key.startswith("RAY_")}
    environment.update(DOCKER_HOST=docker_host, PYTHONPATH=str(ROOT), RAY_USAGE_STATS_ENABLED="0",
                       **{MARK: str(temp)}, **auth)
    with open(temp.parent / f"ray-start-{node}.log", "w") as log:
        process = subprocess.Popen(argv, env=environment, stdout=log, stderr=subprocess.STDOUT,
                                   start_new_session=True)
    return Node(node, process, manager)


def owned_by(pids: set[int]) -> list[str]:
    """The deepgym containers on this machine's engine whose owner (label ``deepgym.owner``,
    host/pid-namespace/pid/start) was one of ``pids``."""
    from deepgym.sandbox.docker import OWNER_LABEL

    listed = subprocess.run(["docker", "ps", "-a", "--filter", "label=deepgym", "--format",
                             f'{{{{.ID}}}} {{{{.Label "{OWNER_LABEL}"}}}}'], capture_output=True, text=True).stdout
    found = []
    for line in listed.splitlines():
        container, _, owner = line.partition(" ")
        parts = owner.split("/")
        if len(parts) >= 3 and parts[2].isdigit() and int(parts[2]) in pids:
            found.append(container)
    return found


def wait_for_nodes(ray, count: int, folder: Path, timeout_s: float = 120.0) -> list[dict]:
    """The live nodes, once ``count`` have joined; otherwise what each ``ray start`` printed, since the teardown
    deletes ``folder`` and its logs with it."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        alive = [node for node in ray.nodes() if node.get("Alive")]
        if len(alive) >= count:
            return alive
        time.sleep(0.5)
    printed = "".join(f"\n--- {log.name} (last 40 lines) ---\n" + "\n".join(log.read_text().splitlines()[-40:])
                      for log in sorted(folder.glob("ray-start-*.log")))
    raise AssertionError(f"the Ray cluster has {len(alive)} live node(s), not {count}{printed}")


@pytest.fixture(scope="session")
def ray_cluster(second_engine):
    """The two-node cluster, with the test process connected to it as a driver (no node of its own)."""
    ray = pytest.importorskip("ray")
    from deepgym.images import image_name
    from support import ensure_images

    ensure_images("coin_change", "two_sum", SHELL_ENV)
    second_engine.load(image_name("coin_change"), image_name(SHELL_ENV))  # two_sum stays on the first engine only
    folder = Path(tempfile.mkdtemp(prefix="dgray-"))
    temp = folder / "t"
    temp.mkdir()
    port = free_port()
    cluster = Cluster(f"127.0.0.1:{port}", temp)
    # Ray 2.60 turns token authentication on for a head when ~/.ray/auth_token exists, and a driver reads its
    # mode once, when ray is first imported (here, long before this fixture), never for an explicit address:
    # this local test cluster, on free ports of 127.0.0.1, runs without it.
    auth = {"RAY_AUTH_MODE": "disabled"}
    try:
        cluster.nodes["a"] = start("a", FIRST_ENGINE, temp,
                                   ["--head", f"--port={port}", "--include-dashboard=false",
                                    f"--ray-client-server-port={free_port()}"], auth)
        for _ in range(240):
            with socket.socket() as probe:
                if probe.connect_ex(("127.0.0.1", port)) == 0:
                    break
            time.sleep(0.25)
        cluster.nodes["b"] = start("b", second_engine.host, temp, [f"--address={cluster.address}"], auth)
        ray.init(address=cluster.address, logging_level="WARNING", log_to_driver=False)
        for node in wait_for_nodes(ray, 2, folder):
            for name in ("a", "b"):
                if node["Resources"].get(f"deepgym_{name}"):
                    cluster.nodes[name].id = node["NodeID"]
        yield cluster
    finally:
        ours = set(cluster.pids()) | cluster.workers()
        if ray.is_initialized():
            ray.shutdown()
        for node in cluster.nodes.values():
            if node.process.poll() is None:
                os.killpg(node.process.pid, signal.SIGTERM)
        for node in cluster.nodes.values():
            try:
                node.process.wait(timeout=60)
            except subprocess.TimeoutExpired:
                os.killpg(node.process.pid, signal.SIGKILL)
        # Anything of ours that outlived its ray start, until none is left: workers whose raylet died end on
        # their own only later, and the session's leak check must not find their containers' owners alive.
        deadline = time.monotonic() + 60
        while (left := set(cluster.pids())) and time.monotonic() < deadline:
            ours |= left
            for pid in left:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
            time.sleep(0.2)
        # Ray ends idle workers without their exit handlers, leaving their ready containers (docker's prewarm,
        # stopped once their stream closed), which the next provider on that engine reaps on first contact;
        # here the session's leak checks would find them first.
        stale = second_engine.docker("ps", "-aq", "--filter", "label=deepgym").stdout.split()
        if stale:
            second_engine.docker("rm", "-f", *stale)
        leftovers = owned_by(ours)
        if leftovers:
            subprocess.run(["docker", "rm", "-f", *leftovers], capture_output=True)
        shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture
def caller(ray_cluster, monkeypatch):
    """The caller's environment: the cluster's address, and a DOCKER_HOST that points nowhere."""
    monkeypatch.setenv("RAY_ADDRESS", ray_cluster.address)
    monkeypatch.setenv("DOCKER_HOST", "tcp://127.0.0.1:9")
    return ray_cluster
