"""What each of a sandbox's container settings costs the engine: the bare loop of benchmarks/throughput.py's
``engine`` row (docker-py create + start + wait + remove of a container running ``true``) with one setting of
:func:`deepgym.sandbox.docker.container_settings` changed at a time.

    python benchmarks/engine_knobs.py                   # coin_change's image, 24 containers per knob, 3 rounds
    python benchmarks/engine_knobs.py -n 40 --rounds 5 --parallel 2

Every knob runs in every round, in turn, so a change in the host's load hits them alike; each line is the median
rate over the rounds, with the host CPU seconds per container (/proc/stat: other load counts too) and the ratio
to ``sandbox`` (the settings strict mode uses). A knob that makes the loop much faster points at a setting that
costs the engine a lot; one that changes nothing costs nothing. The ``engine`` row pays for every setting strict
mode pays for, so none of them moves the strict-to-engine ratio; they only move both rates.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import docker  # noqa: E402

from deepgym import load_environment  # noqa: E402
from deepgym.images import image_name  # noqa: E402
from deepgym.environments import sandbox_spec  # noqa: E402
from deepgym.sandbox.docker import API_VERSION, container_settings  # noqa: E402

# Each knob: a name, and what it changes in the host config of container_settings (None: the key removed), or
# in its create arguments for the keys of CREATE_KEYS.
CREATE_KEYS = ("network_disabled",)
KNOBS: dict[str, dict[str, object]] = {
    "sandbox": {},
    "no tmpfs /tmp": {"Tmpfs": None},
    "no shm size": {"ShmSize": None},
    "no nofile ulimit": {"Ulimits": None},
    "no pids limit": {"PidsLimit": None},
    "no memory limit": {"Memory": None, "MemorySwap": None},
    "no cpu quota": {"NanoCpus": None},
    "no cap drop/add": {"CapDrop": None, "CapAdd": None},
    "no no-new-privileges": {"SecurityOpt": None},
    "writable rootfs": {"ReadonlyRootfs": False},
    "log json-file": {"LogConfig": {"Type": "json-file", "Config": {}}},
    "network allocated (none)": {"network_disabled": False},
    "network bridge": {"NetworkMode": "bridge", "network_disabled": False},
    "no docker init": {"Init": False},
}


def host_cpu_s() -> float:
    """Busy CPU seconds of the whole host so far (user, nice, system, irq, softirq)."""
    fields = open("/proc/stat").readline().split()[1:8]
    return (sum(map(int, fields[:3])) + int(fields[5]) + int(fields[6])) / os.sysconf("SC_CLK_TCK")


def loop(api: docker.APIClient, spec, changes: dict[str, object], n: int, parallel: int) -> tuple[float, float]:
    """(containers/s, host CPU s per container) of ``n`` containers, ``parallel`` at a time, with ``changes``."""
    def one(_: int) -> None:
        settings = container_settings(api, spec, {"deepgym-benchmark": "engine-knobs"}, attached=True)
        host_config = settings["host_config"]
        for key, value in changes.items():
            if key in CREATE_KEYS:
                settings[key] = value
            elif value is None:
                host_config.pop(key, None)
            else:
                host_config[key] = value
        container = api.create_container(spec.image, entrypoint=["true"], command=[], **settings)["Id"]
        try:
            api.start(container)
            if api.wait(container)["StatusCode"] != 0:
                raise SystemExit("`true` failed in the container")
        finally:
            api.remove_container(container, force=True)

    cpu0, started = host_cpu_s(), time.perf_counter()
    with ThreadPoolExecutor(max_workers=parallel) as pool:
        list(pool.map(one, range(n)))
    return n / (time.perf_counter() - started), (host_cpu_s() - cpu0) / n


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("-n", type=int, default=24, help="containers per knob and round (default: %(default)s)")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--parallel", type=int, default=2)
    parser.add_argument("--env", default="coin_change")
    args = parser.parse_args()
    api = docker.APIClient(**docker.utils.kwargs_from_env(), version=API_VERSION, max_pool_size=args.parallel + 4)
    spec = sandbox_spec(load_environment(args.env), api.inspect_image(image_name(args.env))["Id"])
    figures: dict[str, list[tuple[float, float]]] = {name: [] for name in KNOBS}
    load0 = os.getloadavg()[0]
    try:
        loop(api, spec, {}, args.parallel, args.parallel)  # warm-up
        for _ in range(args.rounds):
            for name, changes in KNOBS.items():
                figures[name].append(loop(api, spec, changes, args.n, args.parallel))
    finally:
        api.close()
    base = statistics.median(rate for rate, _ in figures["sandbox"])
    print(f"{args.env}: {args.n} containers x {args.rounds} rounds per knob, parallel {args.parallel}; "
          f"load average {load0:.2f} at the start, {os.getloadavg()[0]:.2f} at the end")
    print(f"  {'knob':<24} {'containers/s':>12} {'CPU s/container':>16} {'vs sandbox':>10}")
    for name, values in figures.items():
        rate = statistics.median(rate for rate, _ in values)
        cpu = statistics.median(cpu for _, cpu in values)
        print(f"  {name:<24} {rate:12.2f} {cpu:16.3f} {rate / base:9.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
