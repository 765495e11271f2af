"""The worker zygote (deepgym/runner/confine/forked.py, zygote.py) against the real image, in a fresh container per
sample and in warm mode: a function worker, or a program's case server, forked from the zygote is exactly as
confined as a freshly exec'd one, holds nothing of the sample's hidden tests, and cannot reach the zygote or
the runner.

Each test's submission reports what it found in its verdict's details (it raises with the report). Every
probe is shown to work where it must (the worker finds its root parent, the zygote, and reads its own
/proc), so a leak would be seen."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import textwrap
import time

import pytest

from deepgym import DeepGym
from deepgym.images import image_name
from deepgym.sandbox.base import IMAGE_RUNNER
from support import ensure_images, fenced, probing, reported, run_in_image, solution, warm_gym

pytestmark = pytest.mark.docker

ENV = "coin_change"
# What the worker learns about itself, and what it can do to every root process in the container (the
# zygote, its parent; the runner; warm mode's server; the init).
PROBE = '''
status = dict(line.split(":\\t", 1) for line in open("/proc/self/status").read().splitlines() if ":\\t" in line)
report["caps"] = status["CapEff"].strip()
report["no_new_privs"] = status["NoNewPrivs"].strip()
report["session_leader"] = os.getsid(0) == os.getpid()
report["dumpable"] = ctypes.CDLL(None).prctl(3, 0, 0, 0, 0)  # PR_GET_DUMPABLE
report["fds"] = sorted(int(fd) for fd in os.listdir("/proc/self/fd"))
report["address_space"] = resource.getrlimit(resource.RLIMIT_AS)
report["oom_score_adj"] = open("/proc/self/oom_score_adj").read().strip()
report["environment"] = sorted(os.environ)
parent = os.getppid()
report["parent_uid"] = os.stat(f"/proc/{parent}").st_uid
report["forked"] = "deepgym_runner.oneshot" in sys.modules  # the zygote's imports: no interpreter of its own
report["hidden_cases_loaded"] = any(name.startswith("deepgym_hidden") for name in sys.modules)
report["expected_seen"] = sum(1 for o in gc.get_objects() if isinstance(o, dict) and "expected" in o)
report["request_seen"] = sum(1 for o in gc.get_objects() if type(o).__name__ == "Request")
libc = ctypes.CDLL(None, use_errno=True)
reached = {}
roots = []
for p in os.listdir("/proc"):
    try:
        if p.isdigit() and os.stat(f"/proc/{p}").st_uid == 0:
            roots.append(int(p))
    except OSError:
        pass  # gone meanwhile
for pid in roots:
    done = []
    for name, attempt in (("signal", lambda: os.kill(pid, 0)), ("kill", lambda: os.kill(pid, signal.SIGKILL)),
                          ("stop", lambda: os.kill(pid, signal.SIGSTOP)),
                          ("fds", lambda: os.listdir(f"/proc/{pid}/fd")), ("environ", lambda: open(f"/proc/{pid}/environ").read()),
                          ("mem", lambda: open(f"/proc/{pid}/mem", "rb").read(1))):
        try:
            attempt()
            done.append(name)
        except OSError:
            pass
    if libc.ptrace(16, pid, 0, 0) == 0:  # PTRACE_ATTACH
        done.append("ptrace")
    if done:
        reached[pid] = done
report["roots"] = roots
report["reached"] = reached
'''


# A program env's case, forked by its case server, itself forked by the worker zygote: what it learns of the
# three, printed as its answer (a verdict shows the first 200 characters of a wrong one).
PROGRAM_PROBE = r'''
import ctypes, gc, json, os, resource, signal, sys
def uid_of(pid):
    return os.stat(f"/proc/{pid}").st_uid
server = os.getppid()
zygote = int(open(f"/proc/{server}/stat").read().rsplit(")", 1)[1].split()[1])
limit = resource.getrlimit(resource.RLIMIT_AS)
report = {"uid": os.getuid(), "server": uid_of(server), "zygote": uid_of(zygote),
          "forked": "deepgym_runner.oneshot" in sys.modules, "fds": sorted(map(int, os.listdir("/proc/self/fd"))),
          "limited": limit[0] == limit[1] > 0, "env": set(os.environ) <= {"PATH", "LANG", "LC_ALL", "HOME", "TMPDIR"},
          "hidden": sum(1 for o in gc.get_objects() if isinstance(o, dict) and "expected" in o)}
libc = ctypes.CDLL(None, use_errno=True)
def trace(pid):
    if libc.ptrace(16, pid, 0, 0) != 0:  # PTRACE_ATTACH
        raise OSError(ctypes.get_errno(), "ptrace")
roots, reached = 0, []
for pid in [int(p) for p in os.listdir("/proc") if p.isdigit()]:
    try:
        if uid_of(pid) != 0:
            continue
    except OSError:
        continue
    roots += 1
    for attempt in (lambda: os.kill(pid, signal.SIGKILL), lambda: os.kill(pid, signal.SIGSTOP),
                    lambda: os.listdir(f"/proc/{pid}/fd"), lambda: open(f"/proc/{pid}/mem", "rb").read(1),
                    lambda: trace(pid)):
        try:
            attempt()
            reached.append(pid)
        except OSError:
            pass
report.update(roots=roots, reached=reached)
print(json.dumps(report, separators=(",", ":")))
'''


@pytest.fixture(scope="module")
def gym():
    """A pool of one warm container, so consecutive samples in warm mode share it."""
    with warm_gym(ENV) as client:
        yield client


def assert_confined(report: dict) -> None:
    assert report["forked"] and report["parent_uid"] == 0, report  # forked by the zygote (root), not exec'd
    assert report["uid"] >= 1000 and report["caps"] == "0000000000000000" and report["no_new_privs"] == "1", report
    assert report["session_leader"] and report["dumpable"] == 1 and report["oom_score_adj"] == "1000", report
    assert report["fds"][:5] == [0, 1, 2, 3, 4] and len(report["fds"]) <= 6, report  # + the one listdir opened
    assert report["address_space"][0] == report["address_space"][1] > 0, report
    assert set(report["environment"]) <= {"PATH", "LANG", "LC_ALL", "HOME", "TMPDIR"}, report
    assert not report["hidden_cases_loaded"] and report["expected_seen"] == 0 and report["request_seen"] == 0, report
    assert len(report["roots"]) >= 2, report  # the probe saw the zygote and the runner: a reach would show
    assert report["reached"] == {}, report


@pytest.mark.parametrize("isolation", ["container", "process"])
def test_a_forked_worker_is_confined_and_holds_nothing_of_the_sample(gym, isolation):
    assert_confined(reported(gym.run(ENV, probing(PROBE), isolation=isolation)))


@pytest.mark.parametrize("isolation", ["container", "process"])
def test_a_forked_case_server_is_confined_and_holds_nothing_of_the_sample(isolation):
    # Two samples: in warm mode the second's case server comes from a zygote that has served the first's.
    env = "prog_max_subarray"
    with warm_gym(env) as programs:
        verdicts = [programs.run(env, fenced(PROGRAM_PROBE), isolation=isolation) for _ in range(2)]
    for verdict in verdicts:
        assert verdict.error_type == "wrong_answer", verdict
        report = json.loads(verdict.cases[0].actual)
        assert report["forked"] and report["zygote"] == 0, report  # the worker zygote's child, not an interpreter
        assert report["uid"] >= 1000 and report["server"] == report["uid"], report
        assert report["fds"] == [0, 1, 2, 3] and report["limited"] and report["env"], report  # 3: the listdir
        assert report["hidden"] == 0 and report["roots"] >= 2 and report["reached"] == [], report


def test_a_warm_sample_that_attacks_the_zygote_leaves_the_next_one_a_pristine_worker(gym):
    attack = '''
    for pid in [int(p) for p in os.listdir("/proc") if p.isdigit()]:
        for sig in (signal.SIGSTOP, signal.SIGTERM, signal.SIGKILL):
            try:
                if os.stat(f"/proc/{pid}").st_uid != os.getuid():
                    os.kill(pid, sig)
            except OSError:
                pass
    import builtins
    builtins.PLANTED = json.PLANTED = "deepgym-plant"  # only this worker's copy of the interpreter changes
    sys.modules["deepgym_plant"] = sys
    report["planted"] = True
    '''
    look = PROBE + textwrap.dedent('''
    import builtins
    report["planted_seen"] = hasattr(builtins, "PLANTED") or hasattr(json, "PLANTED") or "deepgym_plant" in sys.modules
    ''')
    planted = reported(gym.run(ENV, probing(attack), isolation="process"))
    seen = reported(gym.run(ENV, probing(look), isolation="process"))
    assert planted["host"] == seen["host"] and planted["uid"] != seen["uid"], (planted, seen)
    assert planted["planted"] and not seen["planted_seen"], seen
    assert_confined(seen)
    right = gym.run(ENV, fenced(solution(ENV, "reference")), isolation="process")
    assert right.score == 1.0, right


def test_a_zygote_that_never_forks_the_worker_is_the_runners_failure_never_a_timeout():
    # The worker zygote of a prewarmed container is stopped from the host (as a host starving it, or a bug of
    # ours, would hold it) before the sample arrives: no process of the submission ever runs, so the wall-clock
    # limit that fires while loading is not the submission's. It used to be scored solution_timeout, a 0.
    with DeepGym(mode="docker", max_parallel=1) as strict:
        assert strict.run(ENV, fenced(solution(ENV, "reference"))).score == 1.0
        pool = strict.provider.prewarm
        deadline = time.monotonic() + 60
        while not any(pool.waiting().values()):
            assert time.monotonic() < deadline, "no container was prewarmed"
            time.sleep(0.05)
        container = next(box.container for ready in pool.waiting().values() for box in ready)
        # The runner is the child of the container's init (Docker's, for an attached main process), and the
        # zygote the runner's child. Found by parentage: ps cuts a long command line to its screen width.
        init = int(subprocess.run(["docker", "inspect", "-f", "{{.State.Pid}}", container], capture_output=True,
                                  text=True, check=True).stdout)
        zygote = None
        while zygote is None:  # the runner forks its zygote once started; the container may still be starting
            assert time.monotonic() < deadline, "the prewarmed runner never forked its worker zygote"
            top = subprocess.run(["docker", "top", container, "-eo", "pid,ppid,args"], capture_output=True,
                                 text=True, check=True).stdout.splitlines()[1:]
            processes = [(int(pid), int(ppid), args) for pid, ppid, args in (line.split(None, 2) for line in top)]
            runners = {pid for pid, ppid, args in processes if ppid == init and args.startswith(IMAGE_RUNNER[0])}
            zygote = next((pid for pid, ppid, _ in processes if ppid in runners), None)
        os.kill(zygote, signal.SIGSTOP)
        outcome = strict.judge(ENV, fenced(solution(ENV, "reference")))
    assert not outcome.has_verdict and outcome.error_type == "verifier_timeout", outcome.to_dict()
    assert "before any process of the submission had started" in outcome.reason, outcome.reason


# A forked case server that cannot start: it is told to run in a folder that does not exist, so the zygote's
# child fails before its "ready" (nothing of a submission's has run) and prints its traceback as it exits.
START_FAILURE = '''
import os
from deepgym_runner.confine.container import Container
from deepgym_runner.confine.forked import Workers
from deepgym_runner.confine.processes import Processes
from deepgym_runner.confine.usage import Budget
from deepgym_runner.kinds.case_server import CaseServer, ZygoteFailed
from deepgym_runner.protocol import Limits
processes = Processes(Container(), workers=Workers().connect())
server = CaseServer(processes, Limits(), "/no-such-folder/main.py", ())
stdin = os.open(os.devnull, os.O_RDONLY)
try:
    server.run(Budget(Limits()), stdin, lambda output: None, {})
except ZygoteFailed as exc:
    print(exc)
try:
    os.fstat(stdin)
except OSError:
    print("the case's stdin was closed")
'''


def test_a_forked_case_server_that_fails_to_start_says_why():
    # Its error (a verifier_error's reason) carries what the server wrote before it died, as a spawned one's
    # does: the forked one's end is not known to poll(), and its stderr used to be dropped.
    ensure_images(ENV)
    result = run_in_image(image_name(ENV), ["python3", "-I", "-B", "-"], "--network", "none",
                          stdin=START_FAILURE.encode(), timeout_s=120)
    said = result.stdout.decode()
    assert result.returncode == 0, result.stderr
    assert said.startswith("the case server did not start"), result
    assert "FileNotFoundError" in said and "/no-such-folder" in said, said
    assert said.rstrip().endswith("the case's stdin was closed"), said  # run() took it over, and closed it


# A worker killed while its zygote is stopped stays an exit status nobody collected, in the process table as
# its uid, until the zygote runs again; settle waits for the zygote's report that it reaped it.
SETTLE = '''
import os, signal, threading, time
from deepgym_runner.confine.container import Container
from deepgym_runner.confine.forked import Workers
from deepgym_runner.confine.processes import Processes
UID = 23456
def of_uid():
    found = []
    for name in filter(str.isdigit, os.listdir("/proc")):
        try:
            status = open(f"/proc/{name}/status").read()
        except OSError:
            continue
        if f"\\nUid:\\t{UID}\\t" in status:
            found.append((int(name), status.split("State:\\t", 1)[1][0]))
    return found
zygotes = Workers()
processes = Processes(Container(), uid=UID, workers=zygotes.connect())
req_r, req_w = os.pipe()
reply_r, reply_w = os.pipe()
processes.fork_worker(["function", "256", "64", "10", "/tmp", "3", "4"], (req_r, reply_w))  # waits for its code
deadline = time.monotonic() + 30
while not of_uid():
    assert time.monotonic() < deadline, "the worker never started"
    time.sleep(0.01)
os.kill(zygotes.pid, signal.SIGSTOP)
processes.kill_all()
print("AFTER KILL", [state for _, state in of_uid()])
threading.Timer(0.5, os.kill, (zygotes.pid, signal.SIGCONT)).start()
processes.workers.settle()
print("AFTER SETTLE", of_uid())
'''


def test_a_killed_worker_is_reaped_before_its_sample_ends():
    # The runner's last act for a sample (oneshot.judge_request): a sandbox that runs one sample after another
    # finds nothing of the previous one's uid, not even a zombie (tests/runner/test_runner_anywhere.py saw one
    # on a loaded host, when the zygote ran late).
    ensure_images(ENV)
    result = run_in_image(image_name(ENV), ["python3", "-I", "-B", "-"], "--network", "none",
                          stdin=SETTLE.encode(), timeout_s=120)
    said = result.stdout.decode()
    assert result.returncode == 0, said + result.stderr.decode()
    assert "AFTER KILL ['Z']" in said, said  # killed, not yet reaped: the zygote is stopped
    assert "AFTER SETTLE []" in said, said
