"""What canaries cost: one check of an image (its reference and a known-wrong answer; 8 tiny rows for the
generic row image) against the samples judged between two checks at the default schedule.

    python benchmarks/canaries.py                      # coin_change and the row image, 64 samples each
    python benchmarks/canaries.py --envs two_sum -n 200

For each image, a client with canaries on judges N samples (half its reference, half a known-wrong answer; a
row's right and wrong answers), in parallel as training would. It reports the first check's cost (paid once per
image and process), the samples' judging time (the batch's wall clock, and per sample), and the share one
check costs at the default schedule: check / (check + every_samples x the judging time per sample). The
budget rule (``CanaryPolicy.budget``) caps the time-based checks at that share too. Prints one JSON object.
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


def measure(gym: DeepGym, name: str, samples: int) -> dict[str, float | str]:
    """One image's first check and N samples' judging time."""
    if name == "rows":
        task = row_task("mbpp", {"test_list": ["assert add(2, 3) == 5"]})
        canaries = canaries_for(task.environment)
        answers = [canaries[6].answer, canaries[7].answer]
    else:
        task = load_environment(name)
        solutions = task.solutions()
        answers = [fenced(task, solutions[n].read_text()) for n in ("reference", sorted(s for s in solutions if s.startswith("wrong_"))[0])]
    spent = gym.canaries.spent_s
    first = gym.judge(task, answers[0])  # the image's first use: its check runs before this sample
    check_s = gym.canaries.spent_s - spent
    started = time.monotonic()
    batch = gym.run_batch(task, [answers[i % 2] for i in range(samples)])
    batch_s = time.monotonic() - started
    assert first.has_verdict and batch.no_verdict == 0, batch.counts()
    per_sample = batch_s / samples
    every = CanaryPolicy().every_samples
    return {"image": name, "check_s": round(check_s, 3), "samples": samples, "batch_s": round(batch_s, 2),
            "per_sample_s": round(per_sample, 4),
            "share_at_default": round(check_s / (check_s + every * per_sample), 5)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--envs", nargs="+", default=["coin_change", "rows"], help="environments; rows: the row image")
    parser.add_argument("-n", "--samples", type=int, default=64)
    args = parser.parse_args()
    with DeepGym("docker", canaries=CanaryPolicy()) as gym:
        rows = [measure(gym, name, args.samples) for name in args.envs]
    print(json.dumps({"cpus": os.cpu_count(), "load_1m": round(os.getloadavg()[0], 2), "every_samples":
                      CanaryPolicy().every_samples, "results": rows}, indent=2))


if __name__ == "__main__":
    main()
