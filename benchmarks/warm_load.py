"""Warm mode under load from outside deepgym: does any sample lose its verdict, or get a wrong one?

    python benchmarks/warm_load.py                           # 16 busy loops, engine churn, 3 rounds of 64
    python benchmarks/warm_load.py --busy 24 --parallel 4    # heavier

Outside deepgym, ``--busy`` processes spin on the CPU and, unless ``--no-churn``, a loop starts and removes a
throwaway container of the base image over and over (the engine's work another client would cause). Meanwhile
one client judges coin_change in warm mode (``isolation="process"``), half right answers and half busy loops,
``--rounds`` times ``--samples``. Every right answer must score 1 and every busy loop ``solution_timeout``.
A no-verdict is printed with its reason: the contract allows ``host_overloaded`` (the runner found the sample
starved of CPU) and infrastructure failures, never a retired container. The exit status is 1 when any verdict
was wrong.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from collections import Counter

from deepgym import DeepGym, load_environment
from deepgym.images import image_name

ENV = "coin_change"
BUSY = "```python\ndef coin_change(coins, amount):\n    while True:\n        pass\n```\n"
CHURN = "while :; do docker run --rm --label deepgym-warm-load=1 --entrypoint true {image} >/dev/null 2>&1; done"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--busy", type=int, default=16, help="busy loops outside deepgym (%(default)s)")
    parser.add_argument("--no-churn", action="store_true", help="no container churn on the engine")
    parser.add_argument("--parallel", type=int, default=2, help="the client's max_parallel (%(default)s)")
    parser.add_argument("--samples", type=int, default=64, help="samples per round, half right (%(default)s)")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    right = f"```python\n{load_environment(ENV).solutions()['reference'].read_text()}\n```\n"
    load = [subprocess.Popen(["sh", "-c", "while :; do :; done"]) for _ in range(args.busy)]
    if not args.no_churn:
        load.append(subprocess.Popen(["sh", "-c", CHURN.format(image=image_name("base"))]))
    wrong = 0
    try:
        time.sleep(2)
        print(f"load average {os.getloadavg()[0]:.1f} with {args.busy} busy loops"
              f"{'' if args.no_churn else ' and container churn'}; parallel {args.parallel}", flush=True)
        with DeepGym("docker", max_parallel=args.parallel) as gym:
            for round_ in range(args.rounds):
                responses = [right, BUSY] * (args.samples // 2)
                started = time.monotonic()
                verdicts = gym.run_batch(ENV, responses, isolation="process")
                seen: Counter = Counter()
                for response, verdict in zip(responses, verdicts):
                    kind = "right" if response is right else "busy"
                    outcome = (verdict.error_type or verdict.score) if verdict.has_verdict else "no verdict"
                    seen[f"{kind}: {outcome}"] += 1
                    if not verdict.has_verdict:
                        print(f"  no verdict ({verdict.error_type}): {verdict.reason[:400]}", flush=True)
                    elif (kind == "right") != (verdict.score == 1.0) or \
                            (kind == "busy" and verdict.error_type != "solution_timeout"):
                        wrong += 1
                print(f"round {round_ + 1}: {dict(sorted(seen.items()))} in {time.monotonic() - started:.1f} s, "
                      f"load average {os.getloadavg()[0]:.1f}", flush=True)
    finally:
        for process in load:
            process.kill()
            process.wait()
        subprocess.run(["sh", "-c", "docker rm -f $(docker ps -aq --filter label=deepgym-warm-load=1) 2>/dev/null"],
                       capture_output=True)
    print(f"wrong verdicts: {wrong}")
    return 1 if wrong else 0


if __name__ == "__main__":
    sys.exit(main())
