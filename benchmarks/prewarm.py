"""What strict mode's prewarmed containers buy on a saturated host, read from each verdict's admission wait.

    python benchmarks/prewarm.py                      # coin_change, parallel 2, 96 samples, 3 rounds
    python benchmarks/prewarm.py -n 200 --parallel 4 --rounds 2

A refill of the prewarm pool holds an admission slot while it makes its container (deepgym.sandbox.ready), so on a
host whose bound the samples already fill, the next sample waits for its slot behind that refill. Each round judges
the same samples in strict mode with prewarming on (``DEEPGYM_DOCKER_PREWARM`` = parallel, the default) and off (0),
alternating, and prints samples/s, the latency p50 and p95, how many samples waited for their slot (the verdict's
``admission_wait_s`` over 10 ms), that wait's median, and the p95 latency of the samples that waited and of those
that did not. Every verdict is checked (a right answer must score 1.0, a wrong one below). Use a private
``DEEPGYM_ADMISSION_DIR``.
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

import rows  # noqa: E402  (benchmarks/, this script's folder)

from deepgym import DeepGym, load_environment  # noqa: E402
from deepgym.authoring.check import as_response  # noqa: E402

WAITED_S = 0.01  # a wait longer than taking a free slot's lock


def one_round(env_name: str, n: int, parallel: int, prewarm: bool) -> dict[str, float | int | None]:
    os.environ["DEEPGYM_DOCKER_PREWARM"] = str(parallel if prewarm else 0)
    env = load_environment(env_name)
    samples = [(as_response(env, code), right) for code, right in rows.solutions(env_name, n)]
    with DeepGym(mode="docker", max_parallel=parallel) as gym:
        gym.judge(env, samples[0][0])  # warm-up: image inspection, the first connections, the pool

        def judge(sample: tuple[str, bool]) -> tuple[float, float]:
            started = time.perf_counter()
            verdict = gym.judge(env, sample[0])
            latency = time.perf_counter() - started
            if not verdict.has_verdict or (verdict.score == 1.0) != sample[1]:
                raise SystemExit(f"wrong verdict: {verdict.to_dict()}")
            return latency, verdict.timings["admission_wait_s"]

        started = time.perf_counter()
        with ThreadPoolExecutor(max_workers=parallel) as pool:
            results = list(pool.map(judge, samples))
        elapsed = time.perf_counter() - started
    waits = [wait for _, wait in results if wait > WAITED_S]
    return {"samples_per_s": n / elapsed, "p50_s": statistics.median(latency for latency, _ in results),
            "p95_s": rows.p95([latency for latency, _ in results]), "waited": len(waits),
            "wait_p50_s": statistics.median(waits) if waits else None,
            "p95_waited_s": rows.p95([latency for latency, wait in results if wait > WAITED_S]),
            "p95_not_waited_s": rows.p95([latency for latency, wait in results if wait <= WAITED_S])}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--env", default="coin_change")
    parser.add_argument("-n", type=int, default=96, help="samples per row and round")
    parser.add_argument("--parallel", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()

    def seconds(value: float | None) -> str:
        return "-" if value is None else f"{value:.3f}"

    print(f"{args.env}, parallel {args.parallel}, {args.n} samples per row; load average {os.getloadavg()[0]:.1f}")
    print(f"{'prewarm':8} {'samples/s':>9} {'p50 s':>7} {'p95 s':>7} {'waited':>7} {'wait p50':>9} "
          f"{'p95 waited':>11} {'p95 others':>11}")
    for _ in range(args.rounds):
        for prewarm in (True, False):
            r = one_round(args.env, args.n, args.parallel, prewarm)
            print(f"{'on' if prewarm else 'off':8} {r['samples_per_s']:9.2f} {seconds(r['p50_s']):>7} "
                  f"{seconds(r['p95_s']):>7} {r['waited']:>7} {seconds(r['wait_p50_s']):>9} "
                  f"{seconds(r['p95_waited_s']):>11} {seconds(r['p95_not_waited_s']):>11}")
    print(f"load average {os.getloadavg()[0]:.1f} at the end")


if __name__ == "__main__":
    main()
