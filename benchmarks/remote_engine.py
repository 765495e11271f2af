"""A remote Docker engine against the local one: per-sample overhead, and sandbox create to first exec.

    python benchmarks/remote_engine.py                    # coin_change, 32 samples and 20 creates per engine, 3 rounds
    python benchmarks/remote_engine.py -n 64 --creates 40 --rounds 5

The "remote" engine is a second dockerd on this machine (scripts/second-engine.sh, needs root), reached over
tcp://127.0.0.1, over its unix socket, and over ssh://127.0.0.1 (an sshd of its own, scripts/start-sshd.sh,
whose sessions' docker CLI talks to that socket; needs the ssh extra); the images are copied to it first. Engines are measured in
interleaved rounds so that load from elsewhere spreads over all of them. Every verdict is checked (right ->
1.0, wrong -> below 1.0); a wrong score fails the run, and samples without a verdict are counted by type (a
host this busy may say ``host_overloaded``, which is no verdict, not a score).

What it says: the cost of the docker provider talking to an engine through docker-py's tcp transport, against
the unix socket of the same engine (the last line), and how a second daemon compares with the first (the
overhead column; on a shared machine the first engine also carries everyone else's containers), and what ssh
adds: paramiko's encryption and, per hijacked stream (attach, exec), a new channel and a `docker system
dial-stdio` process on the far side. What it does not say: the latency and bandwidth of a real network
(each sample makes about six API round trips: create, attach, start, wait, remove, plus the stream), TLS, or a
remote host's own load. Add the round-trip time of your network times six per sample to estimate it.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

from deepgym import DeepGym, load_environment
from deepgym.authoring.check import as_response
from deepgym.images import build, image_name
from deepgym.sandbox import ExecOptions, SandboxSpec
from deepgym.sandbox.docker import DockerProvider

sys.path.insert(0, str(Path(__file__).resolve().parent))
from throughput import machine, solutions  # noqa: E402 - the sibling benchmark's samples and machine line

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "scripts" / "second-engine.sh"
SSHD = ROOT / "scripts" / "start-sshd.sh"


@contextlib.contextmanager
def home_for(docker_host: str | None, sshd: Path) -> Iterator[None]:
    """For an ssh:// host, HOME points at a folder whose ~/.ssh holds sshd's client key and known_hosts (what
    paramiko reads), for the block only."""
    if not (docker_host or "").startswith("ssh://"):
        yield
        return
    home = sshd.parent / "home"
    (home / ".ssh").mkdir(parents=True, exist_ok=True)
    for name in ("id_ed25519", "known_hosts"):
        shutil.copy(sshd / name, home / ".ssh" / name)
    before = os.environ.get("HOME")
    os.environ["HOME"] = str(home)
    try:
        yield
    finally:
        if before is None:
            del os.environ["HOME"]
        else:
            os.environ["HOME"] = before


def per_sample(docker_host: str | None, env: str, samples: list[tuple[str, bool]]) -> tuple[list[float], Counter]:
    """Latencies of judging ``samples`` one at a time (no queueing in them), and the outcomes that were not the
    expected score: ``wrong score``, or the no-verdict type (a busy host may give ``host_overloaded``)."""
    latencies, unexpected = [], Counter()
    with DeepGym(mode="docker", docker_host=docker_host, max_parallel=1) as gym:
        gym.judge(env, samples[0][0])  # warm-up: image inspection, the first connection
        for response, right in samples:
            started = time.perf_counter()
            outcome = gym.judge(env, response)
            latencies.append(time.perf_counter() - started)
            if not outcome.has_verdict:
                unexpected[f"no verdict: {outcome.error_type}"] += 1
            elif (outcome.score == 1.0) != right:
                unexpected["wrong score"] += 1
    return latencies, unexpected


def create_to_first_exec(docker_host: str | None, image: str, count: int) -> list[float]:
    """Seconds from asking for a sandbox to the end of its first command (``true``), ``count`` times."""
    provider = DockerProvider(docker_host=docker_host)
    spec = SandboxSpec(image=provider.image(image).id)
    times = []
    try:
        with provider.create(spec):  # warm-up
            pass
        for _ in range(count):
            started = time.perf_counter()
            with provider.create(spec) as box:
                result = box.exec(["true"], ExecOptions(timeout_s=30.0))
                times.append(time.perf_counter() - started)
            assert result.exit_code == 0, result
    finally:
        provider.close()
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--env", default="coin_change")
    parser.add_argument("-n", type=int, default=32, help="samples per engine and round (default: %(default)s)")
    parser.add_argument("--creates", type=int, default=20, help="sandboxes per engine and round (default: %(default)s)")
    parser.add_argument("--rounds", type=int, default=3, help="interleaved rounds (default: %(default)s)")
    args = parser.parse_args()
    env = load_environment(args.env)
    build([env.id])
    samples = [(as_response(env, code), right) for code, right in solutions(env.id, args.n)]
    folder = Path(tempfile.mkdtemp(prefix="dg-engine2-"))
    try:
        started = subprocess.run(["bash", str(SCRIPT), "start", str(folder)], capture_output=True, text=True)
        if started.returncode != 0:
            sys.exit(f"the second engine did not start: {started.stderr}")
        tcp = started.stdout.strip()
        saved = subprocess.Popen(["docker", "save", image_name("base"), env.image], stdout=subprocess.PIPE)
        subprocess.run(["docker", "--host", tcp, "load", "-q"], stdin=saved.stdout, check=True, capture_output=True)
        saved.stdout.close()
        saved.wait()
        engines = {"local socket (first engine)": None, "second engine, tcp://127.0.0.1": tcp,
                   "second engine, unix socket": f"unix://{folder}/docker.sock"}
        sshd = subprocess.run(["bash", str(SSHD), "start", str(folder / "sshd"), f"unix://{folder}/docker.sock"],
                              capture_output=True, text=True)
        if sshd.returncode != 0:
            sys.exit(f"sshd did not start: {sshd.stderr}")
        engines["second engine, ssh://127.0.0.1"] = sshd.stdout.strip()
        latencies: dict[str, list[float]] = {name: [] for name in engines}
        creates: dict[str, list[float]] = {name: [] for name in engines}
        unexpected: dict[str, Counter] = {name: Counter() for name in engines}
        for _ in range(args.rounds):
            for name, host in engines.items():
                with home_for(host, folder / "sshd"):
                    measured, odd = per_sample(host, env.id, samples)
                    latencies[name] += measured
                    unexpected[name] += odd
                    creates[name] += create_to_first_exec(host, env.image, args.creates)
    finally:
        subprocess.run(["bash", str(SSHD), "stop", str(folder / "sshd")], capture_output=True)
        subprocess.run(["bash", str(SCRIPT), "stop", str(folder)], capture_output=True)
    print(machine())
    print(f"{env.id}, {args.n} samples and {args.creates} creates per engine and round, {args.rounds} rounds, "
          f"one sample at a time")
    local = statistics.median(latencies["local socket (first engine)"])
    print(f"{'engine':<32} {'p50 sample':>11} {'p95 sample':>11} {'overhead':>9} {'p50 create->exec':>17}  unexpected")
    for name in engines:
        measured = sorted(latencies[name])
        p50 = statistics.median(measured)
        print(f"{name:<32} {p50:>10.3f}s {measured[int(0.95 * (len(measured) - 1))]:>10.3f}s "
              f"{1000 * (p50 - local):>+7.0f}ms {statistics.median(creates[name]):>16.3f}s  "
              f"{dict(unexpected[name]) or 'none'}")
    transport = statistics.median(latencies["second engine, tcp://127.0.0.1"]) - statistics.median(
        latencies["second engine, unix socket"])
    print(f"tcp:// against the unix socket of the same engine (the transport alone): {1000 * transport:+.0f} ms "
          "per sample")
    over_ssh = statistics.median(latencies["second engine, ssh://127.0.0.1"]) - statistics.median(
        latencies["second engine, unix socket"])
    print(f"ssh:// against the unix socket of the same engine: {1000 * over_ssh:+.0f} ms per sample")
    wrong = sum(odd["wrong score"] for odd in unexpected.values())
    if wrong:
        sys.exit(f"{wrong} wrong score(s): a defect, never load")


if __name__ == "__main__":
    main()
