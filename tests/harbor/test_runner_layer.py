"""deepgym's layers of an imported image, run here by /bin/sh without Docker: the two RUN steps' shell is taken
from the generated Dockerfile and executed with its fixed paths moved into a scratch folder, so what is tested is
the script bake would run, not a copy of it."""

from __future__ import annotations

import os
import re
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from deepgym.harbor.dockerfile import environment_dockerfile, map_bases, runner_layers

RUNNER = Path(__file__).resolve().parents[2] / "deepgym" / "runner"
pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="the layers chown to root, as bake runs them")


def run_steps(dockerfile: str) -> list[str]:
    """The shell of each ``RUN --mount`` step of ``dockerfile``, continuation lines joined as Docker joins them."""
    steps, current = [], None
    for line in dockerfile.splitlines():
        if line.startswith("RUN --mount="):
            current = ""
            continue
        if current is None:
            continue
        if line.endswith("\\"):
            current += line[:-1]
        else:
            steps.append(current + line)
            current = None
    return steps


def relocate(script: str, root: Path) -> str:
    """``script`` with every absolute path it writes moved under ``root``, and the site-packages it asks python
    for replaced by ``root/site``."""
    script = re.sub(r'site="\$\(python3 -I -c .*?\)"', f'site="{root}/site"', script)
    for fixed in ("/mnt/deepgym-runner", "/mnt/deepgym-tests", "/usr/local/bin", "/opt/deepgym", "/app"):
        script = script.replace(fixed, f"{root}{fixed}")
    return script


@pytest.fixture
def scratch(tmp_path: Path) -> Path:
    (tmp_path / "mnt").mkdir()
    shutil.copytree(RUNNER, tmp_path / "mnt" / "deepgym-runner")
    (tmp_path / "mnt" / "deepgym-tests" / "harbor").mkdir(parents=True)
    (tmp_path / "mnt" / "deepgym-tests" / "harbor" / "test.sh").write_text("echo 1\n")
    (tmp_path / "mnt" / "deepgym-tests" / "verify.py").write_text("raise RuntimeError\n")
    (tmp_path / "usr" / "local" / "bin").mkdir(parents=True)
    (tmp_path / "app" / "src").mkdir(parents=True)
    (tmp_path / "app" / "src" / "main.py").write_text("print('task')\n")
    (tmp_path / "app" / "secret").write_text("s")
    (tmp_path / "app" / "secret").chmod(0o600)
    return tmp_path


def test_the_runner_layer_installs_the_runner_the_service_command_and_the_workspace(scratch: Path) -> None:
    text, _ = environment_dockerfile("FROM debian:bookworm-slim\nWORKDIR /app\n", {}, None)
    runner_step, tests_step = (relocate(step, scratch) for step in run_steps(text))
    done = subprocess.run(["sh", "-c", runner_step], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    installed = scratch / "site" / "deepgym_runner"
    assert (installed / "episode" / "verify.py").read_bytes() == (RUNNER / "episode" / "verify.py").read_bytes()
    assert list(installed.rglob("*.pyc"))  # compiled at build, like the base image's copy
    assert not stat.S_IMODE((installed / "episode" / "verify.py").stat().st_mode) & 0o022
    service = scratch / "usr" / "local" / "bin" / "deepgym-service"
    assert service.read_text() == '#!/bin/sh\nexec python3 -I -B -m deepgym_runner.episode.services "$@"\n'
    assert stat.S_IMODE(service.stat().st_mode) == 0o755
    start = scratch / "opt" / "deepgym" / "start" / "0"
    assert (start / "src" / "main.py").read_text() == "print('task')\n"
    assert stat.S_IMODE((start / "secret").stat().st_mode) & 0o044 == 0o044  # world-readable: nothing hidden
    env = scratch / "opt" / "deepgym" / "env"
    assert stat.S_IMODE(env.stat().st_mode) == 0o700
    done = subprocess.run(["sh", "-c", tests_step], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert (env / "harbor" / "test.sh").read_text() == "echo 1\n" and (env / "verify.py").is_file()
    for path in [env, *env.rglob("*")]:
        assert stat.S_IMODE(path.stat().st_mode) & 0o077 == 0, path  # root-only, every file
        assert path.stat().st_uid == 0


def test_an_image_without_python3_or_bash_fails_with_the_fix(scratch: Path) -> None:
    step = relocate(run_steps(runner_layers("/app"))[0], scratch)
    tools = scratch / "tools"
    tools.mkdir()
    for name in ("sh", "bash", "mkdir", "cp", "rm", "find", "chown", "chmod", "printf", "install", "echo"):
        if shutil.which(name):
            (tools / name).symlink_to(shutil.which(name))
    done = subprocess.run(["sh", "-c", step], capture_output=True, text=True, env={"PATH": str(tools)})
    assert done.returncode == 1 and "the task image has no python3" in done.stderr
    assert "Fix: install python3 in environment/Dockerfile, or map the base with --base-map" in done.stderr
    (tools / "bash").unlink()
    done = subprocess.run(["sh", "-c", step], capture_output=True, text=True, env={"PATH": str(tools)})
    assert done.returncode == 1 and "the task image has no bash" in done.stderr
    old = tools / "python3"
    old.write_text("#!/bin/sh\nexit 1\n")  # stands for a python3 whose version check fails
    old.chmod(0o755)
    (tools / "bash").symlink_to(shutil.which("bash"))
    done = subprocess.run(["sh", "-c", step], capture_output=True, text=True, env={"PATH": str(tools)})
    assert done.returncode == 1 and "python3 is older than 3.10" in done.stderr


def test_no_workdir_means_an_empty_workspace_not_a_copy_of_the_root() -> None:
    assert "cp -a" not in runner_layers(None) and "cp -a" not in runner_layers("/")
    assert "cp -a '/srv/my app'/. /opt/deepgym/start/0/" in runner_layers("/srv/my app")


def test_dockerfile_facts_follow_the_last_stage_and_never_map_a_stage() -> None:
    text = ("# syntax=docker/dockerfile:1\nFROM golang:1.22 AS build\nWORKDIR /src\nUSER builder\n"
            "FROM --platform=linux/amd64 ubuntu:24.04 AS final\nCOPY --from=build /src/app /usr/bin/app\n"
            "WORKDIR /app\nWORKDIR sub\nENTRYPOINT [\"/usr/bin/app\"]\nFROM build AS test\nFROM final\n"
            "FROM ${BASE}\nFROM scratch\n")
    mapped, facts = map_bases(text, {"ubuntu:24.04": "mirror/ubuntu:24.04", "build": "nope"})
    assert mapped.startswith("# syntax=docker/dockerfile:1\n")  # a parser directive stays on the first line
    assert "FROM --platform=linux/amd64 mirror/ubuntu:24.04 AS final\n" in mapped and "FROM build AS test" in mapped
    assert facts.bases == ["golang:1.22", "mirror/ubuntu:24.04"] and facts.mapped == {"ubuntu:24.04":
                                                                                       "mirror/ubuntu:24.04"}
    assert facts.unresolved == ["${BASE}"]
    _, final = map_bases("FROM a\nWORKDIR /app\nWORKDIR sub\nUSER 1000\nENTRYPOINT [\"x\"]\n", {})
    assert (final.workdir, final.user, final.entrypoint) == ("/app/sub", "1000", '["x"]')
    _, relative = map_bases("FROM a\nWORKDIR work\n", {})
    assert relative.workdir == "/work"


def test_the_version_check_is_real_python() -> None:
    check = re.search(r"python3 -c '(.*?)'", runner_layers(None)).group(1)
    assert subprocess.run([sys.executable, "-c", check]).returncode == (sys.version_info < (3, 10))
