"""Orphan-proofing: every container names its owner; the next start removes those whose owner is gone (also
containers still being created when it died), never those of a live process; deepgym cleanup removes all."""

import os
import signal
import subprocess
import sys
import time

import pytest

from conftest import ensure_images
from deepgym.images import image_name
from deepgym.runtime.docker import LABEL, OWNER_LABEL, DockerRuntime, owner_alive, process_start_time

pytestmark = pytest.mark.docker
HOST = DockerRuntime().host


def create(owner: str, *, start: bool) -> str:
    """A container labelled as deepgym's, owned by ``owner`` (left in "created" state unless ``start``)."""
    command = ["docker", "run", "-d"] if start else ["docker", "create"]
    result = subprocess.run([*command, "--label", f"{LABEL}=test", "--label", f"{OWNER_LABEL}={owner}",
                             "--entrypoint", "sleep", image_name("base"), "300"], capture_output=True, text=True,
                            check=True)
    return result.stdout.strip()


def exists(container: str) -> bool:
    return subprocess.run(["docker", "inspect", container], capture_output=True).returncode == 0


def finished_process_owner() -> str:
    """The owner label of a process that has exited (its pid may even be reused later: the start time differs)."""
    proc = subprocess.Popen(["true"])
    start = process_start_time(proc.pid)
    proc.wait()
    return f"{HOST}/{proc.pid}/{start}"


def test_owner_labels_tell_live_from_gone():
    me = f"{HOST}/{os.getpid()}/{process_start_time(os.getpid())}"
    assert owner_alive(me, HOST)
    assert not owner_alive(finished_process_owner(), HOST)
    assert not owner_alive(f"{HOST}/{os.getpid()}/1", HOST), "a reused pid has another start time"
    assert owner_alive("other-host/1/1", HOST), "only its own host can judge another host's containers"
    assert not owner_alive("garbage", HOST)


def test_start_up_reaps_orphans_and_spares_the_living():
    ensure_images("coin_change")
    me = f"{HOST}/{os.getpid()}/{process_start_time(os.getpid())}"
    dead = finished_process_owner()
    orphan_running, orphan_created, mine = create(dead, start=True), create(dead, start=False), create(me, start=True)
    try:
        DockerRuntime().api()  # a new process's first contact with the engine
        assert not exists(orphan_running) and not exists(orphan_created)
        assert exists(mine)
    finally:
        subprocess.run(["docker", "rm", "-f", orphan_running, orphan_created, mine], capture_output=True)


def test_a_process_killed_mid_sample_leaves_nothing_after_the_next_start():
    ensure_images("coin_change")
    script = ("import sys\nfrom deepgym import DeepGym\n"
              "code = 'import time\\ndef coin_change(c, a):\\n    time.sleep(30)'\n"
              "print('judging', flush=True)\nDeepGym(mode='docker').judge('coin_change', f'```python\\n{code}\\n```')\n")
    victim = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    owner_prefix = f"{HOST}/{victim.pid}/"
    assert victim.stdout.readline().strip() == "judging"
    deadline = time.monotonic() + 30
    while True:
        owned = subprocess.run(["docker", "ps", "-aq", "--filter", f"label={OWNER_LABEL}={owner_prefix}"
                                f"{process_start_time(victim.pid)}"], capture_output=True, text=True).stdout.split()
        if owned or time.monotonic() > deadline:
            break
        time.sleep(0.1)
    assert owned, "the sample's container did not appear"
    victim.send_signal(signal.SIGKILL)
    victim.wait()
    victim.stdout.close()
    assert exists(owned[0]), "its container outlives the process"
    DockerRuntime().api()
    assert not exists(owned[0])


def test_cleanup_command_removes_every_deepgym_container():
    ensure_images("coin_change")
    live = create(f"{HOST}/{os.getpid()}/{process_start_time(os.getpid())}", start=True)
    result = subprocess.run([sys.executable, "-m", "deepgym.cli", "cleanup"], capture_output=True, text=True)
    assert result.returncode == 0 and "removed" in result.stdout
    assert not exists(live)
