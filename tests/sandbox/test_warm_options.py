"""Warm mode's options without an engine: choosing the isolation, the pool's settings, and the server's
emptying of a folder tree a submission locked."""

from __future__ import annotations

import dataclasses
import os
import subprocess
import tempfile
from pathlib import Path

import pytest

from deepgym import load_environment
from deepgym.judging import isolation_for
from deepgym.runner.protocol import MAX_UID
from deepgym.runner.cleanup import empty
from deepgym.sandbox.base import Provider
from deepgym.sandbox.docker import DockerProvider
from deepgym.sandbox.docker.warm import FIRST_UID, SAMPLES_VARIABLE, WarmPool, uid_range
from deepgym.sandbox.local import LocalProvider


class Named:
    """A provider's name and capabilities without the provider (no engine, no opt-in): those of ``kind``."""

    def __init__(self, name: str, kind: type[Provider] = Provider):
        self.name = name
        self.process_isolation = kind.process_isolation


@pytest.fixture
def env():
    return load_environment("coin_change")


def test_a_call_overrides_the_manifest_and_the_manifest_is_the_default(env):
    warm_env = dataclasses.replace(env, isolation="process")
    assert isolation_for(env, None, Named("docker", DockerProvider)) == "container"
    assert isolation_for(warm_env, None, Named("docker", DockerProvider)) == "process"
    assert isolation_for(warm_env, "container", Named("docker", DockerProvider)) == "container"
    assert isolation_for(env, "process", Named("docker", DockerProvider)) == "process"
    assert isolation_for(env, "process", Named("local", LocalProvider)) == "process"  # local isolates nothing either way


def test_an_unknown_isolation_is_refused_with_the_choices(env):
    with pytest.raises(ValueError, match=r"unknown isolation 'vm'.*'container'.*'process'"):
        isolation_for(env, "vm", Named("docker", DockerProvider))


def test_process_isolation_elsewhere_than_docker(env):
    """A call that asks for warm containers where there are none is refused; a manifest's wish is not an
    order, and the stricter container is used."""
    with pytest.raises(ValueError, match=r"isolation='process' needs the docker provider.*'daytona'"):
        isolation_for(env, "process", Named("daytona"))
    assert isolation_for(dataclasses.replace(env, isolation="process"), None, Named("daytona")) == "container"


def test_pool_settings_are_checked(monkeypatch):
    pool = WarmPool(None, max_parallel=3)
    assert (pool.size, pool.samples) == (3, 100)
    monkeypatch.setenv(SAMPLES_VARIABLE, "0")
    with pytest.raises(ValueError, match=SAMPLES_VARIABLE):
        WarmPool(None, max_parallel=3)
    monkeypatch.setenv(SAMPLES_VARIABLE, "many")
    with pytest.raises(ValueError, match="not a whole number"):
        WarmPool(None, max_parallel=3)


def test_uid_ranges_stay_in_the_warm_range():
    for samples in (1, 100, 10_000):
        for _ in range(200):
            first = uid_range(samples)
            assert FIRST_UID <= first and first + 2 * samples <= MAX_UID and (first - FIRST_UID) % (2 * samples) == 0


def test_emptying_a_locked_tree_leaves_nothing():
    """What a submission can do to its own files: folders without rights, a symlink out, a fifo. As root (CI),
    the tree belongs to another user and is emptied by a child switched to it, so that file modes bind."""
    base = Path(tempfile.mkdtemp(prefix="deepgym-empty-test-"))  # not under pytest's 0700 folders
    base.chmod(0o755)
    root = base / "tmp"
    (root / "a" / "b" / "c").mkdir(parents=True)
    (root / "a" / "b" / "c" / "file").write_text("x")
    (root / ".hidden").write_text("x")
    os.symlink("/etc/passwd", root / "link")
    os.mkfifo(root / "a" / "fifo")
    user = 65534 if os.geteuid() == 0 else os.geteuid()
    for folder, _, files in os.walk(root):
        for path in [folder, *(os.path.join(folder, name) for name in files)]:
            os.lchown(path, user, user)
    (root / "a" / "b" / "c").chmod(0)
    (root / "a" / "b").chmod(0o500)
    (root / "a").chmod(0o100)
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        try:
            os.setresgid(user, user, user)
            os.setresuid(user, user, user)
            os._exit(0 if empty(str(root)) == [] else 1)
        finally:
            os._exit(2)
    try:
        assert os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]) == 0
        assert os.listdir(root) == []
    finally:
        subprocess.run(["rm", "-rf", str(base)], check=False)
    assert os.path.exists("/etc/passwd")
