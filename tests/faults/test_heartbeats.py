"""The runner's own facts on a real engine: heartbeats, a runner that hangs on its own past the host's
deadline, the cgroup it may trust, and memory evidence that wins over a time limit.

``test_slow_*`` wait for the host's deadline (about a minute): ``-k slow`` selects them, ``-k 'not slow'``
leaves them out. They run in CI like the others.
"""

from __future__ import annotations

import subprocess
import sys
from collections import Counter
from concurrent.futures import ThreadPoolExecutor

import pytest

from support import ROOT, ensure_images, fenced, run_in_image, solution
from deepgym import DeepGym, load_environment
from deepgym.images import build, image_name
from deepgym.runner.protocol import DONE, HEARTBEAT, HEARTBEAT_FIELDS, OPTIONAL_FACTS, Limits, Request, parse_events
from deepgym.runner.confine.procfs import own_cgroup_mount
from deepgym.judging import Images, observe
from deepgym.sandbox.docker import DockerProvider
from deepgym.scaffold import new_environment

from .conftest import wait_for_container, wait_for_submission

sys.path.insert(0, str(ROOT / "tests" / "hostile"))
from attacks import ATTACKS

MEMORY_BOMB = next(attack for attack in ATTACKS if attack.id == "memory-bomb-gradual")
# name -> (limits, code appended to the template's tests/cases.py)
ENVIRONMENTS = {
    # Its trusted check() never returns: the runner hangs on its own code. The smallest limits the manifest
    # allows: the runner's budget is 9.2 s, the host's deadline about a minute.
    "hb_hanging_check": ({"case_cpu_s": 0.1, "total_cpu_s": 0.1},
                         "\n\ndef check(args, expected, actual):\n    while True:\n        pass\n"),
    # A memory bomb must reach its CPU limit first, holding between a quarter of its memory limit (the evidence)
    # and all of it (then the limit itself stops it), whatever the host's speed and load. In 0.5 s of CPU it faults
    # in 650 to 850 MiB in a sandbox on the 2-CPU VM (the verdict's details say how much): about half of 1536 MiB,
    # so this holds on a host up to about twice as busy or 1.7 times as fast. At 2048 MiB the margin below was
    # 1.3x, and a loaded CI run saw two of three bombs called solution_timeout.
    "hb_big_memory": ({"case_cpu_s": 0.5, "total_cpu_s": 2, "memory_mb": 1536}, ""),
    # A 4 s wall limit per case, a 20 s budget, a host deadline about 70 s in.
    "hb_small": ({"case_cpu_s": 1, "total_cpu_s": 1}, ""),
}

# /proc/self/cgroup and the cgroup lines of /proc/self/mountinfo, captured in containers on this host (cgroup v1,
# Docker 26): the default (the host's cgroup namespace, Docker bind-mounting the container's subtree), the
# host's hierarchy mounted into the container (-v /sys/fs/cgroup:/sys/fs/cgroup:ro), and --cgroupns=private.
CONTAINER = "/docker/91979d49990f010de88713a9861f4460331ff04a21898c65cdf3b144afd36bd2"
PROC_CGROUP = f"3:cpuset:{CONTAINER}\n2:cpuacct:{CONTAINER}\n1:cpu:{CONTAINER}\n0::{CONTAINER}\n"
MOUNTINFO_OWN = (
    "81 80 0:46 / /sys/fs/cgroup rw,nosuid,nodev,noexec,relatime - tmpfs tmpfs rw,mode=755\n"
    f"82 81 0:29 {CONTAINER} /sys/fs/cgroup/cpu ro,nosuid,nodev,noexec,relatime - cgroup cgroup rw,cpu\n"
    f"83 81 0:30 {CONTAINER} /sys/fs/cgroup/cpuacct ro,nosuid,nodev,noexec,relatime - cgroup cgroup rw,cpuacct\n")
MOUNTINFO_HOST = (
    "86 80 0:28 / /sys/fs/cgroup ro,relatime - tmpfs tmpfs rw,mode=755\n"
    "87 86 0:29 / /sys/fs/cgroup/cpu ro,relatime - cgroup cgroup rw,cpu\n"
    "88 86 0:30 / /sys/fs/cgroup/cpuacct ro,relatime - cgroup cgroup rw,cpuacct\n")
PROC_CGROUP_PRIVATE = "3:cpuset:/\n2:cpuacct:/\n1:cpu:/\n0::/\n"
# cgroup v2 (unified), for the same three cases.
MOUNTINFO_V2 = "30 25 0:26 {root} /sys/fs/cgroup ro,nosuid,nodev,noexec,relatime - cgroup2 cgroup2 rw,nsdelegate\n"


@pytest.mark.parametrize("proc_cgroup,mountinfo,folder,own", [
    (PROC_CGROUP, MOUNTINFO_OWN, "/sys/fs/cgroup/cpuacct", True),
    (PROC_CGROUP, MOUNTINFO_HOST, "/sys/fs/cgroup/cpuacct", False),
    (PROC_CGROUP_PRIVATE, MOUNTINFO_HOST, "/sys/fs/cgroup/cpuacct", True),
    (PROC_CGROUP, MOUNTINFO_OWN, "/sys/fs/cgroup/memory", False),  # not mounted: nothing to trust
    (PROC_CGROUP, MOUNTINFO_OWN + MOUNTINFO_HOST, "/sys/fs/cgroup/cpuacct", False),  # the host's, mounted over
    (f"0::{CONTAINER}\n", MOUNTINFO_V2.format(root=CONTAINER), "/sys/fs/cgroup", True),
    (f"0::{CONTAINER}\n", MOUNTINFO_V2.format(root="/"), "/sys/fs/cgroup", False),
    ("0::/\n", MOUNTINFO_V2.format(root="/"), "/sys/fs/cgroup", True),
], ids=["v1-docker-subtree", "v1-host-hierarchy", "v1-private-namespace", "v1-not-mounted", "v1-mounted-over",
        "v2-subtree",
        "v2-host-hierarchy", "v2-private-namespace"])
def test_only_the_containers_own_cgroup_is_trusted(proc_cgroup, mountinfo, folder, own):
    assert own_cgroup_mount(proc_cgroup, mountinfo, folder) is own


def python_in_image(image: str, *docker_args: str, code: str) -> str:
    """What ``code`` prints, run by the image's python3 (it must succeed)."""
    result = run_in_image(image, ["python3", "-c", code], *docker_args, timeout_s=120)
    result.check_returncode()
    return result.stdout.decode()


@pytest.mark.docker
@pytest.mark.parametrize("docker_args,trusted", [((), True), (("--cgroupns=private",), True),
                                                 (("-v", "/sys/fs/cgroup:/sys/fs/cgroup:ro"), False)],
                         ids=["default", "private-namespace", "host-hierarchy-mounted"])
def test_the_runner_reads_no_cgroup_but_its_containers_own(docker_args, trusted):
    ensure_images("coin_change")
    code = "from deepgym_runner.confine import procfs as s; print(s.cgroup_cpu_s(), s.cgroup_memory_limit_hits())"
    cpu, hits = python_in_image(image_name("coin_change"), *docker_args, code=code).split()
    # The host's hierarchy holds the host's CPU seconds (hundreds): never read, never charged to a submission.
    assert (cpu != "None", hits != "None") == (trusted, trusted)


def runner_report(image: str, docker_args: tuple[str, ...], code: str) -> dict:
    """The report of the image's own runner, started the way the docker runtime starts it plus ``docker_args``."""
    env = load_environment("coin_change")
    request = Request(nonce="n", kind="function", submission=code, entry_point=env.entry_point, limits=env.limits)
    result = subprocess.run(["docker", "run", "--rm", "-i", "--network", "none", "--init", "--user", "0:0",
                             "--cap-drop", "ALL", "--cap-add", "SETUID", "--cap-add", "SETGID", "--cap-add", "KILL",
                             "--security-opt", "no-new-privileges:true", "--memory", "640m", "--cpus", "1",
                             *docker_args, image], input=request.to_json().encode(), capture_output=True, timeout=120)
    return next(event["report"] for event in parse_events(result.stdout, "n") if event["event"] == "report")


@pytest.mark.docker
def test_a_container_seeing_the_hosts_cgroups_judges_by_per_process_accounting():
    ensure_images("coin_change")
    host_hierarchy = ("-v", "/sys/fs/cgroup:/sys/fs/cgroup:ro")
    right = runner_report(image_name("coin_change"), host_hierarchy, solution("coin_change", "reference"))
    assert (right["score"], right["error_type"]) == (1.0, None), right["details"]
    busy = runner_report(image_name("coin_change"), host_hierarchy,
                         "def coin_change(coins, amount):\n    while True:\n        pass")
    assert busy["error_type"] == "solution_timeout" and "CPU" in busy["details"], busy["details"]


@pytest.mark.docker
def test_heartbeats_are_small_regular_and_leave_the_verdict_alone():
    ensure_images("coin_change")
    env = load_environment("coin_change")
    code = "import time\ndef coin_change(coins, amount):\n    time.sleep(2.5)\n    return -1"
    request = Request(nonce="beat", kind="function", submission=code, entry_point=env.entry_point, limits=env.limits)
    provider = DockerProvider()
    try:
        observation = observe(provider, env, request, Images())
    finally:
        provider.close()
    lines = [line for line in observation.stdout.splitlines() if b'"heartbeat"' in line]
    events = parse_events(observation.stdout, "beat")
    beats = [event for event in events if event["event"] == HEARTBEAT]
    assert len(beats) == len(lines) >= 3 and all(len(line) < 160 for line in lines), lines
    assert all(set(HEARTBEAT_FIELDS + OPTIONAL_FACTS) <= set(beat) for beat in beats)
    # The container's cgroup holds only the runner, its init and the submission: OOM kills are counted.
    assert all(beat["oom_kills"] == 0 for beat in beats), beats
    assert [event["event"] for event in events][-2:] == ["report", DONE]
    assert events[-1]["submission_cpu_s"] >= beats[-1]["submission_cpu_s"]
    walls = [beat["wall_s"] for beat in beats]
    assert walls == sorted(walls) and walls[0] < 0.5 and walls[-1] >= 2.0
    assert beats[-1]["submission_cpu_s"] < 0.5, "a sleeping submission uses almost no CPU"
    report = next(event["report"] for event in parse_events(observation.stdout, "beat") if event["event"] == "report")
    assert report["error_type"] == "wrong_answer"


@pytest.fixture(scope="module")
def test_envs(tmp_path_factory):
    """The test-only environments (the function template with other limits and cases), on
    DEEPGYM_ENVIRONMENTS and built; their images are removed afterwards."""
    root = tmp_path_factory.mktemp("heartbeat-envs")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("DEEPGYM_ENVIRONMENTS", str(root))
        for name, (limits, cases) in ENVIRONMENTS.items():
            folder = new_environment(name, "function", root)
            manifest = folder / "manifest.yaml"
            head = manifest.read_text().split("limits:\n")[0]
            manifest.write_text(head + "limits:\n" + "".join(f"  {k}: {v}\n" for k, v in limits.items()))
            with (folder / "tests" / "cases.py").open("a") as hidden:
                hidden.write(cases)
        build(list(ENVIRONMENTS))
        yield root
    subprocess.run(["docker", "rmi", "-f", *map(image_name, ENVIRONMENTS)], capture_output=True)


@pytest.mark.docker
def test_slow_a_runner_hanging_on_its_own_is_never_charged_to_the_submission(test_envs, gym):
    name = "hb_hanging_check"
    limits = Limits(**ENVIRONMENTS[name][0])
    outcome = gym.judge(name, fenced((test_envs / name / "solutions" / "reference.py").read_text()))
    assert not outcome.has_verdict and outcome.error_type == "verifier_timeout", outcome.to_dict()
    assert limits.runner_budget_s < 10, "the test is meant to reach the host's deadline within about a minute"
    assert "hung on its own" in outcome.reason and "the submission 0%" in outcome.reason, outcome.reason


@pytest.mark.docker
@pytest.mark.exclusive  # it loads every CPU
def test_a_memory_bomb_is_out_of_memory_whatever_the_load(host_load):
    # Parallel bombs fault their pages in at three times the CPU cost each; some used to trip the CPU limit.
    # A client of its own: the suite's shared one may hold the id of a coin_change image that an earlier fault
    # test removed and rebuilt (its first samples would then be image_missing, rightly, but not what this tests).
    ensure_images(MEMORY_BOMB.env)
    host_load.processes(2)
    with DeepGym(mode="docker") as gym, ThreadPoolExecutor(max_workers=4) as pool:
        outcomes = list(pool.map(lambda _: gym.judge(MEMORY_BOMB.env, MEMORY_BOMB.response), range(8)))
    counts = Counter(outcome.error_type for outcome in outcomes)
    assert counts == {"solution_oom": 8}, [outcome.to_dict().get("details") for outcome in outcomes]


@pytest.mark.docker
def test_slow_a_sandbox_frozen_past_the_deadline_is_never_scored(test_envs):
    # docker pause freezes the runner and its heartbeats with the submission: nothing can be measured.
    with DeepGym(mode="docker") as gym, ThreadPoolExecutor(max_workers=1) as pool:
        pending = pool.submit(gym.judge, "hb_small", fenced("import time\ndef hb_small(numbers):\n    time.sleep(100)"))
        container = wait_for_container(gym.provider.run_id)
        wait_for_submission(container)  # in play, asleep within its 4 s wall limit
        subprocess.run(["docker", "pause", container], check=True, capture_output=True)
        outcome = pending.result(timeout=180)
    assert not outcome.has_verdict and outcome.error_type == "sandbox_lost", outcome.to_dict()
    assert "fell silent" in outcome.reason


@pytest.mark.docker
def test_a_memory_bomb_that_reaches_its_cpu_limit_first_is_out_of_memory(test_envs, gym):
    bomb = MEMORY_BOMB.response.replace("def coin_change(coins, amount):", "def hb_big_memory(numbers):")
    outcomes = [gym.judge("hb_big_memory", bomb) for _ in range(3)]
    assert [outcome.error_type for outcome in outcomes] == ["solution_oom"] * 3, [o.to_dict() for o in outcomes]
    assert any("running into its memory limit" in outcome.details for outcome in outcomes), \
        "the CPU limit was never reached first: the test no longer shows that memory evidence wins"


@pytest.mark.docker
def test_a_process_growing_into_its_memory_limit_is_told_from_one_that_computes():
    ensure_images("coin_change")
    code = """if True:
        import os, resource, time
        from deepgym_runner.confine.usage import growing_into_memory_limit
        def child(work, held_mb):
            pid = os.fork()
            if pid == 0:
                resource.setrlimit(resource.RLIMIT_AS, (512 << 20, 512 << 20))
                held = b"\\1" * (held_mb << 20)
                work()
            return pid
        def fault_pages():  # the kernel's page faults: most of the CPU is system time
            while True:
                fresh = b"\\1" * (150 << 20)
                del fresh
        def compute():
            while True:
                pass
        def system_calls():  # in the kernel too, but with little memory
            r, w = os.pipe()
            while True:
                os.write(w, bytes(65536))
                os.read(r, 65536)
        def cpu_s(pid):
            fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
            return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
        for work, held_mb in ((fault_pages, 270), (compute, 270), (system_calls, 0)):
            pid = child(work, held_mb)
            while cpu_s(pid) < 1.0:  # a second of its own work, however busy the host
                time.sleep(0.05)
            print(growing_into_memory_limit([pid]) is not None)
            os.kill(pid, 9)
            os.waitpid(pid, 0)
    """
    answers = python_in_image(image_name("coin_change"), "--memory", "1g", code=code).split()
    assert answers == ["True", "False", "False"]
