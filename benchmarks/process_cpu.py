"""Where a sample's host CPU goes, per process, for rows of benchmarks/throughput.py: robust to other load on
the host, which the rows' own host-wide figure (/proc/stat) counts.

    python benchmarks/process_cpu.py                                  # engine, engine-runner, strict; 64 each
    python benchmarks/process_cpu.py --rows strict strict-cold --rounds 3 -n 96
    python benchmarks/process_cpu.py --rows engine-bare engine-runner strict   # where strict's gap to its floor goes

Per sample, in CPU milliseconds:

- ``client``: this process, every thread (the row's docker-py calls, deepgym's host side), minus the sampler's,
  plus the children it reaped (the ``subprocess`` row's one ``python3`` per sample: its whole cost).
- ``dockerd``, ``containerd``: the engine's two daemons, with what they reaped (containerd: each container's
  short-lived ``containerd-shim-runc-v2 start`` and ``delete``). Other sessions' engine work counts here too.
- ``shims``: the shims of this run's containers (one ``containerd-shim-runc-v2`` per container), their own CPU.
- ``runtime``: what the shims reaped (``runc create``, ``start``, ``delete``, the OCI hooks they run, the
  container's init) minus what the containers' cgroups counted: runc and its hooks.
- ``boxes``: the containers' cgroups (cgroup v1 ``cpuacct``): ``runc init``, the init, the runner, the submission.

Shims and cgroups go away with their containers, so a sampler thread reads them every few milliseconds and keeps
the last value it saw; what one did after its last read is missed (a few ms at most). The containers are those
created since the script started (the API calls are counted too, per sample). Kernel threads' work (namespace and
mount teardown) is in none of the columns. Strict mode's window also holds the pool's edges: the containers
ready when it starts were made before it, those made at its end are not used in it (``max_parallel`` each).
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import os
import re
import sys
import threading
import time
from pathlib import Path

import requests

sys.path.insert(0, str(Path(__file__).resolve().parent))

import rows  # noqa: E402
import throughput  # noqa: E402

TICK = os.sysconf("SC_CLK_TCK")
POLL_S = 0.005
CGROUP = "/sys/fs/cgroup/cpuacct/docker/{}/cpuacct.usage"


def cpu_of(pid: int) -> tuple[str, float, float] | None:
    """(name, own CPU s, reaped children's CPU s) of ``pid``, None once it is gone."""
    try:
        data = Path(f"/proc/{pid}/stat").read_bytes()
    except OSError:
        return None
    fields = data[data.rindex(b")") + 2:].split()
    name = data[data.index(b"(") + 1:data.rindex(b")")].decode()
    return name, (int(fields[11]) + int(fields[12])) / TICK, (int(fields[13]) + int(fields[14])) / TICK


def engine_daemons() -> dict[str, list[int]]:
    """The pids of the engine's dockerd (the one listening on DOCKER_HOST's socket, default /var/run/docker.sock:
    another engine on this host is not ours) and of the containerd it started."""
    path = os.environ.get("DOCKER_HOST", "unix:///var/run/docker.sock").removeprefix("unix://")
    inodes = {fields[6] for fields in (line.split() for line in Path("/proc/net/unix").read_text().splitlines()[1:])
              if len(fields) > 7 and fields[7] == path}
    pids = [int(p) for p in os.listdir("/proc") if p.isdigit()]
    dockerd = [pid for pid in pids if (cpu_of(pid) or ("",))[0] == "dockerd" and _holds_socket(pid, inodes)]
    containerd = [pid for pid in pids if (cpu_of(pid) or ("",))[0] == "containerd" and _parent(pid) in dockerd]
    if not dockerd:
        raise SystemExit(f"no dockerd of this host listens on {path}")
    return {"dockerd": dockerd, "containerd": containerd}


def _holds_socket(pid: int, inodes: set[str]) -> bool:
    with contextlib.suppress(OSError):
        return any(os.readlink(f"/proc/{pid}/fd/{fd}") in {f"socket:[{inode}]" for inode in inodes}
                   for fd in os.listdir(f"/proc/{pid}/fd"))
    return False


def _parent(pid: int) -> int | None:
    with contextlib.suppress(OSError):
        data = Path(f"/proc/{pid}/stat").read_bytes()
        return int(data[data.rindex(b")") + 2:].split()[1])
    return None


def engine_cpu_s(pids: list[int]) -> float:
    """The CPU seconds of the daemons ``pids`` and of the children they reaped."""
    return sum(sum((cpu_of(pid) or ("", 0.0, 0.0))[1:]) for pid in pids)


class Recorder(threading.Thread):
    """Counts the row's API calls, learns its containers from their create calls, and samples their shims and
    cgroups until :meth:`stop`."""

    def __init__(self):
        super().__init__(daemon=True)
        self.containers: set[str] = set()
        self.calls: collections.Counter[str] = collections.Counter()
        self._shim_of: dict[int, str | None] = {}  # pid -> its container, if it is a shim; None: not a shim
        self._shims: dict[tuple[int, str], tuple[float, float]] = {}
        self._boxes: dict[str, float] = {}
        self._base = (0.0, 0.0, 0.0)
        self._stopped = threading.Event()
        self._counting = threading.Lock()
        self.own_s = 0.0
        self._send = requests.Session.send
        recorder = self

        def send(session: requests.Session, request: requests.PreparedRequest, **options):
            path = re.sub(r"(sha256:)?[0-9a-f]{64}", "ID", re.sub(r"^/v[0-9.]+", "", request.path_url.split("?")[0]))
            with recorder._counting:
                recorder.calls[f"{request.method} {path}"] += 1
            response = recorder._send(session, request, **options)
            if path == "/containers/create" and response.ok:
                recorder.containers.add(response.json()["Id"])
            return response

        requests.Session.send = send

    def run(self) -> None:
        while not self._stopped.is_set():
            self._sample()
            self.own_s = time.thread_time()
            time.sleep(POLL_S)

    def stop(self) -> None:
        self._stopped.set()
        self.join()
        requests.Session.send = self._send

    def _sample(self) -> None:
        pids = {int(entry) for entry in os.listdir("/proc") if entry.isdigit()}
        for gone in self._shim_of.keys() - pids:  # a pid seen again later is another process
            del self._shim_of[gone]
        for pid in pids:
            if pid not in self._shim_of:
                self._shim_of[pid] = self._container_of_shim(pid)
            container = self._shim_of[pid]
            if container in self.containers and (found := cpu_of(pid)) is not None:
                self._shims[pid, container] = found[1:]
        for container in list(self.containers):
            try:
                self._boxes[container] = int(Path(CGROUP.format(container)).read_text()) / 1e9
            except OSError:
                pass

    @staticmethod
    def _container_of_shim(pid: int) -> str | None:
        found = cpu_of(pid)
        if found is None or not found[0].startswith("containerd-shim"):
            return None
        try:
            argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        except OSError:
            return None
        return argv[argv.index(b"-id") + 1].decode() if b"-id" in argv else None

    def reset(self) -> None:
        """Start a row's window: its calls from zero, its CPU from what every container seen so far used."""
        self.calls.clear()
        self._base = self._sums()

    def totals(self) -> tuple[float, float, float]:
        """(shims, runtime, boxes) CPU seconds of the containers since :meth:`reset`."""
        shims, reaped, boxes = (now - then for now, then in zip(self._sums(), self._base))
        return shims, reaped - boxes, boxes

    def _sums(self) -> tuple[float, float, float]:
        shims = dict(self._shims)
        return (sum(own for own, _ in shims.values()), sum(children for _, children in shims.values()),
                sum(dict(self._boxes).values()))


def measure(row: str, env: str, n: int, parallel: int, recorder: Recorder,
            calls: collections.Counter[str]) -> dict[str, float]:
    """One row of throughput.py with every column above, in ms per sample, and its rate; its API calls are
    added to ``calls``."""
    engine = engine_daemons()
    figures: dict[str, float] = {}
    timed = throughput.timed

    def measured(judge, samples: list, workers: int) -> dict[str, float]:
        recorder.reset()
        before = {name: engine_cpu_s(pids) for name, pids in engine.items()}
        own, times = recorder.own_s, os.times()
        result = timed(judge, samples, workers)
        after, sampled = os.times(), recorder.own_s - own
        time.sleep(2.0)  # strict removes its used containers in the background
        count = len(samples)
        calls.update(recorder.calls)  # before the row closes its client (strict: the pool's removal)
        children = after.children_user + after.children_system - times.children_user - times.children_system
        figures["client"] = (after.user + after.system - times.user - times.system - sampled + children) / count
        for name, pids in engine.items():
            figures[name] = (engine_cpu_s(pids) - before[name]) / count
        figures["shims"], figures["runtime"], figures["boxes"] = (total / count for total in recorder.totals())
        figures["rate"] = result["samples_per_s"]
        if result["wrong_verdicts"]:  # a row that fails fast (a stale image, say) would look fast
            raise SystemExit(f"{row}: {result['wrong_verdicts']} of {count} verdicts were wrong or missing")
        return result

    throughput.timed = rows.timed = measured  # the engine rows live in rows.py, deepgym's in throughput.py
    try:
        if row in ("engine", "engine-bare"):
            throughput.run_engine(env, n, parallel, bare_verifier=row == "engine-bare")
        elif row == "engine-runner":
            throughput.run_engine_runner(env, n, parallel)
        elif row == "subprocess":
            throughput.run_subprocess(env, n, parallel)
        else:
            throughput.run_deepgym(row, env, n, parallel)
    finally:
        throughput.timed = rows.timed = timed
    return figures


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", nargs="+", default=["engine", "engine-runner", "strict"],
                        choices=["engine", "engine-bare", "engine-runner", "strict", "strict-cold", "docker-exec",
                                 "warm", "subprocess"])
    parser.add_argument("--env", default="coin_change")
    parser.add_argument("-n", type=int, default=64)
    parser.add_argument("--parallel", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=1, help="every row this many times, interleaved")
    args = parser.parse_args()
    if not Path(CGROUP).parent.parent.is_dir():
        raise SystemExit(f"needs cgroup v1's cpuacct hierarchy with docker's containers ({Path(CGROUP).parent.parent})")
    columns = ("client", "dockerd", "containerd", "shims", "runtime", "boxes")
    print(f"{args.env}, {args.n} samples per row, parallel {args.parallel}; load average {os.getloadavg()[0]:.1f} "
          f"at the start; CPU ms per sample")
    print(f"{'row':<14} {'samples/s':>9} " + " ".join(f"{name:>10}" for name in columns)
          + f" {'sum':>8}  API calls per sample")
    recorder = Recorder()
    recorder.start()
    try:
        for _ in range(args.rounds):
            for row in args.rows:
                counted: collections.Counter[str] = collections.Counter()
                figures = measure(row, args.env, args.n, args.parallel, recorder, counted)
                calls = ", ".join(f"{name} {count / args.n:.2f}" for name, count in sorted(counted.items()))
                cpu = [1000 * figures[name] for name in columns]
                print(f"{row:<14} {figures['rate']:9.2f} " + " ".join(f"{ms:10.1f}" for ms in cpu)
                      + f" {sum(cpu):8.1f}  {calls}", flush=True)
    finally:
        recorder.stop()
    print(f"load average {os.getloadavg()[0]:.1f} at the end")
    return 0


if __name__ == "__main__":
    sys.exit(main())
