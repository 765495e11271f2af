"""What a fresh runner imports while it judges a function sample in a real image.

Strict mode starts a new interpreter per sample, so every module the runner imports is CPU paid per sample
(README's Performance). The runner keeps away from the standard library's heavier modules on purpose (typing,
subprocess, threading and the functools and collections it brings, runpy behind ``-m``, ...); one innocent
import would bring them back unnoticed, and no other test would fail. The run here is the real one: the
host's command line for the runner (IMAGE_RUNNER) judges the reference solution under ``-X importtime``, which
names every module the runner process imports, and the sample must score.
"""

from __future__ import annotations

import pytest

from support import ensure_images, run_in_image, solution
from deepgym import load_environment
from deepgym.images import image_name
from deepgym.runner.protocol import REPORT, Request, parse_events
from deepgym.sandbox.base import IMAGE_RUNNER

pytestmark = pytest.mark.docker

ENV = "coin_change"
# Modules a function sample's runner never imports: each costs a fresh interpreter a millisecond or more.
AVOIDED = {"typing", "subprocess", "argparse", "re", "signal", "socket", "shutil", "tempfile", "pathlib", "json",
           "threading", "functools", "collections", "contextlib", "selectors", "importlib", "runpy", "array",
           "enum", "dataclasses", "warnings", "logging"}


def imported_modules(importtime: str) -> set[str]:
    """The top-level names of the modules listed by ``-X importtime`` (``import time: self | total | name``)."""
    return {line.rsplit("|", 1)[1].strip().split(".")[0] for line in importtime.splitlines()
            if line.startswith("import time:") and not line.rstrip().endswith("imported package")}


def test_a_function_samples_runner_imports_none_of_the_heavy_standard_modules():
    ensure_images(ENV)
    env = load_environment(ENV)
    request = Request(nonce="startup", kind=env.kind, submission=solution(ENV, "reference"),
                      entry_point=env.entry_point, scoring=env.scoring, limits=env.limits)
    python, *flags = IMAGE_RUNNER
    run = run_in_image(image_name(ENV), [python, "-X", "importtime", *flags], "--network", "none",
                       stdin=request.to_json().encode())
    reports = [event["report"] for event in parse_events(run.stdout, "startup") if event["event"] == REPORT]
    assert [report.get("score") for report in reports] == [1.0], run.stdout.decode(errors="replace")[-2000:]
    imported = imported_modules(run.stderr.decode(errors="replace"))
    assert {"deepgym_runner", "os", "ctypes"} <= imported, sorted(imported)  # the listing is there and complete
    assert imported & AVOIDED == set(), sorted(imported & AVOIDED)
