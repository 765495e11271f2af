"""Orphan-proofing: every container names its owner; the next start removes those whose owner is gone (also
containers still being created when it died), never those of a live process; deepgym cleanup removes all."""

import os
import signal
import subprocess
import sys
import time

import pytest

from support import ensure_images
from deepgym.images import image_name
from deepgym.sandbox.docker import LABEL, OWNER_LABEL, DockerProvider, owner_alive, owner_label, pid_namespace

pytestmark = pytest.mark.docker
HOST = DockerProvider().engine.host
NAMESPACE = pid_namespace()


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
    label = owner_label(proc.pid)
    proc.wait()
    return label


def test_owner_labels_tell_live_from_gone():
    me = owner_label(os.getpid())
    assert owner_alive(me, HOST, NAMESPACE)
    assert not owner_alive(finished_process_owner(), HOST, NAMESPACE)
    assert not owner_alive(f"{HOST}/{NAMESPACE}/{os.getpid()}/1", HOST, NAMESPACE), "a reused pid has another start"
    assert owner_alive(f"other-host/{NAMESPACE}/1/1", HOST, NAMESPACE), "another host's containers are its own"
    assert owner_alive(f"{HOST}/4026531999/1/1", HOST, NAMESPACE), "so are another pid namespace's"
    assert not owner_alive("garbage", HOST, NAMESPACE)
    legacy = f"{HOST}/{os.getpid()}/{me.rsplit('/', 1)[1]}"
    assert owner_alive(legacy, HOST, NAMESPACE), "a live run of the previous version keeps its containers"
    assert not owner_alive(f"{HOST}/{os.getpid()}/1", HOST, NAMESPACE)


def test_start_up_reaps_orphans_and_spares_the_living():
    ensure_images("coin_change")
    me = owner_label(os.getpid())
    dead = finished_process_owner()
    orphan_running, orphan_created, mine = create(dead, start=True), create(dead, start=False), create(me, start=True)
    try:
        DockerProvider().engine.api()  # a new process's first contact with the engine
        assert not exists(orphan_running) and not exists(orphan_created)
        assert exists(mine)
    finally:
        subprocess.run(["docker", "rm", "-f", orphan_running, orphan_created, mine], capture_output=True)


# Exclusive: any other client's start would reap the orphan before the test sees it outlive its owner.
@pytest.mark.exclusive
def test_a_process_killed_mid_sample_leaves_nothing_after_the_next_start():
    ensure_images("coin_change")
    script = ("import sys\nfrom deepgym import DeepGym\n"
              "code = 'import time\\ndef coin_change(c, a):\\n    time.sleep(30)'\n"
              "print('judging', flush=True)\nDeepGym(mode='docker').judge('coin_change', f'```python\\n{code}\\n```')\n")
    victim = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    assert victim.stdout.readline().strip() == "judging"
    owner = owner_label(victim.pid)
    deadline = time.monotonic() + 30
    while True:
        owned = subprocess.run(["docker", "ps", "-aq", "--filter", f"label={OWNER_LABEL}={owner}"],
                               capture_output=True, text=True).stdout.split()
        if owned or time.monotonic() > deadline:
            break
        time.sleep(0.1)
    assert owned, "the sample's container did not appear"
    victim.send_signal(signal.SIGKILL)
    victim.wait()
    victim.stdout.close()
    assert exists(owned[0]), "its container outlives the process"
    DockerProvider().engine.api()
    assert not exists(owned[0])


def test_cleanup_command_removes_every_deepgym_container_of_its_engine(second_engine):
    """``deepgym cleanup`` removes every deepgym container of the engine it is pointed at, a live process's too.
    It runs against the second engine, so the containers of whatever else uses this machine's engine (another
    test run, a trainer) are spared; one planted there proves cleanup touched nothing but its own engine."""
    ensure_images("coin_change")
    second_engine.load(image_name("base"))
    owner = owner_label(os.getpid())
    started = second_engine.docker("run", "-d", "--network", "none", "--label", f"{LABEL}=test", "--label",
                                   f"{OWNER_LABEL}={owner}", "--entrypoint", "sleep", image_name("base"), "300")
    assert started.returncode == 0, started.stderr
    remote = started.stdout.strip()
    local = create(owner, start=True)
    try:
        result = subprocess.run([sys.executable, "-m", "deepgym.cli", "cleanup"], capture_output=True, text=True,
                                env={**os.environ, "DOCKER_HOST": second_engine.host})
        assert result.returncode == 0 and "removed 1 deepgym container" in result.stdout, result.stdout
        assert second_engine.docker("inspect", remote).returncode != 0
        assert exists(local)
    finally:
        subprocess.run(["docker", "rm", "-f", local], capture_output=True)


HOLD_A_CONTAINER = """
import sys, time
from deepgym.images import image_name
from deepgym.sandbox.docker import DockerProvider, LABEL, OWNER_LABEL
provider = DockerProvider()
api = provider.engine.api()
container = api.create_container(image_name("base"), command=["sleep", "300"],
                                 labels={LABEL: provider.run_id, OWNER_LABEL: provider.owner})["Id"]
api.start(container)
print(container, provider.owner, flush=True)
sys.stdin.readline()
api.remove_container(container, force=True)
"""


def test_another_pid_namespace_on_the_same_host_keeps_its_live_containers():
    """Two processes on one host name that share the engine but not a pid namespace (pods with host networking,
    containers mounting the socket) cannot see each other's pids: neither may reap the other's live containers."""
    ensure_images("coin_change")
    mine = create(owner_label(os.getpid()), start=True)
    other = subprocess.Popen(["unshare", "--pid", "--fork", "--mount-proc", sys.executable, "-c", HOLD_A_CONTAINER],
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        theirs, their_owner = other.stdout.readline().split()
        host, namespace, pid, _ = their_owner.split("/")
        assert host == HOST and namespace != NAMESPACE and int(pid) < 10, "the other process has its own pid space"
        DockerProvider().engine.api()  # our start-up reaper
        assert exists(theirs), "a live process of another pid namespace lost its container"
        reaper = subprocess.run(["unshare", "--pid", "--fork", "--mount-proc", sys.executable, "-c",
                                 "from deepgym.sandbox.docker import DockerProvider; DockerProvider().engine.api()"],
                                capture_output=True, text=True)
        assert reaper.returncode == 0, reaper.stderr
        assert exists(mine), "a reaper in another pid namespace removed a live process's container"
    finally:
        other.communicate("done\n", timeout=60)
        subprocess.run(["docker", "rm", "-f", mine], capture_output=True)
    assert other.returncode == 0 and not exists(theirs)
