"""Scoring throughput: N mixed responses (half right, half wrong) per mode and parallelism, in one run.

    python benchmarks/throughput.py                       # coin_change, 64 samples, docker and local
    python benchmarks/throughput.py --env two_sum -n 200 --parallel 2 4 8
    python benchmarks/throughput.py --modes docker docker-exec   # docker's attached fast path vs. its exec path
    python benchmarks/throughput.py --modes docker --baseline /tmp/old:old --rounds 5   # before vs. after

Prints samples/s and per-sample latency (p50, p95) for each mode, and the machine it ran on. Every verdict is
checked (right -> 1.0, wrong -> below 1.0), so a fast but wrong run cannot pass for a good one. Local mode runs
submissions unconfined on this host; the benchmark opts in for it with DEEPGYM_ALLOW_LOCAL=1.

``--baseline PATH:TAG`` also runs every row with the deepgym checked out at PATH (``git archive REV | tar -x
-C PATH``) and its images tagged TAG (built beforehand: ``DEEPGYM_TAG=TAG PYTHONPATH=PATH python -m
deepgym.cli images build ENV``), each row in a subprocess of its own, interleaved with this checkout's rows
``--rounds`` times, so that both see the same load.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor

from deepgym import DeepGym, load_environment
from deepgym.check import as_response
from deepgym.images import build


def responses(env_name: str, n: int) -> list[tuple[str, bool]]:
    env = load_environment(env_name)
    solutions = env.solutions()
    wrong = sorted(name for name in solutions if name.startswith("wrong_"))

    def fenced(name: str) -> str:
        return as_response(env, solutions[name].read_text())

    return [(fenced("reference"), True) if i % 2 == 0 else (fenced(wrong[i // 2 % len(wrong)]), False) for i in range(n)]


def run(mode: str, env: str, n: int, parallel: int) -> dict[str, float]:
    """One row. Uses only the API every deepgym version here has (``DeepGym(mode, max_parallel).judge``), so a
    baseline checkout runs it too. ``docker-exec`` is docker judged through the generic create-and-exec path
    (DEEPGYM_DOCKER_EXEC=1)."""
    samples = responses(env, n)
    os.environ["DEEPGYM_DOCKER_EXEC"] = "1" if mode == "docker-exec" else "0"
    with DeepGym(mode=mode.removesuffix("-exec"), max_parallel=parallel) as gym:
        gym.judge(env, samples[0][0])  # warm-up: image inspection, the first connections

        def one(sample: tuple[str, bool]) -> tuple[float, bool]:
            started = time.perf_counter()
            outcome = gym.judge(env, sample[0])
            right = outcome.has_verdict and (outcome.score == 1.0) == sample[1]
            return time.perf_counter() - started, right

        started = time.perf_counter()
        with ThreadPoolExecutor(max_workers=parallel) as pool:
            results = list(pool.map(one, samples))
        elapsed = time.perf_counter() - started
    latencies = sorted(latency for latency, _ in results)
    return {"samples_per_s": len(samples) / elapsed, "p50_s": statistics.median(latencies),
            "p95_s": latencies[int(0.95 * (len(latencies) - 1))], "wrong_verdicts": sum(not ok for _, ok in results)}


def run_baseline(checkout: str, tag: str, mode: str, env: str, n: int, parallel: int) -> dict[str, float]:
    """The same row with the deepgym at ``checkout`` and its images tagged ``tag``, in a subprocess."""
    variables = {**os.environ, "PYTHONPATH": checkout, "DEEPGYM_TAG": tag}
    result = subprocess.run([sys.executable, __file__, "--row", mode, "--env", env, "-n", str(n), "--parallel",
                             str(parallel)], env=variables, capture_output=True, text=True, check=True)
    return json.loads(result.stdout.splitlines()[-1])


def machine() -> str:
    cpu = next((line.split(":", 1)[1].strip() for line in open("/proc/cpuinfo") if line.startswith("model name")), "?")
    engine = subprocess.run(["docker", "version", "--format", "{{.Server.Version}}"], capture_output=True,
                            text=True).stdout.strip()
    memory = int(next(line.split()[1] for line in open("/proc/meminfo") if line.startswith("MemTotal"))) // 2**20
    return (f"{cpu}, {os.cpu_count()} CPUs, {memory} GiB, Linux {platform.release()}, Docker Engine {engine}, "
            f"Python {platform.python_version()}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--env", default="coin_change")
    parser.add_argument("-n", type=int, default=64, help="samples per configuration (default: %(default)s)")
    parser.add_argument("--modes", nargs="+", default=["docker", "local"], choices=["docker", "docker-exec", "local"])
    parser.add_argument("--parallel", nargs="+", type=int, default=[max(2, os.cpu_count() or 1)])
    parser.add_argument("--baseline", metavar="PATH:TAG", help="also run each row with the deepgym at PATH and its "
                                                               "images tagged TAG")
    parser.add_argument("--rounds", type=int, default=1, help="run every row this many times, interleaved")
    parser.add_argument("--row", choices=["docker", "docker-exec", "local"], help=argparse.SUPPRESS)
    args = parser.parse_args()
    os.environ.setdefault("DEEPGYM_ALLOW_LOCAL", "1")
    if args.row:  # one row of a baseline, for run_baseline
        print(json.dumps(run(args.row, args.env, args.n, args.parallel[0])))
        return
    build([args.env])
    print(f"machine: {machine()}")
    print(f"environment: {args.env} ({load_environment(args.env).kind}), {args.n} samples, half right and half wrong\n")
    print(f"{'mode':<20} {'parallel':>8} {'samples/s':>10} {'p50 s':>8} {'p95 s':>8} {'wrong verdicts':>15}")
    rates: dict[str, list[float]] = {}
    for _ in range(args.rounds):
        for mode in args.modes:
            for parallel in args.parallel:
                rows = [(mode, run, ())]
                if args.baseline:
                    checkout, _, tag = args.baseline.rpartition(":")
                    rows.append((f"{mode} (baseline)", run_baseline, (checkout, tag)))
                for label, row, where in rows:
                    r = row(*where, mode, args.env, args.n, parallel)
                    rates.setdefault(f"{label} {parallel}", []).append(r["samples_per_s"])
                    print(f"{label:<20} {parallel:>8} {r['samples_per_s']:>10.2f} {r['p50_s']:>8.3f} "
                          f"{r['p95_s']:>8.3f} {r['wrong_verdicts']:>15}", flush=True)
    if args.rounds > 1:
        print("\nmean samples/s over the rounds:")
        for label, values in rates.items():
            print(f"  {label:<24} {statistics.mean(values):.2f}  ({', '.join(f'{v:.2f}' for v in values)})")


if __name__ == "__main__":
    main()
