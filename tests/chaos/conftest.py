"""A Docker engine of the chaos tests' own, to break for real: restarted, its containerd killed, its data root
filled. Never the first engine, which other test runs share.

The engine (scripts/second-engine.sh) keeps its data root on a small ext4 file system of its own, loop-mounted,
so the tests can fill it without filling the host's disk; the clients reach it on its unix socket, which
outlives a restart (its tcp port does not). Its images are copied from the first engine (docker save | docker
load), the environment's image only.
"""

from __future__ import annotations

import logging
import os
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from deepgym.images import image_name
from support import ROOT, copy_images, ensure_images, unavailable

SCRIPT = ROOT / "scripts" / "second-engine.sh"
DATA_ROOT_MB = 2048  # the engine's own disk: room for one environment image and its containers


class BreakableEngine:
    """A dockerd (and the containerd it started) under ``folder``, with a data root on a file system of its own."""

    def __init__(self, folder: Path):
        self.folder = folder
        self.host = f"unix://{folder}/docker.sock"
        self.data = folder / "data"

    def docker(self, *argv: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
        return subprocess.run(["docker", "--host", self.host, *argv], capture_output=True, text=True, timeout=timeout)

    def start(self) -> None:
        started = subprocess.run(["bash", str(SCRIPT), "start", str(self.folder)], capture_output=True, text=True,
                                 timeout=180)
        assert started.returncode == 0, f"the chaos engine did not start: {started.stderr}"

    def stop(self) -> None:
        """SIGTERM to dockerd, as a restart by systemd would send; waits until it (and its containerd) are gone."""
        self._end(self.folder / "dockerd.pid", signal.SIGTERM)
        self._end(self.folder / "exec" / "containerd" / "containerd.pid", signal.SIGTERM)

    def kill_containerd(self) -> int:
        """SIGKILL to the engine's containerd; dockerd starts another. Returns the killed pid."""
        pid = int((self.folder / "exec" / "containerd" / "containerd.pid").read_text())
        os.kill(pid, signal.SIGKILL)
        return pid

    def answers(self) -> bool:
        return self.docker("info", timeout=30).returncode == 0

    def free_bytes(self) -> int:
        return shutil.disk_usage(self.data).free

    def containers(self) -> list[str]:
        return self.docker("ps", "-aq", "--filter", "label=deepgym").stdout.split()

    @staticmethod
    def _end(pidfile: Path, signum: int) -> None:
        try:
            pid = int(pidfile.read_text())
            os.kill(pid, signum)
        except (OSError, ValueError):
            return
        deadline = time.monotonic() + 60
        while Path(f"/proc/{pid}").exists():
            assert time.monotonic() < deadline, f"process {pid} ({pidfile.name}) did not stop within 60 s"
            time.sleep(0.1)


@pytest.fixture(scope="module")
def chaos_engine(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BreakableEngine]:
    """The module's breakable engine with coin_change's image, its own admission folder; stopped and wiped after
    the module, when no deepgym container may be left on it."""
    if os.geteuid() != 0 or shutil.which("dockerd") is None or shutil.which("mkfs.ext4") is None:
        unavailable("a breakable Docker engine needs root, dockerd and mkfs.ext4 (scripts/install-docker-engine.sh)")
    ensure_images("coin_change")
    folder = Path(tempfile.mkdtemp(prefix="dg-chaos-"))
    engine = BreakableEngine(folder)
    disk = folder.parent / f"{folder.name}.ext4"
    try:
        subprocess.run(["truncate", "-s", f"{DATA_ROOT_MB}M", str(disk)], check=True)
        subprocess.run(["mkfs.ext4", "-q", "-m", "0", str(disk)], check=True, capture_output=True)
        engine.data.mkdir()
        subprocess.run(["mount", "-o", "loop", str(disk), str(engine.data)], check=True, capture_output=True)
        engine.start()
        copy_images(engine.host, image_name("coin_change"))
        with pytest.MonkeyPatch.context() as patch:
            patch.setenv("DEEPGYM_ADMISSION_DIR", str(tmp_path_factory.mktemp("chaos-admission")))
            yield engine
        if not engine.answers():
            engine.start()
        leftovers = engine.containers()
        assert not leftovers, f"{len(leftovers)} deepgym container(s) were left on the chaos engine"
    finally:
        subprocess.run(["bash", str(SCRIPT), "stop", str(folder)], capture_output=True, timeout=180)
        disk.unlink(missing_ok=True)


@pytest.fixture
def deepgym_log(caplog: pytest.LogCaptureFixture) -> pytest.LogCaptureFixture:
    """deepgym's log lines of warning and above, captured."""
    caplog.set_level(logging.WARNING, logger="deepgym")
    return caplog
