"""The floors of benchmarks/throughput.py for every task kind, and the dataset row it judges against verl.

A *bare verifier* is one interpreter that runs a solution on an environment's hidden cases and exits 0 when
all pass: no isolation, no report, no limits but each case's CPU time. ``throughput.py`` runs it in a container
per sample (``engine-bare``: the least any verifier in a container adds to the engine) and as one ``python3``
per sample on the host (``subprocess``: the least any process per sample costs). Per kind:

- function environments: :data:`BARE_FUNCTION`, the cases (``cases.py``'s variant 0) as JSON in argv;
- program environments and the dataset row: :data:`BARE_PROGRAM`, which runs the program once per case with the
  case's input as its stdin (``sys.stdin.buffer`` too) and compares the output's tokens, reading the cases from
  a folder of ``NAME.in`` and ``NAME.out`` files (inputs of megabytes do not fit in argv): the image's hidden
  folder in a container, the environment's ``tests/cases`` (or the row's, written to a temporary folder) on
  the host.

These floors run every case in the one interpreter, so a case can see and change what the ones before it left
(globals of imported modules, caches, the recursion limit); deepgym runs each case of a program or a stdin row in
a process of its own, forked from the sample's case server. :data:`BARE_PROGRAM` can pay for that too (its last
argument): each case in a child forked from the verifier, its output read through a pipe
(``benchmarks/runner_cpu.py`` measures both in the container, beside deepgym's runner).

**The dataset row** (environment name :data:`ROW`): a CodeContests-shaped stdin row (``benchmarks/datasets.py``'s
maximum-subarray problem, :data:`ROW_CASES` cases), judged by deepgym through ``compute_score`` as verl calls
it, and by verl's own ``prime_code`` (``default_compute_score``, the ``prime_code`` row), in the same run.
"""

from __future__ import annotations

import importlib.util
import json
import os
import tempfile
import textwrap
from pathlib import Path


def _datasets_benchmark():
    """benchmarks/datasets.py, by path: its name would shadow the ``datasets`` package verl imports."""
    spec = importlib.util.spec_from_file_location("deepgym_benchmark_datasets", Path(__file__).with_name("datasets.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


_rows = _datasets_benchmark()
RIGHT, WRONG, ground_truth = _rows.RIGHT, _rows.WRONG, _rows.ground_truth

ROW = "row_stdin"
ROW_CASES, ROW_NUMBERS = 10, 200
ROW_SOURCE = "codecontests"
CONTAINER_CASES = "/opt/deepgym/env/cases"

BARE_FUNCTION = textwrap.dedent('''
    import json, sys
    namespace = {}
    exec(compile(sys.argv[1], "solution.py", "exec"), namespace)
    function = namespace[sys.argv[2]]
    sys.exit(not all(function(*case["args"]) == case["expected"] for case in json.loads(sys.argv[3])))
''')

# argv: the program, the cases folder, each case's CPU seconds, and "1" to run each case in a child forked from the
# verifier (the input file on its stdin, its stdout a pipe: the least deepgym's process per case can cost) or "0"
# to run every case in this interpreter. A case passes when the program ran to its end (or exited 0) within its
# CPU time and its output's tokens are the expected ones; exit 0 when every case passes.
BARE_PROGRAM = textwrap.dedent('''
    import io, os, signal, sys
    code = compile(sys.argv[1], "solution.py", "exec")
    folder, cpu_s, per_case = sys.argv[2], float(sys.argv[3]), sys.argv[4] == "1"
    def over(*_):
        raise TimeoutError
    signal.signal(signal.SIGPROF, over)
    def run():
        signal.setitimer(signal.ITIMER_PROF, cpu_s)
        try:
            exec(code, {"__name__": "__main__"})
        except SystemExit as exc:
            return 0 if exc.code is None else exc.code if isinstance(exc.code, int) else 1
        except BaseException:
            return 1
        finally:
            signal.setitimer(signal.ITIMER_PROF, 0)
            sys.stdout.flush()
        return 0
    real = sys.stdout
    for name in sorted(n[:-3] for n in os.listdir(folder) if n.endswith(".in")):
        path = os.path.join(folder, name)
        if per_case:
            read_end, write_end = os.pipe()
            pid = os.fork()
            if pid == 0:
                status = 1
                try:
                    os.dup2(os.open(path + ".in", os.O_RDONLY), 0)
                    os.dup2(write_end, 1)
                    sys.stdin, sys.stdout = open(0, closefd=False), open(1, "w", closefd=False)
                    status = run()
                finally:
                    os._exit(status)
            os.close(write_end)
            chunks = []
            while chunk := os.read(read_end, 1 << 16):
                chunks.append(chunk)
            os.close(read_end)
            status, output = os.waitpid(pid, 0)[1], b"".join(chunks)
        else:
            with open(path + ".in", "rb") as f:
                sys.stdin = io.TextIOWrapper(io.BytesIO(f.read()))
            sys.stdout = out = io.TextIOWrapper(io.BytesIO())
            status = run()
            sys.stdout, output = real, out.buffer.getvalue()
        with open(path + ".out", "rb") as f:
            if status != 0 or output.split() != f.read().split():
                sys.exit(1)
''')


def row_truth() -> str:
    """The dataset row's ground truth (verl's ``{"inputs": [...], "outputs": [...]}``)."""
    return ground_truth(ROW_CASES, ROW_NUMBERS)


def row_samples(n: int) -> list[tuple[str, bool]]:
    """N (response, is right) pairs for the row: fenced right and wrong programs in turn."""
    return [(f"```python\n{RIGHT if i % 2 == 0 else WRONG}```", i % 2 == 0) for i in range(n)]


def row_cases_dir() -> str:
    """The row's cases as a folder of ``.in`` and ``.out`` files (a temporary one, left for the process)."""
    folder = tempfile.mkdtemp(prefix="deepgym-bench-row-")
    truth = json.loads(row_truth())
    for index, (given, wanted) in enumerate(zip(truth["inputs"], truth["outputs"], strict=True)):
        Path(folder, f"{index:03d}.in").write_text(given)
        Path(folder, f"{index:03d}.out").write_text(wanted)
    return folder


def function_cases(environment) -> str:
    """A function environment's hidden cases (variant 0) as the JSON :data:`BARE_FUNCTION` reads."""
    namespace: dict = {}
    exec(compile((environment.tests_dir / "cases.py").read_text(), "cases.py", "exec"), namespace)
    return json.dumps([{"args": case["args"], "expected": case["expected"]} for case in namespace["cases"](0)])


def bare_argv(environment, code: str, in_container: bool, per_case: bool = False) -> list[str]:
    """The interpreter's arguments that run the bare verifier of ``environment`` (None: the row) on ``code``,
    in a container of its image or on this host; with ``per_case``, a program's each case in a process of its
    own (:data:`BARE_PROGRAM`)."""
    forks = "1" if per_case else "0"
    if environment is None:
        return ["-I", "-S", "-c", BARE_PROGRAM, code, _row_dir(), "2", forks]
    if environment.kind == "function":
        return ["-I", "-S", "-c", BARE_FUNCTION, code, environment.entry_point, _cached_cases(environment)]
    if environment.kind == "program":
        folder = CONTAINER_CASES if in_container else str(environment.tests_dir / "cases")
        return ["-I", "-S", "-c", BARE_PROGRAM, code, folder, f"{environment.limits.case_cpu_s:g}", forks]
    raise SystemExit(f"the bare rows run function and program environments and the row, not {environment.id} "
                     f"({environment.kind})")


_cache: dict[str, str] = {}


def _cached_cases(environment) -> str:
    if environment.id not in _cache:
        _cache[environment.id] = function_cases(environment)
    return _cache[environment.id]


def _row_dir() -> str:
    if ROW not in _cache:
        _cache[ROW] = row_cases_dir()
    return _cache[ROW]


def has_floor(environment) -> bool:
    """Whether the bare rows measure this environment (None: the row, on the host only)."""
    return environment is None or environment.kind in ("function", "program")


def markdown(machine: str, lines: list[dict], ratios: list[tuple[str, str, float]]) -> str:
    """The README's table from one run's figures (``lines``: env, row, parallel, samples/s, p50, p95, CPU) and
    its ratios (label, the goal's verdict or "", value)."""
    out = [f"Machine: {machine}.", "", "| environment | row | parallel | samples/s | p50 | p95 | CPU s/sample |",
           "|---|---|---:|---:|---:|---:|---:|"]
    out += [f"| {line['env']} | {line['row']} | {line['parallel']} | {line['samples_per_s']:.2f} | "
            f"{line['p50_s']:.3f} s | {line['p95_s']:.3f} s | {line['cpu_s']:.3f} |" for line in lines]
    out += ["", "| ratio | value | goal |", "|---|---:|---|"]
    out += [f"| {label} | {value:.2f} | {goal.strip(' ()')} |" for label, goal, value in ratios]
    return "\n".join(out) + os.linesep
