"""Desktop episodes: how fast a screen comes back.

    python benchmarks/desktop.py [--episodes 5] [--environment signup_form]

Reports, each over ``--episodes`` episodes of the reference sequence on real containers of the desktop image:

- cold start to the first screenshot: ``start()`` with prewarming off (create, the supervisor starting the
  display, recorder, action daemon and browser, the app rendering the variant, the first settled screen);
- prewarmed start to the first screenshot: ``start()`` taking a ready container from the pool;
- per action: the host's round trip, and inside it the daemon's time to act, to wait for the screen to settle
  (no change for 120 ms, capped at 3 s) and to encode the PNG; the PNG's size;
- memory of one ready desktop container (the engine's figure for its cgroup).

The goals: first screenshot under 3 s cold and 0.5 s prewarmed; under 150 ms per action plus the settle time.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import time

from deepgym import DeepGym
from deepgym.environments import load_environment
from deepgym.authoring.replay import action_sequences


def percentiles(values: list[float]) -> str:
    ordered = sorted(values)
    p95 = ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]
    return f"p50 {statistics.median(ordered):8.1f}   p95 {p95:8.1f}   (n={len(ordered)})"


def episode(gym: DeepGym, env_id: str, variant: int) -> tuple[float, list[dict], float]:
    actions = action_sequences(load_environment(env_id), "reference")[variant]
    with gym.session(env_id, variant) as session:
        started = time.monotonic()
        session.start()
        first = time.monotonic() - started
        for action in actions:
            session.step(action)
        score = session.score().score
    return first, session.action_timings, score


def container_memory_mib(gym: DeepGym, env_id: str) -> float:
    """The memory of the busiest container of this client's run (labelled with its run id) while an episode
    is open: the episode's desktop, or a ready one beside it, which holds the same programs."""
    with gym.session(env_id, 0) as session:
        session.start()
        containers = subprocess.run(["docker", "ps", "-q", "--filter", f"label=deepgym={gym.provider.run_id}"],
                                    capture_output=True, text=True, check=True).stdout.split()
        usages = subprocess.run(["docker", "stats", "--no-stream", "--format", "{{.MemUsage}}", *containers],
                                capture_output=True, text=True, check=True).stdout.splitlines()
    return max(_mib(usage.split("/")[0].strip()) for usage in usages)


def _mib(used: str) -> float:
    number = float(used.rstrip("KMGiB"))
    return number / 1024 if used.endswith("KiB") else number * 1024 if used.endswith("GiB") else number


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--episodes", type=int, default=5)
    parser.add_argument("--environment", default="signup_form")
    args = parser.parse_args()
    print(f"load average at start: {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")

    os.environ["DEEPGYM_DESKTOP_PREWARM"] = "0"
    with DeepGym(mode="docker") as gym:
        cold = [episode(gym, args.environment, n % 8) for n in range(args.episodes)]
        memory = container_memory_mib(gym, args.environment)
    os.environ["DEEPGYM_DESKTOP_PREWARM"] = "1"
    warm = []
    with DeepGym(mode="docker") as gym:
        episode(gym, args.environment, 0)  # fills the pool
        for n in range(args.episodes):
            ready = gym._ready_desktops()
            give_up = time.monotonic() + 60
            while time.monotonic() < give_up and not any(ready.waiting().values()):
                time.sleep(0.05)
            warm.append(episode(gym, args.environment, n % 8))
    assert all(score == 1.0 for _, _, score in cold + warm), "a reference episode did not score 1.0"
    actions = [timing for _, timings, _ in cold + warm for timing in timings]
    print(f"cold start to first screenshot (ms):       {percentiles([1000 * first for first, _, _ in cold])}")
    print(f"prewarmed start to first screenshot (ms):  {percentiles([1000 * first for first, _, _ in warm])}")
    print(f"action round trip (ms):                    {percentiles([1000 * t['round_trip_s'] for t in actions])}")
    print(f"  settle wait (ms):                        {percentiles([t['settle_ms'] for t in actions])}")
    print(f"  round trip minus settle (ms):            "
          f"{percentiles([1000 * t['round_trip_s'] - t['settle_ms'] for t in actions])}")
    print(f"  act (ms):                                {percentiles([t['act_ms'] for t in actions])}")
    print(f"  PNG encode (ms):                         {percentiles([t['png_ms'] for t in actions])}")
    print(f"PNG size (KiB):                            {percentiles([t['png_bytes'] / 1024 for t in actions])}")
    print(f"memory of one ready desktop container:     {memory:.0f} MiB")


if __name__ == "__main__":
    main()
