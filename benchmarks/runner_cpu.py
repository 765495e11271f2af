"""CPU milliseconds spent inside the container per sample: the runner's own cost, apart from the engine's.

    python benchmarks/runner_cpu.py                 # coin_change right and wrong, prog_max_subarray right; 9 each
    python benchmarks/runner_cpu.py -n 21 --envs coin_change
    python benchmarks/runner_cpu.py --envs row_stdin row_assert   # floors.py's stdin row, an MBPP-shaped row

Samples/s on a shared 2-core machine move with every other process; the CPU time a container's cgroup charges
moves far less, so this is the figure to watch while changing the in-image runner. Each line is the median
over N samples of the container's cgroup CPU (user and system, every process in it: the runner, the
submission's workers and zygotes):

- ``strict``: the one-shot runner in a fresh container of the environment's image, with the settings of a
  real sandbox (:func:`deepgym.sandbox.docker.container_settings`); a shell in the container reads its cgroup's
  CPU counter before and after the runner (:data:`deepgym.sandbox.base.IMAGE_RUNNER`) judges the request on
  its stdin.
- ``warm``: one sample on a warm container's server (:class:`deepgym.sandbox.docker.warm.WarmPool`, the real pool),
  the container's cgroup read on this host around each sample (the first sample, which starts the server, is
  left out).
- ``python3 -c pass`` in the strict container: the floor of one interpreter start.
- ``bare verifier`` in the strict container (function and program environments): the bare verifier of
  benchmarks/floors.py on the right answer, every case in one interpreter (throughput.py's ``engine-bare``
  row); for a program environment also ``bare verifier, a process per case``, which forks a child per case as
  deepgym's case server does. The gap between the two is what running each case in a process of its own costs.

``--tags A B`` measures the images of two DEEPGYM_TAGs (two checkouts' runners, built beforehand) sample by
sample, round robin, so that a change in the host's load hits both alike.

Every verdict is checked (a right answer must score 1.0, a wrong one below): a fast wrong runner fails. Needs
the images built with this checkout's DEEPGYM_TAG (``deepgym images build coin_change prog_max_subarray``) and
a cgroup v1 or v2 hierarchy that the host can read for the warm rows.
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import floors  # noqa: E402  (benchmarks/, this script's folder)

from deepgym.environments import load_environment  # noqa: E402
from deepgym.authoring.check import as_response  # noqa: E402
from deepgym.environments import sandbox_spec  # noqa: E402
from deepgym.extract import submission  # noqa: E402
from deepgym.rows import row_task  # noqa: E402
from deepgym.judging import IMAGE_RUNNER, WARM_RUNNER, Images  # noqa: E402
from deepgym.runner.protocol import Request, parse_events  # noqa: E402
from deepgym.sandbox.base import IMAGE_PYTHON, ExecOptions  # noqa: E402
from deepgym.sandbox.docker import DockerProvider  # noqa: E402
from deepgym.sandbox.docker import key  # noqa: E402

# The container's own cgroup CPU counter in nanoseconds (v1 cpuacct, else v2 cpu.stat's microseconds), read by
# the shell's builtin ``read`` so that no extra process is charged between the two readings; then the
# command's exit status.
MEASURED = r"""
cpu() {
  if [ -r /sys/fs/cgroup/cpuacct/cpuacct.usage ]; then read ns < /sys/fs/cgroup/cpuacct/cpuacct.usage
  else while read key value; do [ "$key" = usage_usec ] && ns=$((value * 1000)); done < /sys/fs/cgroup/cpu.stat; fi
}
cpu; before=$ns; "$@"; status=$?; cpu
echo "@@cpu $((ns - before)) $status"
"""
# Where this host keeps a docker container's CPU counter (nanoseconds, or cpu.stat's usage_usec).
HOST_COUNTERS = ("/sys/fs/cgroup/cpuacct/docker/{id}/cpuacct.usage", "/sys/fs/cgroup/cpu,cpuacct/docker/{id}/cpuacct.usage",
                 "/sys/fs/cgroup/system.slice/docker-{id}.scope/cpu.stat", "/sys/fs/cgroup/docker/{id}/cpu.stat")


def host_counter_ns(container: str) -> int:
    """The container's cgroup CPU so far, read on this host."""
    for pattern in HOST_COUNTERS:
        path = Path(pattern.format(id=container))
        if path.exists():
            text = path.read_text()
            if path.name == "cpu.stat":
                return 1000 * int(dict(line.split() for line in text.splitlines())["usage_usec"])
            return int(text)
    raise SystemExit(f"cannot find container {container[:12]}'s cgroup on this host (looked at {HOST_COUNTERS}); "
                     "the warm rows need a readable cgroup hierarchy")


def request_for(env, code: str, tests: dict | None = None) -> Request:
    """The request the client would send for ``code`` (answered as a model would) on ``env``; for the dataset
    row, its ``tests`` (the code is then the submission as it is)."""
    answer = code if tests is not None else submission(env, as_response(env, code))
    return Request(nonce=secrets.token_hex(16), kind=env.kind, submission=answer, entry_point=env.entry_point,
                   scoring=env.scoring, limits=env.limits, tests=tests)


# An MBPP-shaped assert row: its tests run in a trusted process of their own, started fresh per sample.
ASSERT_ROW = "row_assert"
ASSERT_TESTS = {"test_list": ["assert add(1, 2) == 3", "assert add(3, 4) == 7", "assert add(-1, 1) == 0"]}
ASSERT_ANSWERS = [("right", "def add(a, b):\n    return a + b\n", True),
                  ("wrong", "def add(a, b):\n    return a - b\n", False)]


def samples_of(env_name: str) -> tuple[object, dict | None, list[tuple[str, str, bool]]]:
    """(environment, the row's tests or None, answers: label, code, is right) of ``env_name`` (an environment's
    name, :data:`floors.ROW` for the stdin row or :data:`ASSERT_ROW`)."""
    if env_name == floors.ROW:
        task = row_task(floors.ROW_SOURCE, floors.row_truth())
        return task.environment, task.tests, [("right", floors.RIGHT, True), ("wrong", floors.WRONG, False)]
    if env_name == ASSERT_ROW:
        task = row_task("mbpp", ASSERT_TESTS)
        return task.environment, task.tests, ASSERT_ANSWERS
    env = load_environment(env_name)
    found = env.solutions()
    wrong = sorted(name for name in found if name.startswith("wrong_"))
    answers = [("right", found["reference"].read_text(), True)]
    if wrong and env.kind == "function":
        answers.append(("wrong", found[wrong[0]].read_text(), False))
    return env, None, answers


def report_of(stdout: bytes, nonce: str) -> dict:
    reports = [event for event in parse_events(stdout, nonce) if event.get("event") == "report"]
    if len(reports) != 1:
        raise SystemExit(f"the runner wrote {len(reports)} reports:\n{stdout.decode(errors='replace')[-2000:]}")
    return reports[0]["report"]


def check(report: dict, right: bool, label: str) -> None:
    score = report.get("score")
    if report.get("outcome") != "scored" or (score == 1.0) != right:
        raise SystemExit(f"{label}: wrong verdict {json.dumps(report)[:1500]}")


def strict_ms(provider: DockerProvider, spec, argv: list[str], stdin: bytes) -> tuple[float, bytes]:
    """Container CPU ms of ``argv`` in a fresh sandbox container fed ``stdin``, and its stdout. ``argv`` must
    exit 0."""
    box = provider.start_attached(spec, ["/bin/sh", "-c", MEASURED, "measured", *argv], ExecOptions(timeout_s=0))
    try:
        result = provider.engine.finish_attached(box, ExecOptions(stdin=stdin, timeout_s=120), time.monotonic())
    finally:
        box.close()
    lines = [line.split() for line in result.stdout.splitlines() if line.startswith(b"@@cpu ")]
    if result.exit_code != 0 or len(lines) != 1 or lines[0][2] != b"0":
        raise SystemExit(f"the measured container failed ({result.exit_code}, {argv[:3]} {lines}): "
                         f"{result.stderr_tail}")
    return int(lines[0][1]) / 1e6, result.stdout


def image_of(provider: DockerProvider, env, tag: str | None) -> str:
    """The id of ``env``'s image with ``tag`` (None: this checkout's DEEPGYM_TAG). Another tag's image holds
    another checkout's runner, which the image's content hash counts: it is "stale" here, and allowed."""
    if tag is None:
        return Images().resolve(provider, env)[0]
    return Images(pinned={env.id: f"deepgym-{env.id}:{tag}"}, allow_stale_image=True).resolve(provider, env)[0]


def lines_for(provider: DockerProvider, env_name: str, rows: list[str], tags: list[str | None]):
    """(label, measure) for each line of ``env_name``: ``measure()`` judges one sample and returns its ms."""
    env, tests, answers = samples_of(env_name)
    for tag in tags:
        spec = sandbox_spec(env, image_of(provider, env, tag))
        named = f"{env_name}{'' if tag is None else ':' + tag}"
        if "strict" in rows:
            yield f"{named} python3 -c pass", lambda spec=spec: strict_ms(
                provider, spec, [*IMAGE_PYTHON, "-c", "pass"], b"")[0]
            if tests is None and floors.has_floor(env):  # the row's floor runs on the host only
                for per_case in (False, True) if env.kind == "program" else (False,):
                    argv = ["python3", *floors.bare_argv(env, answers[0][1], True, per_case)]
                    yield f"{named} bare verifier{', a process per case' if per_case else ''}", \
                        lambda spec=spec, argv=argv: strict_ms(provider, spec, argv, b"")[0]
        for label, code, right in answers:
            if "strict" in rows:
                def strict(spec=spec, code=code, right=right, label=f"{named} {label} strict") -> float:
                    request = request_for(env, code, tests)
                    ms, stdout = strict_ms(provider, spec, list(IMAGE_RUNNER), request.to_json().encode() + b"\n")
                    check(report_of(stdout, request.nonce), right, label)
                    return ms
                yield f"{named} {label} strict", strict
            if "warm" in rows:
                yield f"{named} {label} warm", warm_measure(provider, spec, lambda code=code: request_for(
                    env, code, tests), right, f"{named} {label} warm")


def warm_measure(provider: DockerProvider, spec, request_of, right: bool, label: str):
    """``measure()`` for one warm sample (``request_of()`` makes its request) in the pool's container of ``spec``
    (started by a first sample here)."""
    pool = provider.warm_pool()
    kind = key(spec, WARM_RUNNER, ExecOptions(timeout_s=0))

    def judged() -> None:
        request = request_of()
        result = pool.run(spec, WARM_RUNNER, request, request.limits.host_deadline_s)
        check(report_of(result.stdout, request.nonce), right, label)

    judged()

    def measure() -> float:
        idle = pool._idle.get(kind, [])
        if not idle:
            raise SystemExit(f"{label}: the warm container retired after a sample: see the server's retire line")
        before = host_counter_ns(idle[0].box.container)
        judged()
        return (host_counter_ns(idle[0].box.container) - before) / 1e6

    return measure


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("-n", type=int, default=9, help="samples per line (default: %(default)s)")
    parser.add_argument("--envs", nargs="+", default=["coin_change", "prog_max_subarray"])
    parser.add_argument("--rows", nargs="+", default=["strict", "warm"], choices=["strict", "warm"])
    parser.add_argument("--tags", nargs="+", default=None,
                        help="compare the images of these DEEPGYM_TAGs, sample by sample (default: this one's)")
    args = parser.parse_args()
    provider = DockerProvider(max_parallel=1, attach=True, prewarm=0)
    spent: dict[str, list[float]] = {}
    try:
        lines = [line for env_name in args.envs for line in lines_for(provider, env_name, args.rows, args.tags or [None])]
        for _ in range(args.n):  # round robin: a change in the host's load hits every line alike
            for label, measure in lines:
                spent.setdefault(label, []).append(measure())
    finally:
        provider.close()
    print(f"container CPU ms per sample, median (min) of {args.n}; load average {os.getloadavg()[0]:.2f}")
    width = max(map(len, spent))
    for label, values in spent.items():
        print(f"  {label:<{width}} {statistics.median(values):7.1f} ms  ({min(values):.1f})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
