"""Provenance and replay against the real engine: a verdict replays to the same result, and a changed response
or image is reported as a mismatch naming the field."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from support import ROOT, ensure_images, fenced

from deepgym import DeepGym
from deepgym.cli import main
from deepgym.images import content_hash, image_name, runner_hash
from deepgym.integrations.verl import compute_score, reset_clients

pytestmark = pytest.mark.docker
SOLUTIONS = ROOT / "environments/coin_change/solutions"
REFERENCE = fenced((SOLUTIONS / "reference.py").read_text())
WRONG = fenced((SOLUTIONS / "wrong_greedy.py").read_text())


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, dict]:
    """A reference answer's verdict and response, as files, from `deepgym run`'s own JSON."""
    ensure_images("coin_change")
    folder = tmp_path_factory.mktemp("replay")
    with DeepGym("docker", canaries=False) as gym:
        verdict = gym.run("coin_change", REFERENCE, variant=2).to_dict()
    (folder / "verdict.json").write_text(json.dumps(verdict))
    (folder / "response.md").write_text(REFERENCE)
    return folder / "verdict.json", folder / "response.md", verdict


def test_every_verdict_carries_its_provenance(recorded):
    provenance = recorded[2]["provenance"]
    image = subprocess.run(["docker", "image", "inspect", "-f", "{{.Id}}", image_name("coin_change")],
                           capture_output=True, text=True, check=True).stdout.strip()
    assert provenance["environment"] == "coin_change" and provenance["variant"] == 2
    assert provenance["environment_hash"] == content_hash("coin_change") and provenance["image_id"] == image
    assert provenance["runner_hash"] == runner_hash() and provenance["limits"]["total_cpu_s"] == 10.0
    assert len(provenance["submission_sha256"]) == 64 and provenance["deepgym_version"]


def test_a_verdict_replays_to_the_same_result(recorded, capsys):
    verdict, response, _ = recorded
    assert main(["replay", str(verdict), "--response", str(response)]) == 0
    out = capsys.readouterr().out
    assert "score: matches" in out and "provenance.image_id: matches" in out and "replays exactly" in out


def test_a_changed_response_is_named(recorded, tmp_path, capsys):
    verdict, _, _ = recorded
    (tmp_path / "wrong.md").write_text(WRONG)
    assert main(["replay", str(verdict), "--response", str(tmp_path / "wrong.md")]) == 1
    out = capsys.readouterr().out
    assert "score: DIFFERS: recorded 1.0, replayed 0.0" in out and "provenance.submission_sha256: DIFFERS" in out


def test_a_changed_image_is_named(recorded, tmp_path, capsys):
    verdict, response, _ = recorded
    # Another image of the same environment: the same files with one more layer.
    (tmp_path / "Dockerfile").write_text(f"FROM {image_name('coin_change')}\nLABEL org.deepgym.test=replay\n")
    other = image_name("coin_change") + "-replay"
    subprocess.run(["docker", "build", "-q", "-t", other, str(tmp_path)], check=True, capture_output=True)
    try:
        assert main(["replay", str(verdict), "--response", str(response), "--image", other]) == 1
    finally:
        subprocess.run(["docker", "rmi", other], capture_output=True)
    out = capsys.readouterr().out
    assert "provenance.image_id: DIFFERS" in out and "score: matches" in out
    assert "the verdict differs in: provenance.image_id" in out


def test_verls_reward_extra_info_replays(recorded, tmp_path, capsys):
    """compute_score's five keys, as verl logs them, are enough to replay with the response."""
    try:
        extras = compute_score("coin_change", REFERENCE, extra_info={"variant": 2}, mode="docker")
    finally:
        reset_clients()
    (tmp_path / "extras.json").write_text(json.dumps(extras))
    assert main(["replay", str(tmp_path / "extras.json"), "--response", str(recorded[1])]) == 0
    out = capsys.readouterr().out
    assert "score: matches" in out and "provenance.submission_sha256: matches" in out and "cases:" not in out


def test_a_no_verdict_record_is_refused(tmp_path, capsys):
    (tmp_path / "none.json").write_text(json.dumps({"has_verdict": False, "error_type": "sandbox_lost"}))
    (tmp_path / "r.md").write_text(REFERENCE)
    assert main(["replay", str(tmp_path / "none.json"), "--response", str(tmp_path / "r.md")]) == 2
    assert "nothing to reproduce" in capsys.readouterr().err
