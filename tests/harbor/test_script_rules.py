"""The script verifier's pure rules on this host's files: which reward counts, which of the agent's files are
tampering (and which files it started with are not), and which workspaces a manifest may name. The same code
judges real episodes in test_judging.py."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from deepgym.errors import ManifestError
from deepgym.runner.episode.script import read_reward
from deepgym.runner.episode.tampering import find
from deepgym.session_limits import session_limits, workspace_problem

SCRIPT = "cd /app\npython3 -m pytest -q /tests/test_outputs.py && echo 1 > /logs/verifier/reward.txt\n"


@pytest.mark.parametrize(("files", "expected"), [
    ({"reward.txt": "1\n"}, 1.0),
    ({"reward.txt": "0.25"}, 0.25),
    ({"reward.json": '{"reward": 0.5}', "reward.txt": "1"}, 0.5),  # reward.json first, as Harbor reads them
    ({"reward.json": '{"accuracy": 1}'}, 1.0),
    ({"reward.txt": "nan"}, None), ({"reward.txt": "1.5"}, None), ({"reward.txt": ""}, None),
    ({"reward.json": '{"a": 1, "b": 0}'}, None), ({"reward.json": '{"reward": true}'}, None),
    ({"reward.json": "[1]"}, None), ({}, None),
])
def test_a_reward_is_one_finite_number_in_the_unit_interval(tmp_path: Path, files: dict, expected) -> None:
    for name, text in files.items():
        (tmp_path / name).write_text(text)
    reward, problem = read_reward(str(tmp_path), os.getuid())
    assert reward == expected and (problem is None) == (expected is not None)


def test_a_reward_file_that_is_a_link_is_not_followed(tmp_path: Path) -> None:
    (tmp_path / "elsewhere").write_text("1")
    (tmp_path / "reward.txt").symlink_to(tmp_path / "elsewhere")
    reward, problem = read_reward(str(tmp_path), os.getuid())
    assert reward is None and "could not be read" in problem


@pytest.fixture
def trees(tmp_path: Path) -> tuple[Path, Path, Path]:
    """A starting copy holding a conftest.py and a pyproject.toml of its own, a workspace from it, a scratch."""
    start, workspace, scratch = tmp_path / "start", tmp_path / "app", tmp_path / "tmp"
    for folder in (start, workspace):
        folder.mkdir()
        (folder / "conftest.py").write_text("# the task's own\n")
        (folder / "pyproject.toml").write_text("[tool.pytest.ini_options]\n")
        (folder / "data.csv").write_text("a,b\n")
    scratch.mkdir()
    return start, workspace, scratch


def found(trees: tuple[Path, Path, Path]) -> list[str]:
    start, workspace, scratch = trees
    return find([str(workspace), str(scratch)], uid=os.getuid(), workspace=str(workspace), start=str(start),
                script=SCRIPT)


def test_the_files_the_task_started_with_are_not_tampering(trees) -> None:
    _, workspace, scratch = trees
    (workspace / "data.csv").write_text("changed\n")
    (workspace / "report.json").write_text(json.dumps({"ok": 1}))
    (workspace / "solution.py").write_text("print(1)\n")
    (workspace / "setup.cfg").write_text("[metadata]\nname = x\n")  # no pytest section
    (scratch / "notes.txt").write_text("")
    (workspace / "pkg").mkdir()
    (workspace / "pkg" / "json.py").write_text("")  # not at the top: python3 -m pytest never imports it
    assert found(trees) == []


@pytest.mark.parametrize(("path", "text", "mode", "reason"), [
    ("app/conftest.py", "# changed\n", 0o644, "pytest loads it"),
    ("app/sub/conftest.py", "", 0o644, "pytest loads it"),
    ("tmp/pytest.ini", "[pytest]\n", 0o644, "pytest loads it"),
    ("app/pyproject.toml", "[tool.pytest.ini_options]\naddopts = '-p no:python'\n", 0o644, "pytest's configuration"),
    ("app/tox.ini", "[pytest]\n", 0o644, "pytest's configuration"),
    ("app/sitecustomize.py", "", 0o644, "start-up"),
    ("tmp/lib/usercustomize.py", "", 0o644, "start-up"),
    ("tmp/x/evil.pth", "import os\n", 0o644, "start-up"),
    ("tmp/bin/python3", "#!/bin/sh\n", 0o755, "shadow of the tool python3"),
    ("app/pytest.py", "", 0o644, "shadows the module pytest"),
    ("app/json.py", "", 0o644, "shadows the module json"),
    ("app/pytest/__init__.py", "", 0o644, "package shadowing the module pytest"),
])
def test_what_the_test_run_would_load_is_named(trees, path: str, text: str, mode: int, reason: str) -> None:
    target = trees[0].parent / path
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(text)
    target.chmod(mode)
    named = found(trees)
    assert len(named) == 1 and named[0].startswith(str(target.parent if "__init__" in path else target))
    assert reason in named[0]


def test_a_non_executable_file_named_like_a_tool_is_not_a_shadow(trees) -> None:
    (trees[2] / "python3").write_text("notes\n")
    assert found(trees) == []


@pytest.mark.parametrize(("value", "ok"), [
    ("/app", True), ("/app/repo", True), ("/tmp/work", True), ("/root", True),
    ("/", False), ("/tmp", False), ("/tmp/a/b", False), ("app", False), ("/app/../etc", False), ("/usr", False),
    ("/opt/deepgym/env", False), ("/logs", False), ("/tests/x", False), ("/solution", False), (3, False),
])
def test_a_workspace_is_a_folder_of_its_own_or_directly_under_tmp(value, ok: bool) -> None:
    assert (workspace_problem(value) is None) == ok


def test_the_manifest_names_a_bad_workspace_or_verifier_and_the_fix(tmp_path: Path) -> None:
    with pytest.raises(ManifestError, match="session.workspace.*directly under /tmp"):
        session_limits(tmp_path / "manifest.yaml", {"workspace": "/usr"})
    with pytest.raises(ManifestError, match="session.verifier: .bash. is not a verifier.*python, script"):
        session_limits(tmp_path / "manifest.yaml", {"verifier": "bash"})
    limits = session_limits(tmp_path / "manifest.yaml", {"workspace": "/app", "verifier": "script"})
    assert (limits.workspace, limits.verifier) == ("/app", "script")
