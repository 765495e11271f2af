"""What canaries cost: one check of an image (its reference and a known-wrong answer; 8 tiny rows for the
generic row image) against the samples judged between two checks at the default schedule.

    python benchmarks/canaries.py                      # coin_change and the row image, 64 samples each
    python benchmarks/canaries.py --envs two_sum -n 200

For each image, a client with canaries on judges N samples (half its reference, half a known-wrong answer; a
row's right and wrong answers), in parallel as training would, with a check every N/2 samples. Every time is
slot time: how long a sandbox ran once admitted (``timings.total_s``), canaries and samples alike, since a
check takes admission slots from the samples one canary at a time. It reports the first check (paid once per
image and process, its sandboxes started cold), a periodic check, a sample, and the share a periodic check
takes at the default schedule: check / (check + every_samples x sample). The budget rule
(``CanaryPolicy.budget``) also holds every periodic check to 1 % of the judging time since the last.
Prints one JSON object.
"""

from __future__ import annotations

import argparse
import json
import os
import time

from deepgym import DeepGym
from deepgym.canary import CanaryPolicy, canaries_for, fenced
from deepgym.environments import load_environment
from deepgym.rows import row_task


def measure(name: str, samples: int) -> dict[str, float | str]:
    """One image's first check, its periodic checks during N samples (one every N/2), and the samples."""
    if name == "rows":
        task = row_task("mbpp", {"test_list": ["assert add(2, 3) == 5"]})
        env = task.environment
        answers = [canaries_for(env)[6].answer, canaries_for(env)[7].answer]
    else:
        task = env = load_environment(name)
        solutions = task.solutions()
        wrong = sorted(s for s in solutions if s.startswith("wrong_"))[0]
        answers = [fenced(task, solutions[n].read_text()) for n in ("reference", wrong)]
    with DeepGym("docker", canaries=CanaryPolicy(every_samples=samples // 2, budget=1.0)) as gym:
        slot_s: list[float] = []
        judge = gym.canaries._judge

        def timed(canary, admission):  # each canary's time once admitted: the slot time it takes
            outcome = judge(canary, admission)
            slot_s.append(outcome.timings.get("total_s", 0.0) if outcome.has_verdict else 0.0)
            return outcome

        gym.canaries._judge = timed
        first = gym.judge(task, answers[0])  # the image's first use: its check runs before this sample
        first_s, slot_s[:] = sum(slot_s), []
        checks = gym.canaries.checks
        started = time.monotonic()
        batch = gym.run_batch(task, [answers[i % 2] for i in range(samples)])
        batch_s = time.monotonic() - started
        periodic = gym.canaries.checks - checks
    assert first.has_verdict and batch.no_verdict == 0 and periodic, (batch.counts(), periodic)
    latency = sum(verdict.timings["total_s"] for verdict in batch) / samples
    check_s = sum(slot_s) / periodic
    every = CanaryPolicy().every_samples
    return {"image": name, "canaries": len(canaries_for(env)), "first_check_s": round(first_s, 3),
            "periodic_checks": periodic, "periodic_check_s": round(check_s, 3), "samples": samples,
            "batch_s": round(batch_s, 2), "sample_s": round(latency, 4),
            "share_at_default": round(check_s / (check_s + every * latency), 5)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--envs", nargs="+", default=["coin_change", "rows"], help="environments; rows: the row image")
    parser.add_argument("-n", "--samples", type=int, default=64)
    args = parser.parse_args()
    rows = [measure(name, args.samples) for name in args.envs]
    print(json.dumps({"cpus": os.cpu_count(), "load_1m": round(os.getloadavg()[0], 2), "every_samples":
                      CanaryPolicy().every_samples, "results": rows}, indent=2))


if __name__ == "__main__":
    main()
