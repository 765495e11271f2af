"""SWE-style instances: how many are judged per second, and what the first use of an instance image costs.

    python benchmarks/swe.py                 # 24 samples over the tests' three instances, parallel 2
    python benchmarks/swe.py -n 48 --parallel 2 4

The instances are the tests' own (tests/swe/instances.py): three small repositories baked into instance images
on deepgym's base image. Half the responses are the gold patch (1.0) and half a patch that fixes nothing (0.0);
every score is checked, so a fast wrong run cannot pass.

**First use**: a fresh instance image (the calc instance plus a file of random bytes, so no build cache knows
it) is layered with deepgym's runner by :func:`deepgym.swe_images.ensure`, timed from the call to the layer
being current; then the same call again, which finds it current.

**Judged per second**: samples judged through ``DeepGym.run_batch`` (a fresh container per sample, the
instance layer already built), wall clock of the batch.
"""

from __future__ import annotations

import argparse
import os
import platform
import secrets
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "swe"))

from instances import instance_rows  # noqa: E402

from deepgym import DeepGym  # noqa: E402
from deepgym.images import build, image_name  # noqa: E402
from deepgym.swe import swe_task  # noqa: E402
from deepgym.swe_images import ensure  # noqa: E402

NOTHING = "```diff\ndiff --git a/README.md b/README.md\n--- a/README.md\n+++ b/README.md\n@@ -1 +1,2 @@\n {line}\n+x\n```"


def machine() -> str:
    with open("/proc/loadavg") as f:
        load = " ".join(f.read().split()[:3])
    return f"{platform.processor() or platform.machine()}, {os.cpu_count()} CPUs, load average {load}"


def first_use(row: dict) -> tuple[float, float]:
    """(seconds to layer a never-seen instance image, seconds for the next call that finds it current)."""
    tag = image_name(f"swe-bench-fresh-{secrets.token_hex(4)}")
    dockerfile = f"FROM {row['image_name']}\nRUN head -c 64 /dev/urandom > /opt/fresh\n"
    subprocess.run(["docker", "build", "-q", "-t", tag, "-"], input=dockerfile, text=True, check=True,
                   capture_output=True)
    task = swe_task(dict(row, image_name=tag))
    try:
        started = time.perf_counter()
        ensure(task.environment)
        first = time.perf_counter() - started
        started = time.perf_counter()
        ensure(task.environment)
        return first, time.perf_counter() - started
    finally:
        subprocess.run(["docker", "image", "rm", "-f", tag, image_name(task.environment.id)], capture_output=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("-n", type=int, default=24, help="samples per parallelism")
    parser.add_argument("--parallel", type=int, nargs="+", default=[2])
    args = parser.parse_args()
    build(["row_python"])
    rows = instance_rows(Path(tempfile.mkdtemp(prefix="deepgym-swe-bench-")))
    print(f"machine: {machine()}")
    first, again = first_use(rows["calc"])
    print(f"first use of an instance image: layered in {first:.1f} s; the next use checks it in {again:.2f} s")
    tasks, responses, expected = [], [], []
    names = list(rows)
    for index in range(args.n):
        row = rows[names[index % len(names)]]
        gold = index % 2 == 0
        tasks.append(swe_task(row))
        responses.append(f"```diff\n{row['patch']}```" if gold else NOTHING.format(line=f"# {names[index % 3]}"))
        expected.append(1.0 if gold else 0.0)
    with DeepGym("docker") as gym:
        for task in {task.environment.id: task for task in tasks}.values():
            ensure(task.environment)
        gym.run(tasks[0], responses[0])  # warm-up
        for parallel in args.parallel:
            started = time.perf_counter()
            results = gym.run_batch(tasks, responses, max_parallel=parallel)
            wall = time.perf_counter() - started
            wrong = sum(1 for got, want in zip(results, expected) if not got.has_verdict or got.score != want)
            print(f"parallel {parallel}: {args.n} samples in {wall:.1f} s = {args.n / wall:.2f} instances judged/s "
                  f"({wall / args.n * parallel:.2f} s per sample per slot); wrong or no verdict: {wrong}")
    print(f"machine after: {machine()}")


if __name__ == "__main__":
    main()
