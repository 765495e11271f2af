"""Row tests: deepgym against verl's own prime_code reward on a CodeContests-shaped batch, in one run.

    python benchmarks/datasets.py                      # 32 samples, 40 cases of ~8 KB each, parallel 2
    python benchmarks/datasets.py -n 64 --cases 100 --parallel 2 4

Half the responses are right and half are wrong (they fail every third case, from the third on), as a training
batch is. Each reward judges the same rows with the same parallelism (prime_code from a thread pool, as verl's
reward workers call it): deepgym all-or-nothing (its default, which stops at the first failing case), deepgym
with verl's ``continuous`` scoring, and verl's ``default_compute_score`` (prime_code, ``continuous=True``).
Every score is checked against the expected one, so a fast wrong run cannot pass. The last line per
parallelism gives each deepgym reward's samples/s as a multiple of prime_code's.

CPU per sample is the whole machine's busy CPU time over the run (/proc/stat) divided by the samples: it
counts the engine, the containers and prime_code's forked processes alike, and anything else running on the
machine, so run it on a quiet machine. prime_code runs the submission in the trainer's own process tree with
no isolation (no filesystem, network or process limits, no memory limit) and has no no-verdict outcome.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Callable

RIGHT = """import sys
def main():
    data = sys.stdin.read().split()
    n = int(data[0])
    xs = list(map(int, data[1:1 + n]))
    best = cur = xs[0]
    for x in xs[1:]:
        cur = max(x, cur + x)
        best = max(best, cur)
    print(sum(xs), best)
main()
"""
# Ignores negative subarray sums: wrong on the cases whose numbers are all negative (every third).
WRONG = RIGHT.replace("cur = max(x, cur + x)", "cur = max(0, cur + x)").replace("best = cur = xs[0]",
                                                                                  "best = cur = max(0, xs[0])")


def ground_truth(cases: int, numbers: int, seed: int = 7) -> str:
    rng = random.Random(seed)
    inputs, outputs = [], []
    for index in range(cases):
        negative = index % 3 == 2
        xs = [rng.randint(-10**6, -1) if negative else rng.randint(-10**6, 10**6) for _ in range(numbers)]
        best = cur = xs[0]
        for x in xs[1:]:
            cur = max(x, cur + x)
            best = max(best, cur)
        inputs.append(f"{numbers}\n{' '.join(map(str, xs))}\n")
        outputs.append(f"{sum(xs)} {best}\n")
    return json.dumps({"inputs": inputs, "outputs": outputs})


def busy_cpu_s() -> float:
    """The machine's busy CPU seconds so far (all CPUs; user, nice, system, irq, softirq, steal)."""
    with open("/proc/stat") as f:
        fields = [int(v) for v in f.readline().split()[1:]]
    return (sum(fields[:3]) + sum(fields[5:8])) / os.sysconf("SC_CLK_TCK")


def measure(name: str, score: Callable[[str], float], samples: list[tuple[str, float]], parallel: int) -> dict:
    score(samples[0][0])  # warm-up
    cpu0, started = busy_cpu_s(), time.perf_counter()
    with ThreadPoolExecutor(max_workers=parallel) as pool:
        scores = list(pool.map(lambda sample: score(sample[0]), samples))
    wall, cpu = time.perf_counter() - started, busy_cpu_s() - cpu0
    wrong = sum(1 for got, (_, want) in zip(scores, samples) if abs(got - want) > 1e-9)
    return {"reward": name, "parallel": parallel, "samples": len(samples), "samples_per_s": round(len(samples) / wall, 2),
            "cpu_s_per_sample": round(cpu / len(samples), 3), "wrong_scores": wrong}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("-n", type=int, default=32, help="samples (default 32)")
    parser.add_argument("--cases", type=int, default=40, help="test cases per row (default 40)")
    parser.add_argument("--numbers", type=int, default=1000, help="numbers per case input (default 1000: ~8 KB)")
    parser.add_argument("--parallel", type=int, nargs="+", default=[2])
    args = parser.parse_args()

    from verl.utils.reward_score import default_compute_score

    from deepgym.images import build
    from deepgym.integrations.verl import compute_score

    build(["row_python"])
    truth = ground_truth(args.cases, args.numbers)
    first_ten = min(10, args.cases)
    first_ten_right = sum(1 for index in range(first_ten) if index % 3 != 2) / first_ten
    samples = [(f"```python\n{RIGHT if i % 2 == 0 else WRONG}```", 1.0 if i % 2 == 0 else 0.0) for i in range(args.n)]
    continuous = [(response, want if want == 1.0 else first_ten_right) for response, want in samples]
    print(f"machine: {platform.node()}, {os.cpu_count()} CPUs, load {os.getloadavg()[0]:.1f}; row: {args.cases} "
          f"cases, {len(truth) / 1e6:.2f} MB of test data")
    for parallel in args.parallel:
        rows = []
        for name, score, expected in (
            ("deepgym (all_or_nothing)", lambda r: compute_score("codecontests", r, truth, {}, mode="docker")["score"],
             samples),
            ("deepgym (continuous)", lambda r: compute_score("codecontests", r, truth, {}, mode="docker",
                                                             scoring="continuous")["score"], continuous),
            ("verl prime_code (continuous)", lambda r: float(default_compute_score("codecontests", r, truth)),
             continuous),
        ):
            rows.append(measure(name, score, expected, parallel))
            print(json.dumps(rows[-1]))
        prime = rows[-1]["samples_per_s"]
        print(json.dumps({"parallel": parallel, "x_prime_code": {row["reward"]: round(row["samples_per_s"] / prime, 2)
                                                                 for row in rows[:-1]}}))


if __name__ == "__main__":
    main()
