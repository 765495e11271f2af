"""deepgym new: every kind's template is a working environment that passes deepgym check as generated, and
environments outside the repository (DEEPGYM_ENVIRONMENTS) build through bake like the bundled ones."""

import subprocess

import pytest

from deepgym.authoring.check import check, table
from deepgym.errors import DeepGymError
from deepgym.images import build, image_name, image_status
from deepgym.scaffold import new_environment


@pytest.fixture
def outside(tmp_path, monkeypatch):
    monkeypatch.setenv("DEEPGYM_ENVIRONMENTS", str(tmp_path))
    return tmp_path


@pytest.mark.docker
def test_templates_pass_check_as_generated(outside, gym):
    names = [f"scaffold_{kind}" for kind in ("function", "program", "patch", "session", "desktop")]
    for name in names:
        folder = new_environment(name, name.split("_")[1], outside)
        assert (folder / "manifest.yaml").read_text().startswith(f"id: {name}\n")
    try:
        assert build(names) == names and all(image_status(name) == "current" for name in names)
        rows = check(names, gym, reruns=1)
        assert all(row.ok for row in rows), "\n" + table(rows)
    finally:
        subprocess.run(["docker", "rmi", "-f", *map(image_name, names)], capture_output=True)


@pytest.mark.parametrize("name,kind,words", [
    ("Bad-Name", "function", "not a valid environment name"),
    ("coin_change", "function", "already exists"),
    ("fresh_one", "essay", "unknown kind"),
])
def test_new_refuses_bad_requests(outside, name, kind, words):
    with pytest.raises(DeepGymError, match=words):
        new_environment(name, kind, outside)


def test_new_refuses_a_folder_deepgym_would_not_search(tmp_path):
    with pytest.raises(DeepGymError, match="DEEPGYM_ENVIRONMENTS"):
        new_environment("lost_env", "function", tmp_path)
