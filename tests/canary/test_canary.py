"""Canaries against the real engine: a copy of coin_change's image whose stored expected values are off by one
turns its samples into no verdicts (``image_unhealthy``), never 0s, and fixing the image recovers."""

from __future__ import annotations

import asyncio
import logging
import os
import subprocess
from pathlib import Path

import pytest
from support import ROOT, ensure_images, fenced

from deepgym import DeepGym
from deepgym.canary import CanaryPolicy, canaries_for, wrongness
from deepgym.environments import load_environment
from deepgym.images import content_hash, image_name
from deepgym.rows import row_task

pytestmark = pytest.mark.docker
REFERENCE = fenced((ROOT / "environments/coin_change/solutions/reference.py").read_text())
# Three stored expected values of every variant off by one: the image still says image_status "current".
BREAK = """FROM {good}
RUN python3 -c "import glob, json; [open(p, 'w').write(json.dumps({{**d, 'cases': [{{**c, 'expected': c['expected'] + 1}} if i < 3 else c for i, c in enumerate(d['cases'])]}})) for p in glob.glob('/opt/deepgym/env/cases-*.json') for d in [json.load(open(p))]]"
"""


def _docker(*args: str) -> None:
    subprocess.run(["docker", *args], check=True, capture_output=True)


@pytest.fixture
def bad_tag(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """A tag of this test's own whose coin_change image starts as the broken copy; the good one stays put."""
    ensure_images("coin_change")
    good = image_name("coin_change")
    monkeypatch.setenv("DEEPGYM_TAG", f"{os.environ.get('DEEPGYM_TAG', 'latest')}-canary{os.getpid()}")
    mine, broken = image_name("coin_change"), image_name("coin_change") + "-broken"
    (tmp_path / "Dockerfile").write_text(BREAK.format(good=good))
    _docker("build", "-q", "-t", broken, str(tmp_path))
    _docker("tag", broken, mine)
    yield good, mine
    subprocess.run(["docker", "rmi", mine, broken], capture_output=True)


def test_a_broken_image_gives_no_verdict_until_it_is_fixed(bad_tag, caplog):
    good, mine = bad_tag
    with DeepGym("docker", canaries=False) as blind:  # what canaries are for: a right answer scored 0
        zero = blind.run("coin_change", REFERENCE)
    assert zero.score == 0 and zero.error_type == "wrong_answer" and zero.image_status == "current"

    with caplog.at_level(logging.ERROR, logger="deepgym"), \
            DeepGym("docker", canaries=CanaryPolicy(retry_s=0.0)) as gym:
        refused = gym.run_batch("coin_change", [REFERENCE, REFERENCE])
        assert [o.error_type for o in refused] == ["image_unhealthy"] * 2 and refused.no_verdict == 2
        assert "canary coin_change:reference failed: the reference scored 0 (wrong_answer)" in refused[0].reason
        assert any("canary coin_change:reference failed" in r.getMessage() for r in caplog.records)
        assert asyncio.run(gym.ajudge("coin_change", REFERENCE)).error_type == "image_unhealthy"  # async too
        snapshot = gym.monitor.snapshot()
        assert snapshot["canary_failures"] >= 1 and "coin_change:reference" in str(snapshot["unhealthy_images"])

        _docker("tag", good, mine)  # fixed: the next retry resolves the tag afresh and checks the good image
        healthy = gym.run("coin_change", REFERENCE)
        assert healthy.score == 1.0 and healthy.passed
        assert gym.monitor.snapshot()["unhealthy_images"] == {}


def test_the_canaries_recheck_every_n_samples():
    ensure_images("coin_change")
    with DeepGym("docker", canaries=CanaryPolicy(every_samples=2, budget=1.0)) as gym:
        before = gym.canaries.checks
        batch = gym.run_batch("coin_change", [REFERENCE] * 3, max_parallel=1)
        assert [o.score for o in batch] == [1.0] * 3
        assert gym.canaries.checks >= before + 1


def test_every_canary_of_the_row_image_and_a_session_gets_its_known_verdict_and_provenance():
    ensure_images("row_python", "shell_fix_config")
    env = row_task("mbpp", {"test_list": ["assert f() == 1"]}).environment
    session = load_environment("shell_fix_config")
    with DeepGym("docker", canaries=False) as gym:
        for canary in [*canaries_for(env), *canaries_for(session)]:
            outcome = gym._judge_canary(canary, gym.admission)
            assert outcome.has_verdict and wrongness(canary, outcome) is None, (canary.name, outcome.to_dict())
            provenance = outcome.provenance
            assert provenance["image_id"] == outcome.image_id and provenance["runner_hash"], provenance
            assert provenance["environment_hash"] == content_hash(outcome.environment)
            assert (provenance.get("tests_sha256") is not None) == (outcome.environment == env.id)
