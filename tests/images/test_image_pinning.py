"""The image that judges is the one that matches the host's environment files, pinned by id for the whole run.

A stale image (built from other environment files: its prompt and limits, which come from the host, would not
match the hidden tests baked into it) is refused with no verdict unless allowed, and then every verdict says so.
Containers are created from the id resolved on first use, so a tag that moves mid-run changes nothing.
"""

from __future__ import annotations

import os
import subprocess

import pytest

from support import ensure_images, fenced, solution
from deepgym import DeepGym, NoVerdictError
from deepgym.images import HASH_LABEL, image_name

pytestmark = pytest.mark.docker
ENV = "coin_change"


def inspect(image: str, field: str) -> str:
    return subprocess.run(["docker", "image", "inspect", "--format", field, image], capture_output=True, text=True,
                          check=True).stdout.strip()


def derive(tag: str, source: str, *, label: str | None = None, run: str | None = None) -> str:
    """An image built FROM ``source``, tagged as coin_change's image under ``tag``; optionally relabelled and
    changed by one RUN step. Returns its id."""
    dockerfile = f"FROM {source}\n" + (f"RUN {run}\n" if run else "")
    command = ["docker", "build", "-q", "-t", f"deepgym-{ENV}:{tag}", "-"]
    if label is not None:
        command[2:2] = ["--label", f"{HASH_LABEL}={label}"]
    subprocess.run(command, input=dockerfile, capture_output=True, text=True, check=True)
    return inspect(f"deepgym-{ENV}:{tag}", "{{.Id}}")


@pytest.fixture
def current() -> str:
    """The name of coin_change's current image (under the session's tag)."""
    ensure_images(ENV)
    return image_name(ENV)


@pytest.fixture
def tag(current: str, monkeypatch: pytest.MonkeyPatch):
    """A tag of this test's own, which deepgym then uses; its images are removed afterwards."""
    name = f"pinning-{os.getpid()}"
    monkeypatch.setenv("DEEPGYM_TAG", name)
    yield name
    subprocess.run(["docker", "rmi", "-f", f"deepgym-{ENV}:{name}"], capture_output=True)


def test_a_stale_image_is_refused_with_the_fix_and_nothing_is_scored(tag: str, current: str):
    derive(tag, current, label="0123456789abcdef")
    with DeepGym(mode="docker") as gym:
        outcome = gym.judge(ENV, fenced(solution(ENV, "reference")))
    assert isinstance(outcome, NoVerdictError) and outcome.error_type == "image_stale"
    assert f"deepgym images build {ENV}" in outcome.reason and "DEEPGYM_ALLOW_STALE_IMAGE=1" in outcome.reason


@pytest.mark.parametrize("opt_in", ["argument", "variable"])
def test_a_stale_image_judges_when_allowed_and_every_verdict_says_so(tag: str, current: str, opt_in: str,
                                                                     monkeypatch: pytest.MonkeyPatch):
    derive(tag, current, label="0123456789abcdef")
    if opt_in == "variable":
        monkeypatch.setenv("DEEPGYM_ALLOW_STALE_IMAGE", "1")
    with DeepGym(mode="docker", allow_stale_image=True if opt_in == "argument" else None) as gym:
        right = gym.run(ENV, fenced(solution(ENV, "reference")))
        wrong = gym.run(ENV, fenced(solution(ENV, "wrong_greedy")))
    assert (right.score, wrong.score) == (1.0, 0.0)
    assert right.image_status == wrong.image_status == "stale"
    assert right.to_dict()["image_status"] == "stale"


def test_a_current_image_says_current(gym):
    assert gym.run(ENV, fenced(solution(ENV, "reference"))).image_status == "current"


def test_containers_come_from_the_resolved_id_even_when_the_tag_moves(tag: str, current: str):
    """The tag is moved, mid-run, to an image whose hidden tests are gone (it would give no verdict): samples
    after the move still run on the image resolved first."""
    first = derive(tag, current)
    with DeepGym(mode="docker") as gym:
        before = gym.run(ENV, fenced(solution(ENV, "reference")))
        moved = derive(tag, current, label=inspect(current, f'{{{{index .Config.Labels "{HASH_LABEL}"}}}}'),
                       run="rm -rf /opt/deepgym/env")
        after = gym.run(ENV, fenced(solution(ENV, "reference")))
    assert moved != first
    assert before.image_id == after.image_id == first
    assert (before.score, after.score) == (1.0, 1.0)
    with DeepGym(mode="docker") as fresh:
        assert fresh.judge(ENV, fenced(solution(ENV, "reference"))).error_type == "verifier_error"
