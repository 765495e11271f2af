"""Multi-turn sessions: what an episode costs on this machine.

    python benchmarks/sessions.py                              # shell_organise_files, 16 episodes
    python benchmarks/sessions.py --env shell_repair_script -n 32 --parallel 4

Measures, each as p50 and p95, for both action channels of a shell episode in one run: a fresh ``bash -c``
per action (an exec each), and the persistent terminal (``session.terminal: persistent``: one shell, one
stream open for the episode):

- start: ``Session.start()`` up to the first observation (a fresh container, the workspace copied in; for
  the terminal, its shell at its first prompt too);
- action overhead: a shell action's wall time beyond its command's own (``true``, which takes about a
  millisecond inside; and ``sleep 0.2`` minus its 0.2 s);
- verification: ``Session.score()``, the agent's processes killed and proved quiet, probes, the verifier;
- and episodes per second running the reference sequence at the client's default concurrency.

Every reference episode must score 1.0, so a fast but wrong run cannot pass for a good one.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import statistics
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from throughput import machine  # noqa: E402

from deepgym import DeepGym, load_environment  # noqa: E402
from deepgym.environments import Environment  # noqa: E402
from deepgym.images import build  # noqa: E402
from deepgym.authoring.replay import action_sequences  # noqa: E402

OVERHEAD_ACTIONS = (("true", 0.0), ("sleep 0.2", 0.2))


def quantiles(values: list[float]) -> str:
    ordered = sorted(values)
    p95 = ordered[int(0.95 * (len(ordered) - 1))]
    return f"p50 {statistics.median(ordered) * 1000:7.1f} ms   p95 {p95 * 1000:7.1f} ms"


def channel(name: str, terminal: str) -> Environment:
    """The environment with its shell actions on ``terminal`` (``fresh`` or ``persistent``)."""
    env = load_environment(name)
    return dataclasses.replace(env, session=dataclasses.replace(env.session, terminal=terminal))


def costs(gym: DeepGym, env: Environment, episodes: int) -> dict[str, list[float]]:
    """One episode at a time: start, per-action overhead, verification."""
    actions = action_sequences(env, "reference")[0]
    found: dict[str, list[float]] = {"start": [], "true": [], "sleep 0.2": [], "verify": []}
    for _ in range(episodes):
        with gym.session(env) as session:
            started = time.perf_counter()
            session.start()
            found["start"].append(time.perf_counter() - started)
            for action, own in OVERHEAD_ACTIONS:
                for _ in range(3):
                    started = time.perf_counter()
                    if session.step(action).done:
                        raise SystemExit(f"the episode ended early: {session.outcome}")
                    found[action].append(time.perf_counter() - started - own)
            for action in actions:
                session.step(action)
            started = time.perf_counter()
            verdict = session.score()
            found["verify"].append(time.perf_counter() - started)
            if verdict.score != 1.0:
                raise SystemExit(f"the reference scored {verdict.score}: {verdict.details}")
    return found


def throughput(gym: DeepGym, env: Environment, episodes: int) -> float:
    actions = action_sequences(env, "reference")[0]

    def episode(_: int) -> float:
        with gym.session(env) as session:
            session.start()
            for action in actions:
                session.step(action)
            return session.score().score

    started = time.perf_counter()
    with ThreadPoolExecutor(max_workers=gym.max_parallel) as pool:
        scores = list(pool.map(episode, range(episodes)))
    elapsed = time.perf_counter() - started
    if any(score != 1.0 for score in scores):
        raise SystemExit(f"a reference episode scored below 1.0: {scores}")
    return episodes / elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--env", default="shell_organise_files")
    parser.add_argument("-n", type=int, default=16, help="episodes per measurement (default: %(default)s)")
    parser.add_argument("--parallel", type=int, default=None, help="concurrent episodes (default: the client's)")
    args = parser.parse_args()
    build([args.env])
    with DeepGym(mode="docker", max_parallel=args.parallel) as gym:
        print(f"machine: {machine()}")
        print(f"environment: {args.env}, {args.n} episodes, concurrency {gym.max_parallel}, load average "
              f"{os.getloadavg()[0]:.1f} at the start\n")
        steps = len(action_sequences(load_environment(args.env), "reference")[0])
        for terminal in ("fresh", "persistent"):
            env = channel(args.env, terminal)
            found = costs(gym, env, max(2, args.n // 2))
            print(f"{terminal} shell:")
            print(f"  start to first observation    {quantiles(found['start'])}")
            print(f"  overhead per action (true)    {quantiles(found['true'])}")
            print(f"  overhead per action (sleep)   {quantiles(found['sleep 0.2'])}")
            print(f"  final verification            {quantiles(found['verify'])}")
            print(f"  episodes/s (reference, {steps} actions) {throughput(gym, env, args.n):.2f}")


if __name__ == "__main__":
    main()
