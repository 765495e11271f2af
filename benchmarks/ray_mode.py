"""mode="ray" against direct docker mode on the same host: what the hop through Ray costs.

    python benchmarks/ray_mode.py                     # 40 coin_change responses per row and round, 2 rounds,
                                                      # 2 nodes, 40 session steps per mode
    python benchmarks/ray_mode.py -n 80 --steps 100
    python benchmarks/ray_mode.py --niceness 0        # the nodes' workers at the host's priority (Ray's default: 15)

It starts a Ray cluster of two nodes on this machine (free ports, a temp folder, both judging on this machine's
engine, each offering ``--units`` of ``deepgym_sandbox``), connects to it as a driver, and runs ``--rounds`` of
these rows, interleaved, each after one warm-up batch:

- ``docker``: ``DeepGym(mode="docker").run_batch`` with ``max_parallel`` samples in flight;
- ``ray``: the same batch through ``DeepGym(mode="ray")``, the same ``max_parallel`` (run_batch awaits its
  samples on an event loop of its own there);
- ``ray async``: ``arun_batch`` through Ray, capped at the same ``max_parallel``;
- the session step: shell episodes of up to 10 steps in each mode, ``--steps`` actions of ``true`` in all,
  interleaved episode by episode; p50 and p90 of a step (through Ray both ways: ``step`` in the caller's thread,
  and ``asession``'s step awaited on the actor's ref), and of Ray's hop alone (a call to the episode's actor that
  does nothing on the node).

Every verdict must be right, so a fast but wrong run cannot pass for a good one. The two nodes share this
machine's CPUs: the figures show the hop's overhead and the spread over nodes, not a speed-up (docs/ray.md has
the arithmetic for a real cluster).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from aio import responses  # noqa: E402
from throughput import machine  # noqa: E402

from deepgym import DeepGym  # noqa: E402
from deepgym.images import build  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
SHELL_ENV = "shell_fix_config"
EPISODE_STEPS = 10
"""Steps per episode, within the environment's step budget (20); ``--steps`` is spread over as many episodes."""


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def start_cluster(temp: Path, units: int, niceness: int | None) -> tuple[str, list[subprocess.Popen]]:
    """Two ``ray start --block`` nodes on 127.0.0.1, each offering ``units`` of deepgym_sandbox; their workers at
    ``niceness`` (None: Ray's default, 15)."""
    ray = str(Path(sys.executable).parent / "ray")
    port = free_port()
    environment = {key: value for key, value in os.environ.items() if not key.startswith("RAY_")}
    environment.update(PYTHONPATH=str(ROOT), RAY_USAGE_STATS_ENABLED="0", RAY_AUTH_MODE="disabled")
    if niceness is not None:
        environment["RAY_worker_niceness"] = str(niceness)
    common = ["--block", "--node-ip-address=127.0.0.1", f"--resources={json.dumps({'deepgym_sandbox': units})}",
              "--num-cpus=1", "--disable-usage-stats", f"--temp-dir={temp}"]
    nodes = [subprocess.Popen([ray, "start", "--head", f"--port={port}", "--include-dashboard=false",
                               f"--ray-client-server-port={free_port()}", f"--node-manager-port={free_port()}",
                               *common], env=environment, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                              start_new_session=True)]
    for _ in range(240):
        with socket.socket() as probe:
            if probe.connect_ex(("127.0.0.1", port)) == 0:
                break
        time.sleep(0.25)
    nodes.append(subprocess.Popen([ray, "start", f"--address=127.0.0.1:{port}", f"--node-manager-port={free_port()}",
                                   *common], env=environment, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                  start_new_session=True))
    return f"127.0.0.1:{port}", nodes


def batch_row(mode: str, texts: list[str], expected: list[float], parallel: int, *, aio: bool) -> dict:
    with DeepGym(mode=mode, max_parallel=parallel) as gym:
        gym.run_batch("coin_change", texts[:parallel], max_parallel=parallel)  # warm-up: workers, ready containers
        started = time.monotonic()
        if aio:
            batch = asyncio.run(gym.arun_batch("coin_change", texts, max_parallel=parallel))
        else:
            batch = gym.run_batch("coin_change", texts, max_parallel=parallel)
        elapsed = time.monotonic() - started
    assert [entry.score for entry in batch] == expected, batch.summary()
    return {"samples_per_s": len(texts) / elapsed, "nodes": Counter(entry.node for entry in batch)}


def step_times(mode: str, steps: int, hops: list[float]) -> list[float]:
    """``steps`` steps of one episode; for Ray also the round trip of as many calls to the episode's actor that do
    nothing on the node (its sandbox's id), into ``hops``: the hop a step pays besides its command."""
    with DeepGym(mode=mode) as gym, gym.session(SHELL_ENV) as session:
        session.start()
        took = []
        for _ in range(steps):
            started = time.monotonic()
            session.step("true")
            took.append(time.monotonic() - started)
            if mode == "ray":
                box = session._sandbox
                started = time.monotonic()
                box.call(box._actor.sandbox_id, timeout_s=0.0)
                hops.append(time.monotonic() - started)
    return took


def awaited_step_times(steps: int) -> list[float]:
    """``steps`` steps of one episode through Ray on ``asession``, each awaited on the actor's ref."""

    async def episode(gym: DeepGym) -> list[float]:
        async with gym.asession(SHELL_ENV) as session:
            await session.start()
            took = []
            for _ in range(steps):
                started = time.monotonic()
                await session.step("true")
                took.append(time.monotonic() - started)
            return took

    with DeepGym(mode="ray") as gym:
        return asyncio.run(episode(gym))


def batches(texts: list[str], expected: list[float], parallel: int, units: int, rounds: int) -> None:
    """The rows interleaved, round by round, so that a change of load, or Ray's workers still starting in the
    first round, hits every row alike; a row's samples/s is the mean of its rounds."""
    rows: dict[str, list[dict]] = {"docker": [], "ray": [], "ray async": []}
    for _ in range(rounds):
        rows["docker"].append(batch_row("docker", texts, expected, parallel, aio=False))
        rows["ray"].append(batch_row("ray", texts, expected, parallel, aio=False))
        rows["ray async"].append(batch_row("ray", texts, expected, parallel, aio=True))
    rates = {name: statistics.mean(row["samples_per_s"] for row in measured) for name, measured in rows.items()}
    print(f"\n{len(texts)} coin_change samples per row and round, {rounds} rounds, {parallel} in flight, "
          f"2 nodes x {units} units\n")
    print("| row | samples/s | vs docker | samples per node |\n|---|---|---|---|")
    for name, measured in rows.items():
        spread = sum((row["nodes"] for row in measured), Counter())
        shown = " / ".join(str(count) for _, count in sorted(spread.items(), key=str)) if name != "docker" else "-"
        print(f"| {name} | {rates[name]:.2f} | {rates[name] / rates['docker']:.2f}x | {shown} |", flush=True)


def steps(count: int) -> None:
    """The two modes' steps interleaved, episode by episode, so that a change of load hits both alike."""
    docker_steps: list[float] = []
    ray_steps: list[float] = []
    awaited_steps: list[float] = []
    hops: list[float] = []
    for done in range(0, count, EPISODE_STEPS):
        length = min(EPISODE_STEPS, count - done)
        docker_steps += step_times("docker", length, hops)
        ray_steps += step_times("ray", length, hops)
        awaited_steps += awaited_step_times(length)
    print(f"\nsession step (`true`), {len(docker_steps)} steps per mode\n")
    print("| what | p50 ms | p90 ms |\n|---|---|---|")
    for name, took in (("docker step", docker_steps), ("ray step", ray_steps), ("ray step, awaited", awaited_steps),
                       ("ray hop (no-op actor call)", hops)):
        print(f"| {name} | {1000 * statistics.median(took):.1f} | {1000 * percentile(took, 0.9):.1f} |")
    direct = statistics.median(docker_steps)
    print(f"\nRay's per-step overhead, p50: {1000 * (statistics.median(ray_steps) - direct):.1f} ms "
          f"(awaited: {1000 * (statistics.median(awaited_steps) - direct):.1f} ms)")


def percentile(values: list[float], share: float) -> float:
    return sorted(values)[min(len(values) - 1, int(share * len(values)))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("-n", type=int, default=40, help="coin_change responses per row (%(default)s)")
    parser.add_argument("--parallel", type=int, default=os.cpu_count() or 2, help="samples in flight (%(default)s)")
    parser.add_argument("--units", type=int, default=os.cpu_count() or 2, help="deepgym_sandbox per node")
    parser.add_argument("--rounds", type=int, default=2, help="rounds of the batch rows (%(default)s)")
    parser.add_argument("--steps", type=int, default=40, help="session steps per mode (%(default)s)")
    parser.add_argument("--only", choices=["batch", "steps"], help="run only the batch rows or the session steps")
    parser.add_argument("--niceness", type=int, help="the nodes' RAY_worker_niceness (default: Ray's, 15)")
    args = parser.parse_args()
    build(["coin_change", SHELL_ENV])
    print(machine(), f"Ray workers' niceness {15 if args.niceness is None else args.niceness}", flush=True)
    texts, expected = responses(args.n)
    folder = Path(tempfile.mkdtemp(prefix="dgraybench-"))
    address, nodes = start_cluster(folder, args.units, args.niceness)
    try:
        os.environ["RAY_ADDRESS"] = address
        import ray

        ray.init(address=address, logging_level="WARNING", log_to_driver=False)
        for _ in range(240):
            if len([node for node in ray.nodes() if node.get("Alive")]) >= 2:
                break
            time.sleep(0.5)
        if args.only != "steps":
            batches(texts, expected, args.parallel, args.units, args.rounds)
        if args.only != "batch":
            steps(args.steps)
        print(f"load average at the end: {os.getloadavg()[0]:.1f}")
    finally:
        with contextlib.suppress(Exception):  # the nodes go below whatever the driver's state
            sys.modules["ray"].shutdown()
        for node in nodes:
            os.killpg(node.pid, signal.SIGTERM)
        for node in nodes:
            try:
                node.wait(timeout=60)
            except subprocess.TimeoutExpired:
                os.killpg(node.pid, signal.SIGKILL)
        shutil.rmtree(folder, ignore_errors=True)
        reap_left_ready_containers()


def reap_left_ready_containers() -> None:
    """Ray ends idle workers without their exit handlers, so their ready containers stay (stopped); a provider's
    first contact with the engine removes those of dead processes (deepgym.sandbox.docker.owners)."""
    from deepgym.sandbox.direct import make_direct

    provider = make_direct("docker", max_parallel=1)
    try:
        provider.engine.api()
    finally:
        provider.close()


if __name__ == "__main__":
    main()
