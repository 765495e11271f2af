"""Soak: many samples through one long-lived client, then what it got wrong and what it left behind.

    python benchmarks/soak.py                                  # 10,000 samples and 200 shell episodes
    python benchmarks/soak.py --samples 1500 --episodes 40     # a shorter run on a busy machine

The samples mix right answers (each environment's reference), wrong ones (its ``solutions/wrong_*``) and the
hostile suite's submissions (tests/hostile/attacks.py, but those that wait for the host's deadline), across a
function, a program and a patch environment, half in strict mode (a fresh container each) and half in warm
mode (``isolation="process"``). Shell episodes play their environment's reference actions, interleaved.

It reports, as a Markdown table:

- wrong verdicts: a right answer not scored 1, a wrong or hostile one not scored 0 (must be 0); samples with no
  verdict are counted apart, by cause: they are the infrastructure's, never a wrong score;
- leaks, after the client closed: deepgym containers of this run, processes of the submissions' uids on the
  host outside containers, uids in use there, deepgym's files in /tmp, Docker volumes and networks made during
  the run, and admission slots (flock locks) this process still holds: each must be 0;
- the client's and the engine's (dockerd, containerd) memory and open files after the first 100 jobs (once the
  client's connections and warm containers exist) and at the end, with their slope per 1,000 jobs (a
  least-squares fit over a reading every 100 jobs), where a leak would show.

The engine is shared with whatever else runs on the host, so its figures include their load; volumes and
networks count only those created while the soak ran.
"""

from __future__ import annotations

import argparse
import os
import random
import subprocess
import sys
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(ROOT / "tests" / "hostile"))

from attacks import ATTACKS  # noqa: E402
from throughput import machine  # noqa: E402

from deepgym import DeepGym, load_environment  # noqa: E402
from deepgym.authoring.check import as_response  # noqa: E402
from deepgym.authoring.replay import action_sequences  # noqa: E402
from deepgym.images import build  # noqa: E402
from deepgym.outcome import NoVerdictError  # noqa: E402

ENVS = ("coin_change", "prog_max_subarray", "patch_csv_quoting")
SHELL_ENV = "shell_organise_files"
SUBMISSION_UIDS = range(10000, 10100)  # the runner's submission users
SAMPLE_EVERY = 100  # resource readings, in samples


@dataclass(frozen=True)
class Job:
    env: str
    response: str
    expected: float
    kind: str  # right, wrong, hostile, episode
    isolation: str


def jobs(samples: int, episodes: int, seed: int) -> list[Job]:
    """The run's samples and episodes, shuffled with ``seed``: right, wrong and hostile in 2:2:1, each
    alternately strict and warm."""
    chooser = random.Random(seed)
    answers = {}
    for name in ENVS:
        env = load_environment(name)
        solutions = env.solutions()
        answers[name] = ([as_response(env, solutions["reference"].read_text())],
                         [as_response(env, path.read_text()) for key, path in sorted(solutions.items())
                          if key.startswith("wrong_")])
    hostile = [attack for attack in ATTACKS if not attack.slow and not attack.known_breach]
    made = []
    for index in range(samples):
        isolation = "container" if index % 2 == 0 else "process"
        kind = chooser.choice(["right", "right", "wrong", "wrong", "hostile"])
        if kind == "hostile":
            attack = chooser.choice(hostile)
            made.append(Job(attack.env, attack.response, 0.0, kind, isolation))
        else:
            env = chooser.choice(ENVS)
            right, wrong = answers[env]
            made.append(Job(env, chooser.choice(right if kind == "right" else wrong), 1.0 if kind == "right" else 0.0,
                            kind, isolation))
    made += [Job(SHELL_ENV, "", 1.0, "episode", "container") for _ in range(episodes)]
    chooser.shuffle(made)
    return made


def episode(gym: DeepGym, actions: list[str]) -> object:
    """The episode's outcome: its verdict, or the no verdict its start, a step or its scoring raised."""
    with gym.session(SHELL_ENV) as session:
        try:
            session.start()
            for action in actions:
                if session.step(action).done:  # a failure ended it: score() says how
                    break
            return session.score()
        except NoVerdictError as exc:
            return exc


def pid_of(pidfile: str, name: str) -> int | None:
    try:
        return int(Path(pidfile).read_text())
    except (OSError, ValueError):
        found = subprocess.run(["pgrep", "-o", "-x", name], capture_output=True, text=True).stdout.split()
        return int(found[0]) if found else None


def usage(pid: int | None) -> tuple[float, int]:
    """(resident memory in MiB, open files) of ``pid``."""
    if pid is None:
        return float("nan"), -1
    status = Path(f"/proc/{pid}/status").read_text()
    rss = int(next(line.split()[1] for line in status.splitlines() if line.startswith("VmRSS:"))) / 1024
    return rss, len(os.listdir(f"/proc/{pid}/fd"))


def host_processes() -> tuple[int, set[int]]:
    """(processes of the submissions' uids outside containers, every uid with a process outside containers), in
    this host's pid namespace (local mode's submissions, of other runs, each start one of their own)."""
    count, uids = 0, set()
    ours = os.readlink("/proc/self/ns/pid")
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            uid = entry.stat().st_uid
            if "docker" in (entry / "cgroup").read_text() or os.readlink(entry / "ns" / "pid") != ours:
                continue
        except OSError:
            continue
        uids.add(uid)
        count += uid in SUBMISSION_UIDS
    return count, uids


def docker_ids(*argv: str) -> set[str]:
    return set(subprocess.run(["docker", *argv, "-q"], capture_output=True, text=True).stdout.split())


def tmp_files() -> set[str]:
    return {entry.name for entry in Path("/tmp").iterdir()
            if entry.name.startswith("deepgym") and entry.name != "deepgym-admission"}


def held_locks() -> int:
    """flock locks this process holds (/proc/locks lists each with its holder's pid)."""
    return sum(1 for line in Path("/proc/locks").read_text().splitlines()
               if "FLOCK" in line and line.split()[4] == str(os.getpid()))


def slope(points: list[tuple[int, float]]) -> float:
    """Least-squares slope of value over jobs, per 1,000 jobs."""
    if len(points) < 2:
        return 0.0
    mean_x = sum(x for x, _ in points) / len(points)
    mean_y = sum(y for _, y in points) / len(points)
    spread = sum((x - mean_x) ** 2 for x, _ in points)
    return 1000 * sum((x - mean_x) * (y - mean_y) for x, y in points) / spread if spread else 0.0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--samples", type=int, default=10_000, help="single-turn samples (%(default)s)")
    parser.add_argument("--episodes", type=int, default=200, help="shell episodes (%(default)s)")
    parser.add_argument("--parallel", type=int, default=None, help="samples at once (default: the client's)")
    parser.add_argument("--seed", type=int, default=28)
    args = parser.parse_args()
    build(sorted({*ENVS, SHELL_ENV, *(attack.env for attack in ATTACKS)}))
    todo = jobs(args.samples, args.episodes, args.seed)
    actions = action_sequences(load_environment(SHELL_ENV), "reference")[0]
    engine = {"dockerd": ("/var/run/dockerd-deepgym.pid", "dockerd"),
              "containerd": ("/var/run/docker/containerd/containerd.pid", "containerd")}
    engine_pids: set[int | None] = set()
    print(f"machine: {machine()}\nsamples: {args.samples}, episodes: {args.episodes}\n", flush=True)
    before = (host_processes(), docker_ids("volume", "ls"), docker_ids("network", "ls"), tmp_files())
    readings: dict[str, list[tuple[int, float]]] = {}
    wrong: list[str] = []
    no_verdict: Counter[str] = Counter()
    kinds: Counter[str] = Counter()
    started = time.monotonic()

    def read(done: int) -> None:
        """One reading of each process; the engine's looked up each time (whoever restarts it changes its pid)."""
        pids = {who: pid_of(*where) for who, where in engine.items()}
        engine_pids.add(pids["dockerd"])
        for who, pid in [("client", os.getpid()), *pids.items()]:
            try:
                rss, files = usage(pid)
            except (OSError, StopIteration):  # it ended just now
                continue
            readings.setdefault(f"{who} memory (MiB)", []).append((done, rss))
            readings.setdefault(f"{who} open files", []).append((done, files))

    with DeepGym(mode="docker", max_parallel=args.parallel) as gym:
        def judge(job: Job) -> tuple[Job, object]:
            if job.kind == "episode":
                return job, episode(gym, actions)
            return job, gym.judge(job.env, job.response, isolation=job.isolation)

        with ThreadPoolExecutor(max_workers=gym.max_parallel) as pool:
            for done, (job, outcome) in enumerate(pool.map(judge, todo), 1):
                kinds[f"{job.kind} ({job.isolation})" if job.kind != "episode" else "episode"] += 1
                if not outcome.has_verdict:
                    no_verdict[outcome.error_type] += 1
                elif outcome.score != job.expected:
                    wrong.append(f"{job.kind} {job.env} {job.isolation}: {outcome.score} ({outcome.error_type})")
                if done % SAMPLE_EVERY == 0:
                    read(done)
                    print(f"  {done}/{len(todo)} in {time.monotonic() - started:.0f} s", flush=True)
        if len(todo) % SAMPLE_EVERY:
            read(len(todo))
        run_id = gym.provider.run_id
    elapsed = time.monotonic() - started
    (processes, uids), volumes, networks, files = host_processes(), docker_ids("volume", "ls"), \
        docker_ids("network", "ls"), tmp_files()
    leaks = {
        "containers of this run": len(docker_ids("ps", "-a", "--filter", f"label=deepgym={run_id}")),
        "submission processes on the host": processes,
        "uids in use on the host (new)": len(uids - before[0][1]),
        "deepgym files in /tmp (new)": len(files - before[3]),
        "Docker volumes (new)": len(volumes - before[1]),
        "Docker networks (new)": len(networks - before[2]),
        "admission slots still held": held_locks(),
    }
    if len(engine_pids) > 1:
        print(f"\nthe engine was restarted during the run (dockerd pids {sorted(map(str, engine_pids))}): its "
              f"figures span the restarts")
    print(f"\n{len(todo)} jobs in {elapsed:.0f} s ({len(todo) / elapsed:.1f}/s), load average "
          f"{os.getloadavg()[0]:.1f} at the end; mix: {dict(sorted(kinds.items()))}\n")
    print("| check | result |\n|---|---|")
    print(f"| wrong verdicts | {len(wrong)} |")
    print(f"| no verdict (infrastructure) | {sum(no_verdict.values())} {dict(no_verdict) or ''} |")
    for what, count in leaks.items():
        print(f"| leaked: {what} | {count} |")
    print("\n| resource | after 100 jobs | end | slope per 1,000 jobs |\n|---|---|---|---|")
    for what, points in readings.items():
        print(f"| {what} | {points[0][1]:.0f} | {points[-1][1]:.0f} | {slope(points):+.2f} |")
    for line in wrong[:20]:
        print(f"wrong: {line}")
    return 1 if wrong or any(leaks.values()) else 0


if __name__ == "__main__":
    sys.exit(main())
