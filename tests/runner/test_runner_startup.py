"""What a fresh runner imports while it judges a sample of each task kind that runs code, in a real image.

Strict mode starts a new interpreter per sample, so every module the runner imports is CPU paid per sample
(README's Performance). The runner keeps away from the standard library's heavier modules on purpose (typing,
subprocess, threading and the functools and collections it brings, runpy behind ``-m``, json, pathlib, ...);
one innocent import would bring them back unnoticed, and no other test would fail. The run here is the real
one: the host's command line for the runner (IMAGE_RUNNER) judges a right answer under ``-X importtime``,
which names every module the runner process imports, and the sample must score.
"""

from __future__ import annotations

import pytest

from support import ensure_images, run_in_image, solution
from deepgym import load_environment
from deepgym.environments import Environment
from deepgym.images import image_name
from deepgym.rows import row_task
from deepgym.runner.kinds.rows import PRELUDE_MODULES
from deepgym.runner.protocol import REPORT, Request, parse_events
from deepgym.sandbox.base import IMAGE_RUNNER

pytestmark = pytest.mark.docker

# Modules a runner never imports for the samples here: each costs a fresh interpreter a millisecond or more.
AVOIDED = {"typing", "subprocess", "argparse", "re", "signal", "socket", "shutil", "tempfile", "pathlib", "json",
           "threading", "functools", "collections", "contextlib", "selectors", "importlib", "runpy", "array",
           "enum", "dataclasses", "warnings", "logging", "secrets", "random"}

# A CodeContests-shaped stdin row: the maximum of the numbers on its input.
ROW_TRUTH = {"inputs": ["3\n1 5 2\n", "1\n-4\n"], "outputs": ["5\n", "-4\n"]}
ROW_ANSWER = "n = int(input())\nprint(max(map(int, input().split())))\n"


def imported_modules(importtime: str) -> set[str]:
    """The top-level names of the modules listed by ``-X importtime`` (``import time: self | total | name``)."""
    return {line.rsplit("|", 1)[1].strip().split(".")[0] for line in importtime.splitlines()
            if line.startswith("import time:") and not line.rstrip().endswith("imported package")}


def importing(image: str, code: str) -> set[str]:
    """The modules ``python3 -I -B`` imports in ``image`` to run ``code``."""
    run = run_in_image(image, ["python3", "-I", "-B", "-X", "importtime", "-c", code], "--network", "none")
    assert run.returncode == 0, run.stderr
    return imported_modules(run.stderr.decode(errors="replace"))


def sample(kind: str) -> tuple[Environment, str, dict | None]:
    """(environment, right answer, the row's tests or None) of a sample of ``kind``."""
    if kind == "row":
        task = row_task("codecontests", ROW_TRUTH)
        return task.environment, ROW_ANSWER, task.tests
    name = {"function": "coin_change", "program": "prog_max_subarray"}[kind]
    return load_environment(name), solution(name, "reference"), None


@pytest.mark.parametrize("kind", ["function", "program", "row"])
def test_a_fresh_runner_imports_none_of_the_heavy_standard_modules(kind):
    env, answer, tests = sample(kind)
    ensure_images(env.id)
    request = Request(nonce="startup", kind=env.kind, submission=answer, entry_point=env.entry_point,
                      scoring=env.scoring, limits=env.limits, tests=tests)
    python, *flags = IMAGE_RUNNER
    run = run_in_image(image_name(env.id), [python, "-X", "importtime", *flags], "--network", "none",
                       stdin=request.to_json().encode())
    reports = [event["report"] for event in parse_events(run.stdout, "startup") if event["event"] == REPORT]
    assert [report.get("score") for report in reports] == [1.0], run.stdout.decode(errors="replace")[-2000:]
    imported = imported_modules(run.stderr.decode(errors="replace"))
    assert {"deepgym_runner", "os", "ctypes"} <= imported, sorted(imported)  # the listing is there and complete
    avoided = set(AVOIDED)
    if kind == "row":
        # The worker zygote imports the prelude's modules for the submission (its imports are listed on the same
        # stderr): those modules, and what they import, are the submission's, not the runner's.
        prelude = ", ".join(PRELUDE_MODULES)
        avoided -= importing(image_name(env.id), f"import {prelude}") - importing(image_name(env.id), "pass")
        assert {"shutil", "secrets", "pathlib", "subprocess"} <= avoided, sorted(avoided)  # still checked here
    assert imported & avoided == set(), sorted(imported & avoided)


def test_a_rows_trusted_tests_process_starts_without_the_heavy_standard_modules():
    # An assert row (HumanEval, MBPP) starts its trusted tests in a fresh interpreter per sample, in strict and
    # warm mode alike (processes.python_main: no runpy); the same modules cost a millisecond each there.
    env = row_task("mbpp", {"test_list": ["assert add(1, 2) == 3"]}).environment
    ensure_images(env.id)
    imported = importing(image_name(env.id), "from deepgym_runner.kinds.row_tests import main")
    assert {"deepgym_runner", "os", "binascii"} <= imported, sorted(imported)  # row_tests and literal were imported
    assert imported & AVOIDED == set(), sorted(imported & AVOIDED)
