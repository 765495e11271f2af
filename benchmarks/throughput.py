"""Scoring throughput, every way of judging in one run, and admission control at 20 times its bound.

    python benchmarks/throughput.py                               # coin_change 64, a patch and a program env 16
    python benchmarks/throughput.py --envs coin_change -n 200 --parallel 2 4
    python benchmarks/throughput.py --deepgym062 /tmp/dg062/bin/python   # with DeepGym 0.6.2's rows
    python benchmarks/throughput.py --rows strict --baseline /tmp/old:old --rounds 5   # before vs. after a change
    python benchmarks/throughput.py --floors --markdown table.md   # the README's table: the floors, strict, warm

**Part 1, rows** (the bare engine's, and what every row shares, are in rows.py). Each environment gets N
responses, half right (the reference) and half wrong (its known-wrong solutions), judged by each row; every
verdict is checked (right -> 1.0, wrong -> below 1.0), so a fast but wrong row cannot pass for a good one.

- ``engine``: the bare engine, no deepgym: docker-py create + start + wait + remove of a container of the
  environment's image running ``true``, with the same settings as a sandbox (no network, capabilities, limits).
- ``engine-defaults``: the same loop as a new user writes it, with docker-py's defaults instead of a sandbox's
  settings: a bridge network, json-file logs, no limits and no dropped capabilities.
- ``engine-bare``: the same bare loop, but the container runs a bare verifier instead of ``true``: one
  ``python3 -I -S`` that runs the solution on the environment's hidden cases and exits 0 when all pass, no
  isolation inside (function and program environments, :mod:`floors`). It is the least any verifier that runs
  the sample in a container adds to the engine, so ``engine-bare / engine`` bounds what ``strict / engine`` can
  ever reach on this host; strict's goal is 0.95x ``engine-bare``.
- ``engine-runner``: the same bare loop, but the container runs deepgym's runner on the sample's request
  (attached stdin, as strict mode sends it) and its report is classified: the engine doing a sample's work
  with none of deepgym's host side (no prewarm, no admission). ``engine`` measures what the engine costs;
  the gap from ``engine`` to ``engine-runner`` is the verifier's CPU in the container, and the gap from
  ``engine-runner`` to ``strict`` is what deepgym's host side adds or saves (``benchmarks/process_cpu.py``
  splits these rows' CPU by process, which other load on the host does not blur).
- ``strict``: deepgym's docker mode, a fresh container per sample, prewarmed (the default).
- ``strict-cold``: the same with every container started on demand (``DEEPGYM_DOCKER_PREWARM=0``).
- ``docker-exec``: docker through the generic create-and-exec path (``DEEPGYM_DOCKER_EXEC=1``).
- ``warm``: deepgym's warm mode (``isolation="process"``, docs/warm.md): long-lived containers, a fresh
  process under a fresh uid per sample.
- ``local``: deepgym's local mode (no isolation at all; ``DEEPGYM_ALLOW_LOCAL=1``).
- ``subprocess``: no deepgym and no isolation: the bare verifier of ``engine-bare`` as one ``python3``
  process per sample on this host, the floor any sandbox adds to; warm's goal is 0.8x ``subprocess``.
- ``prime_code``: verl's own ``default_compute_score`` (prime_code), for the dataset row ``row_stdin`` only
  (:mod:`floors`), whose deepgym rows judge it through ``compute_score`` as verl calls it.
- ``0.6.2-local``, ``0.6.2-docker``: DeepGym 0.6.2 from PyPI, installed into a separate virtualenv
  (``python3 -m venv /tmp/dg062 && /tmp/dg062/bin/pip install deepgym==0.6.2``; its local mode needs
  ``bwrap``), given with ``--deepgym062 PYTHON``. It gets the same solutions as plain code (it does not
  extract fenced blocks) and judges its own coin_change (25 cases, partial credit); its docker mode runs this
  machine's base image without its entry point (no registry here).

``--floors`` runs the rows of the issue's goals (engine-bare, strict, subprocess, warm, and prime_code for the
row) on coin_change, prog_max_subarray and the dataset row; ``--markdown FILE`` writes the run's table and
ratios as the README's markdown.

Figures per row: samples/s, p50 and p95 latency, CPU seconds per sample of the whole host (deepgym, the engine,
the containers: /proc/stat, so other load on the host counts too) and the ratio to the ``engine`` row; at the
end, the ratios that matter (strict to the engine and to DeepGym 0.6.2's docker mode, local to its local
mode, warm to strict, local, DeepGym 0.6.2's local mode and the bare subprocess, strict before and after a
change).

**Part 2, admission.** ``--admission-processes`` processes offer 20 times the bound (``--bound``, default the CPU
count) at once through verl's ``compute_score``, half busy loops and half right answers, and the outcome
counts are printed: every busy loop should be ``solution_timeout``, every right answer 1.0, and none
``host_overloaded``. ``--no-admission-contrast`` skips the same load with the bound raised to the offered
concurrency (deepgym's own load left unbounded), which shows what admission prevents.

``--baseline PATH:TAG`` also runs the deepgym rows with the deepgym checked out at PATH (``git archive REV |
tar -x -C PATH``) and its images tagged TAG (built beforehand: ``DEEPGYM_TAG=TAG PYTHONPATH=PATH python -m
deepgym.cli images build ENV``), each row in a subprocess, interleaved with this checkout's ``--rounds`` times.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
import warnings
from collections import Counter

from deepgym import DeepGym, load_environment
from deepgym.authoring.check import as_response
from deepgym.images import build, image_name

import floors
from rows import run_engine, run_engine_defaults, run_engine_runner, solutions, timed

DEEPGYM_ROWS = ("strict", "strict-cold", "docker-exec", "warm", "local")
ROWS = ("engine", "engine-defaults", "engine-bare", "engine-runner", "subprocess", *DEEPGYM_ROWS, "prime_code",
        "0.6.2-local", "0.6.2-docker")
FLOOR_ROWS = ["engine-bare", "strict", "subprocess", "warm", "prime_code"]
FLOOR_ENVS = ["coin_change", "prog_max_subarray", floors.ROW]
# (this row, that row, the goal for this / that or None): the ratios printed at the end of a run.
RATIOS = (("strict", "engine", None), ("strict", "engine-defaults", None), ("engine-bare", "engine", None),
          ("strict", "engine-bare", 0.95), ("strict", "engine-runner", None), ("strict", "strict-cold", None),
          ("strict", "0.6.2-docker", None), ("local", "0.6.2-local", None), ("strict", "strict (baseline)", None),
          ("strict-cold", "strict-cold (baseline)", None), ("warm", "warm (baseline)", None),
          ("local", "local (baseline)", None), ("warm", "strict", None), ("warm", "local", None),
          ("warm", "0.6.2-local", None), ("warm", "subprocess", 0.8), ("strict", "prime_code", None),
          ("warm", "prime_code", None))
BUSY = "```python\ndef coin_change(coins, amount):\n    while True:\n        pass\n```"


def run_deepgym(row: str, env: str, n: int, parallel: int) -> dict[str, float]:
    """A deepgym row. Uses only the API every deepgym version here has (``DeepGym(mode, max_parallel).judge``),
    so a baseline checkout runs it too."""
    os.environ["DEEPGYM_DOCKER_EXEC"] = "1" if row == "docker-exec" else "0"
    os.environ["DEEPGYM_DOCKER_PREWARM"] = "0" if row == "strict-cold" else str(parallel)
    if env == floors.ROW:
        from deepgym.rows import row_task

        task, samples = row_task(floors.ROW_SOURCE, floors.row_truth()), solutions(env, n)
    else:
        task = load_environment(env)
        samples = [(as_response(task, code), right) for code, right in solutions(env, n)]
    # Only the warm row names an isolation: a baseline checkout without warm mode runs every other row.
    options = {"isolation": "process"} if row == "warm" else {}
    with DeepGym(mode="local" if row == "local" else "docker", max_parallel=parallel) as gym:
        gym.judge(task, samples[0][0], **options)  # warm-up: image inspection, the first connections, the pool

        def judge(sample: tuple[str, bool]) -> bool:
            outcome = gym.judge(task, sample[0], **options)
            return outcome.has_verdict and (outcome.score == 1.0) == sample[1]

        return timed(judge, samples, parallel)


def run_subprocess(env: str, n: int, parallel: int) -> dict[str, float]:
    """One bare ``python3`` per sample on this host, no sandbox, no deepgym: the cost of a fresh process."""
    environment = None if env == floors.ROW else load_environment(env)
    samples = solutions(env, n)
    if environment is None:  # the row's responses are fenced: the bare verifier gets the code, as deepgym does
        samples = [(response.split("\n", 1)[1].rsplit("```", 1)[0], right) for response, right in samples]

    def judge(sample: tuple[str, bool]) -> bool:
        result = subprocess.run([sys.executable, *floors.bare_argv(environment, sample[0], False)],
                                capture_output=True)
        return (result.returncode == 0) == sample[1]

    judge(samples[0])
    return timed(judge, samples, parallel)


def run_prime_code(env: str, n: int, parallel: int) -> dict[str, float]:
    """verl's own prime_code reward (``default_compute_score``) on the dataset row, from a thread pool as verl's
    reward workers call it: a right response scores 1.0, a wrong one less."""
    from verl.utils.reward_score import default_compute_score

    truth = floors.row_truth()

    def judge(sample: tuple[str, bool]) -> bool:
        return (float(default_compute_score(floors.ROW_SOURCE, sample[0], truth)) == 1.0) == sample[1]

    samples = solutions(env, n)
    judge(samples[0])
    return timed(judge, samples, parallel)


# DeepGym 0.6.2's rows, run by its own interpreter: samples as JSON on stdin, the figures as JSON on stdout.
DEEPGYM_062 = textwrap.dedent('''
    import json, os, statistics, sys, time
    from concurrent.futures import ThreadPoolExecutor
    from deepgym import DeepGym, load_environment
    mode, env_name, parallel = sys.argv[1], sys.argv[2], int(sys.argv[3])
    samples = json.loads(sys.stdin.read())
    env, gym = load_environment(env_name), DeepGym(mode=mode)
    def cpu():
        f = open("/proc/stat").readline().split()[1:8]
        return (sum(map(int, f[:3])) + int(f[5]) + int(f[6])) / os.sysconf("SC_CLK_TCK")
    def one(sample):
        started = time.perf_counter()
        try:
            result = gym.run(env, sample[0])
            right = result.has_verdict and (result.score == 1.0) == sample[1]
        except Exception:
            right = False
        return time.perf_counter() - started, right
    one(samples[0])
    cpu0, started = cpu(), time.perf_counter()
    with ThreadPoolExecutor(max_workers=parallel) as pool:
        results = list(pool.map(one, samples))
    elapsed = time.perf_counter() - started
    latencies = sorted(r[0] for r in results)
    print(json.dumps({"samples_per_s": len(samples) / elapsed, "p50_s": statistics.median(latencies),
                      "p95_s": latencies[int(0.95 * (len(latencies) - 1))], "cpu_s": (cpu() - cpu0) / len(samples),
                      "wrong_verdicts": sum(not r[1] for r in results)}))
''')


def run_062(python: str, mode: str, env: str, n: int, parallel: int) -> dict[str, float]:
    """A DeepGym 0.6.2 row. Its docker mode wants an image whose entry point runs ``sleep infinity``: this
    machine's base image with the runner's entry point removed."""
    variables = {key: value for key, value in os.environ.items() if key not in ("PYTHONPATH", "DEEPGYM_TAG")}
    if mode == "docker":
        plain = f"deepgym-benchmark-plain:{os.environ.get('DEEPGYM_TAG', 'latest')}"
        subprocess.run(["docker", "build", "-q", "-t", plain, "-"], check=True, capture_output=True,
                       input=f"FROM {image_name('base')}\nENTRYPOINT []\nCMD [\"/bin/sh\"]\n".encode())
        variables["DEEPGYM_CONTAINER_IMAGE"] = plain
    result = subprocess.run([python, "-I", "-c", DEEPGYM_062, mode, env, str(parallel)], cwd=tempfile.gettempdir(),
                            input=json.dumps(solutions(env, n)), capture_output=True, text=True, env=variables)
    if result.returncode != 0:
        raise RuntimeError(f"DeepGym 0.6.2 ({mode}) failed: {result.stderr[-2000:]}")
    return json.loads(result.stdout.splitlines()[-1])


def run_baseline(checkout: str, tag: str, row: str, env: str, n: int, parallel: int) -> dict[str, float]:
    """A deepgym row with the deepgym at ``checkout`` and its images tagged ``tag``, in a subprocess that runs
    that checkout's own copy of this script (this one imports names the other may not have)."""
    variables = {**os.environ, "PYTHONPATH": checkout, "DEEPGYM_TAG": tag}
    script = os.path.join(checkout, "benchmarks", "throughput.py")
    result = subprocess.run([sys.executable, script, "--row", row, "--envs", env, "-n", str(n), "--parallel",
                             str(parallel)], env=variables, capture_output=True, text=True)
    if result.returncode != 0:
        raise RuntimeError(f"the baseline's {row} row failed: {result.stderr[-2000:]}")
    return json.loads(result.stdout.splitlines()[-1])


# One admission process: THREADS compute_score calls at once, the outcomes as JSON.
SCORER = textwrap.dedent('''
    import json, sys
    from concurrent.futures import ThreadPoolExecutor
    from deepgym.integrations.verl import compute_score
    responses = json.loads(sys.stdin.read())
    def score(response):
        try:
            return compute_score("coin_change", response, mode="docker")
        except Exception as exc:
            return {"error_type": getattr(exc, "error_type", type(exc).__name__), "score": None}
    with ThreadPoolExecutor(max_workers=len(responses)) as pool:
        print(json.dumps(list(pool.map(score, responses))))
''')


def admission(bound: int, offered: int, processes: int) -> tuple[Counter, float]:
    """``offered`` coin_change samples at once from ``processes`` processes at admission bound ``bound``: the
    outcome counts ("busy: solution_timeout", "right: 1.0", ...) and the seconds it took."""
    environment = load_environment("coin_change")
    right = as_response(environment, environment.solutions()["reference"].read_text())
    per_process = [[BUSY if (p + i) % 2 else right for i in range(offered // processes)] for p in range(processes)]
    with tempfile.TemporaryDirectory(prefix="deepgym-admission-benchmark-") as slots:
        variables = {**os.environ, "DEEPGYM_ADMISSION_DIR": slots, "DEEPGYM_MAX_SANDBOXES": str(bound)}
        started = time.perf_counter()
        scorers = [subprocess.Popen([sys.executable, "-c", SCORER], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                    text=True, env=variables) for _ in per_process]
        outputs = [scorer.communicate(json.dumps(batch))[0] for scorer, batch in zip(scorers, per_process, strict=True)]
        elapsed = time.perf_counter() - started
    counts: Counter = Counter()
    for batch, output in zip(per_process, outputs, strict=True):
        for response, result in zip(batch, json.loads(output), strict=True):
            kind = "busy" if response == BUSY else "right"
            counts[f"{kind}: {result['error_type'] or result['score']}"] += 1
    return counts, elapsed


def machine() -> str:
    cpu = next((line.split(":", 1)[1].strip() for line in open("/proc/cpuinfo") if line.startswith("model name")), "?")
    engine = subprocess.run(["docker", "version", "--format", "{{.Server.Version}}"], capture_output=True,
                            text=True).stdout.strip()
    memory = int(next(line.split()[1] for line in open("/proc/meminfo") if line.startswith("MemTotal"))) // 2**20
    return (f"{cpu}, {os.cpu_count()} CPUs, {memory} GiB, Linux {platform.release()}, Docker Engine {engine}, "
            f"Python {platform.python_version()}, load average {os.getloadavg()[0]:.1f} at the start")


def runs_of(row: str, env: str, n: int, parallel: int, args: argparse.Namespace) -> list[tuple]:
    """(label, function, arguments) of each measurement ``row`` makes of ``env`` (none where it does not apply)."""
    row_env = env == floors.ROW
    kind = None if row_env else load_environment(env).kind
    if row in ("engine", "engine-defaults", "engine-runner"):
        engines = {"engine": run_engine, "engine-defaults": run_engine_defaults, "engine-runner": run_engine_runner}
        return [] if row_env else [(row, engines[row], (env, n, parallel))]
    if row == "engine-bare":
        return [(row, run_engine, (env, n, parallel, True))] if kind in ("function", "program") else []
    if row == "subprocess":
        return [(row, run_subprocess, (env, n, parallel))] if row_env or kind in ("function", "program") else []
    if row == "prime_code":
        return [(row, run_prime_code, (env, n, parallel))] if row_env else []
    if row in DEEPGYM_ROWS:
        runs = [(row, run_deepgym, (row, env, n, parallel))]
        if args.baseline and not row_env:  # a baseline checkout may not know the row
            checkout, _, tag = args.baseline.rpartition(":")
            runs.append((f"{row} (baseline)", run_baseline, (checkout, tag, row, env, n, parallel)))
        return runs
    if args.deepgym062 and env == "coin_change":  # DeepGym 0.6.2 has no such patch/program env
        return [(row, run_062, (args.deepgym062, row.removeprefix("0.6.2-"), env, n, parallel))]
    return []


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--envs", nargs="+", default=["coin_change", "patch_csv_quoting", "prog_max_subarray"])
    parser.add_argument("-n", type=int, default=64, help="samples of the first environment per row (%(default)s)")
    parser.add_argument("--n-others", type=int, default=16, help="samples of each other environment (%(default)s)")
    parser.add_argument("--rows", nargs="+", default=["engine", "engine-defaults", "engine-bare", "engine-runner",
                                                      "subprocess", "strict", "strict-cold", "warm", "local",
                                                      "prime_code", "0.6.2-local", "0.6.2-docker"], choices=ROWS)
    parser.add_argument("--floors", action="store_true", help=f"rows {' '.join(FLOOR_ROWS)} on {' '.join(FLOOR_ENVS)}, "
                                                              f"no admission part (unless --envs/--rows say otherwise)")
    parser.add_argument("--markdown", metavar="FILE", help="write the run's table and ratios as markdown to FILE")
    parser.add_argument("--parallel", nargs="+", type=int, default=[max(2, os.cpu_count() or 1)])
    parser.add_argument("--deepgym062", metavar="PYTHON", help="DeepGym 0.6.2's interpreter, for its rows")
    parser.add_argument("--baseline", metavar="PATH:TAG", help="also run each deepgym row with the deepgym at PATH "
                                                               "and its images tagged TAG")
    parser.add_argument("--rounds", type=int, default=1, help="run every row this many times, interleaved")
    parser.add_argument("--bound", type=int, default=os.cpu_count() or 1, help="the admission bound (%(default)s)")
    parser.add_argument("--admission-processes", type=int, default=4, help="processes offering 20x the bound, "
                                                                             "0 skips part 2 (%(default)s)")
    parser.add_argument("--no-admission-contrast", action="store_true", help="skip the same load without the bound")
    parser.add_argument("--row", choices=DEEPGYM_ROWS, help=argparse.SUPPRESS)
    argv = sys.argv[1:]
    args = parser.parse_args(argv)
    if args.floors:
        args.envs = args.envs if "--envs" in argv else FLOOR_ENVS
        args.rows = args.rows if "--rows" in argv else FLOOR_ROWS
        args.admission_processes = args.admission_processes if "--admission-processes" in argv else 0
    os.environ.setdefault("DEEPGYM_ALLOW_LOCAL", "1")
    warnings.filterwarnings("ignore", message="deepgym local mode")  # opted in above, on purpose
    if args.row:  # one row of a baseline, for run_baseline
        print(json.dumps(run_deepgym(args.row, args.envs[0], args.n, args.parallel[0])))
        return
    images = [env for env in args.envs if env != floors.ROW] + (["row_python"] if floors.ROW in args.envs else [])
    build(images + (["coin_change"] if args.admission_processes else []))
    setting = machine()
    print(f"machine: {setting}\n")
    print(f"{'environment':<18} {'row':<22} {'parallel':>8} {'samples/s':>10} {'p50 s':>7} {'p95 s':>7} "
          f"{'CPU s/sample':>12} {'ratio':>6} {'wrong':>6}")
    rates: dict[str, list[float]] = {}
    lines: list[dict] = []
    for index, env in enumerate(args.envs):
        n = args.n if index == 0 else args.n_others
        for parallel in args.parallel:
            for _ in range(args.rounds):
                reference: dict[str, float] = {}
                for row in args.rows:
                    for label, function, where in runs_of(row, env, n, parallel, args):
                        figures = function(*where)
                        reference[label] = figures["samples_per_s"]
                        versus = reference.get("engine")
                        ratio = f"{figures['samples_per_s'] / versus:.2f}" if versus and label != "engine" else ""
                        rates.setdefault(f"{env} {label} {parallel}", []).append(figures["samples_per_s"])
                        lines.append({"env": env, "row": label, "parallel": parallel, **figures})
                        print(f"{env:<18} {label:<22} {parallel:>8} {figures['samples_per_s']:>10.2f} "
                              f"{figures['p50_s']:>7.3f} {figures['p95_s']:>7.3f} {figures['cpu_s']:>12.3f} "
                              f"{ratio:>6} {figures['wrong_verdicts']:>6}", flush=True)
    print("\nratios of mean samples/s (goal: the issue's floor for that pair):")
    ratios: list[tuple[str, str, float]] = []
    for env in args.envs:
        for parallel in args.parallel:
            def mean(label: str, env: str = env, parallel: int = parallel) -> float | None:
                values = rates.get(f"{env} {label} {parallel}")
                return statistics.mean(values) if values else None
            for this, that, goal in RATIOS:
                if mean(this) and mean(that):
                    value = mean(this) / mean(that)
                    verdict = "" if goal is None else f"  (goal >= {goal}: {'met' if value >= goal else 'NOT met'})"
                    label = f"{env} parallel {parallel}: {this} / {that}"
                    ratios.append((label, verdict, value))
                    print(f"  {label} = {value:.2f}{verdict}")
    if args.rounds > 1:
        print("\nmean samples/s over the rounds:")
        for label, values in rates.items():
            print(f"  {label:<44} {statistics.mean(values):.2f}  ({', '.join(f'{v:.2f}' for v in values)})")
    if args.markdown:
        with open(args.markdown, "w") as f:
            f.write(floors.markdown(f"{setting}, load average {os.getloadavg()[0]:.1f} at the end", lines, ratios))
        print(f"\nmarkdown table written to {args.markdown}")
    if args.admission_processes:
        offered = 20 * args.bound
        print(f"\nadmission: {offered} coin_change samples offered at once (half busy loops, half right) from "
              f"{args.admission_processes} processes through compute_score")
        settings = [("bound", args.bound)] + ([] if args.no_admission_contrast else [("no bound", offered)])
        for name, bound in settings:
            counts, elapsed = admission(bound, offered, args.admission_processes)
            print(f"  {name} ({bound}): {dict(sorted(counts.items()))} in {elapsed:.0f} s", flush=True)


if __name__ == "__main__":
    main()
