"""A runner that works anywhere (issue 9, item 3), on real images started the way a provider would start
them: full root (every capability, or privileged), a daemon of the provider's and another user's process
in the same sandbox, several samples in one sandbox with their own uids and scratch folders.

Each sandbox is a container run with ``--entrypoint`` and the request on the runner's stdin, as the runtime
feeds it; a shell stands in for the provider's daemon where the test needs processes beside the runner.
"""

from __future__ import annotations

import re
from typing import Any

import pytest

from support import ensure_images, run_in_image, solution
from deepgym import load_environment
from deepgym.images import image_name
from deepgym.runner.protocol import DONE, HEARTBEAT, IN_PLAY, REPORT, Request, parse_events
from deepgym.verdict import RunFacts, classify

ENV = "coin_change"
RUNNER = "python3 -I -B -m deepgym_runner"
SANDBOX = ("--network", "none", "--read-only", "--tmpfs", "/tmp:rw,noexec,mode=1777", "--memory", "1g")
# The submission's view of a process: uids, the five capability sets and NoNewPrivs.
STATUS = '''import os
def status(pid):
    fields = dict(line.split(":\\t", 1) for line in open(f"/proc/{pid}/status").read().splitlines() if ":\\t" in line)
    return " ".join(fields[key].split()[0] for key in ("Uid", "CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb",
                                                        "NoNewPrivs"))
'''
# Its own view, its runner's (the worker's parent), and the scratch folder that holds its HOME.
PROBE = STATUS + '''
def coin_change(coins, amount):
    scratch = os.path.dirname(os.environ["HOME"])
    info = os.stat(scratch)
    runner = dict(line.split(":\t", 1) for line in open(f"/proc/{os.getppid()}/status").read().splitlines())
    raise RuntimeError(f"SUB {status('self')} gid={os.getgid()} groups={os.getgroups()} RUNNER {status(os.getppid())} "
                       f"SCRATCH {scratch} {info.st_uid} {oct(info.st_mode & 0o7777)} "
                       f"RUNNER-IDS {runner['Uid'].split()} {runner['Gid'].split()} {runner['Groups'].split()}")
'''
# A daemonized grandchild that outlives its worker unless the runner kills the whole uid, made non-dumpable
# (its /proc files then show root as their owner).
DAEMONIZE = '''import ctypes, os, time
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        ctypes.CDLL(None).prctl(4, 0, 0, 0, 0)  # PR_SET_DUMPABLE
        time.sleep(600)
    os._exit(0)
'''
# Leaves its scratch folder hard to remove: folders it locked (mode 0), a read-only file, a symlink out of it.
LOCK_SCRATCH = """import os
home = os.environ["HOME"]
os.makedirs(f"{home}/a/b/c")
open(f"{home}/a/b/c/file", "w").write("x")
os.chmod(f"{home}/a/b/c/file", 0o400)
os.symlink("/usr/lib", f"{home}/a/out")
for folder in ("a/b/c", "a/b", "a"):
    os.chmod(f"{home}/{folder}", 0)
"""
# Prints the real uid of every process left (/proc/<pid>/status: the owner of /proc/<pid> may be root's).
UIDS = ("""python3 -c 'import glob; print("UIDS", sorted({int(l.split()[1]) for f in glob.glob("/proc/[0-9]*/status") """
        """for l in open(f) if l.startswith("Uid:")}))'""")
NONE, KEEP = "0000000000000000", "00000000000000e0"  # KILL, SETGID, SETUID



@pytest.mark.parametrize("fields,why", [
    ({"uid": 999}, "uid 999 is not an integer from 1000"),
    ({"uid": True}, "uid True is not an integer"),
    ({"uid": 2**31}, "is not an integer from 1000 to 2147483647"),
    ({"uid": 5000, "applier_uid": 5000}, "applier_uid equals its uid"),
    ({"uid": 4242}, "uid 4242 is the runner's own"),
    ({"scratch": "tmp/x"}, "is not a normalized absolute path"),
    ({"scratch": "/tmp/../etc"}, "is not a normalized absolute path"),
    ({"scratch": "/tmp/a/b"}, "is not directly under /tmp"),
], ids=["system-uid", "bool", "too-big", "applier-is-uid", "runner-uid", "relative", "not-normalized", "nested"])
def test_uids_and_scratch_folders_are_validated(fields, why):
    problem = Request(nonce="n", kind="function", submission="", **fields).problem(runner_uid=4242)
    assert problem is not None and why in problem, problem


def test_the_defaults_keep_existing_hosts_working():
    plain = Request(nonce="n", kind="function", submission="")
    assert (plain.uid, plain.applier, plain.scratch, plain.problem(runner_uid=0)) == (10000, 10001, None, None)
    assert Request.from_json(plain.to_json()) == plain
    assert Request(nonce="n", kind="f", submission="", uid=30000, applier_uid=40000).applier == 40000


@pytest.mark.parametrize("kind,tests,applies", [
    ("function", None, False), ("program", None, False), ("patch", None, True), ("swe", None, True),
    ("row", {"format": "stdin"}, False), ("row", {"format": "call"}, False), ("row", {"format": "assert"}, True),
])
def test_the_applier_is_a_samples_user_only_for_the_judges_that_run_it(kind, tests, applies):
    """Warm mode sweeps a sample's users after it (deepgym/runner/serve.py); a user that runs nothing needs no
    sweep, and the runner refuses to start a process as a user the request does not list."""
    from deepgym.runner.confine.local import Local
    from deepgym.runner.confine.processes import Processes

    sample = Request(nonce="n", kind=kind, submission="", uid=20000, tests=tests)
    assert sample.uids == ({20000, 20001} if applies else {20000})
    processes = Processes(Local(), sample.uid, sample.applier, applier_runs=sample.applier in sample.uids)
    assert processes.uids == sample.uids
    if not applies:
        with pytest.raises(ValueError, match="uid 20001 is not one of this sample's users"):
            processes.spawn(["true"], uid=sample.applier)
        assert processes.spawned == []


def request(code: str, nonce: str, **fields: Any) -> Request:
    """A function request for the environment's entry point, with its limits unless ``limits`` are given."""
    env = load_environment(ENV)
    fields.setdefault("limits", env.limits)
    return Request(nonce=nonce, kind="function", submission=code, entry_point=env.entry_point, **fields)


def sandbox(docker_args: tuple[str, ...], argv: list[str], *, stdin: bytes = b"",
            env: dict[str, str] | None = None) -> bytes:
    """Run ``argv`` in a fresh container of the environment's image; its stdout."""
    ensure_images(ENV)
    variables = [arg for key, value in (env or {}).items() for arg in ("-e", f"{key}={value}")]
    return run_in_image(image_name(ENV), argv, *SANDBOX, *docker_args, *variables, stdin=stdin).stdout


def events(stdout: bytes, nonce: str) -> dict[str, list[dict]]:
    found: dict[str, list[dict]] = {}
    for event in parse_events(stdout, nonce):
        found.setdefault(event["event"], []).append(event)
    return found


def the_report(stdout: bytes, nonce: str) -> dict:
    seen = events(stdout, nonce)
    assert len(seen.get(REPORT, [])) == 1 and len(seen.get(DONE, [])) == 1, stdout.decode(errors="replace")[-3000:]
    lines = [event["event"] for event in parse_events(stdout, nonce)]
    assert lines[-2:] == [REPORT, DONE], lines
    return seen[REPORT][0]["report"]


@pytest.mark.docker
@pytest.mark.parametrize("docker_args", [("--privileged",), ("--cap-add", "ALL")], ids=["privileged", "cap-add-all"])
def test_a_runner_given_full_root_drops_it_before_the_submission_runs(docker_args):
    request_ = request(PROBE, "caps", uid=23456, scratch="/tmp/sample-a")
    stdout = sandbox(docker_args, ["python3", "-I", "-B", "-m", "deepgym_runner"], stdin=request_.to_json().encode())
    details = the_report(stdout, "caps")["details"]
    found = re.search(r"SUB (.*) gid=(\d+) groups=(\S+) RUNNER (.*) SCRATCH (\S+) (\d+) (\S+) RUNNER-IDS", details)
    assert found, details
    sub, gid, groups, runner, scratch, owner, mode = found.groups()
    # uid, capabilities (inheritable, permitted, effective, bounding, ambient), NoNewPrivs
    assert sub.split() == ["23456", NONE, NONE, NONE, KEEP, NONE, "1"], details
    assert (gid, groups) == ("23456", "[]")
    # The runner kept only what it needs to switch users and stop them, in every set, the bounding set too.
    assert runner.split() == ["0", NONE, KEEP, KEEP, KEEP, NONE, "1"], details
    assert (scratch, owner, mode) == ("/tmp/sample-a", "23456", "0o700")
    # It made the scratch folder with the uid's file rights and is root again, filesystem ids included, with no
    # supplementary group (root's group 0 would have widened those file rights).
    assert "RUNNER-IDS ['0', '0', '0', '0'] ['0', '0', '0', '0'] []" in details, details


@pytest.mark.docker
def test_samples_in_one_sandbox_are_killed_and_measured_by_their_own_uids():
    """A warm pool: two samples, one sandbox, each with its own uid and scratch folder, beside a root daemon
    that burns a CPU (a provider's, such as E2B's envd) and another user's process. Killing a sample reaches
    its daemonized grandchild and nothing else; the daemon's CPU is never charged to a sample. A scratch folder
    the sample locked is removed all the same."""
    first = request(DAEMONIZE + LOCK_SCRATCH + PROBE, "first", uid=23456, scratch="/tmp/sample-a")
    # Loading sleeps 2 s while the daemon burns: charged to it, the 1 s CPU limit of loading would fire.
    second = request("import time\ntime.sleep(2)\n" + solution(ENV, "reference"), "second", uid=24000)
    script = f"""
        python3 -c 'while True: pass' </dev/null & daemon=$!
        python3 -c 'import os, time; os.setgid(20000); os.setuid(20000); time.sleep(600)' </dev/null & other=$!
        printf %s "$FIRST" | {RUNNER}
        printf %s "$SECOND" | {RUNNER}
        kill -0 $daemon && echo DAEMON-ALIVE
        kill -0 $other && echo OTHER-ALIVE
        {UIDS}
        echo TMP $(ls -A /tmp)
    """
    stdout = sandbox(("--cap-add", "ALL"), ["sh", "-c", script],
                     env={"FIRST": first.to_json(), "SECOND": second.to_json()})
    text = stdout.decode()
    probe = the_report(stdout, "first")["details"]
    assert "SUB 23456 " in probe and "SCRATCH /tmp/sample-a 23456 0o700" in probe, probe
    right = the_report(stdout, "second")
    assert (right["score"], right["error_type"]) == (1.0, None), right["details"]
    done = events(stdout, "second")[DONE][0]
    assert done["submission_cpu_s"] < 1.0 and done["wall_s"] > 2.0, done
    # The daemon shares the cgroup, so the runner measured per uid and could not count OOM kills there.
    assert all(beat["oom_kills"] is None for beat in events(stdout, "second")[HEARTBEAT])
    assert "DAEMON-ALIVE" in text and "OTHER-ALIVE" in text, text
    uids = re.search(r"UIDS \[(.*)\]", text).group(1)
    assert {int(uid) for uid in uids.split(", ")} == {0, 20000}, text
    assert re.search(r"TMP *$", text, re.MULTILINE), f"scratch folders were left behind: {text}"


@pytest.mark.docker
@pytest.mark.parametrize("fields,why", [
    ({"uid": 0}, "uid 0 is not an integer from 1000"),
    ({"scratch": "/tmp/taken"}, "/tmp/taken exists already"),
    ({"scratch": "/var/tmp/x"}, "is not directly under /tmp"),
], ids=["root-uid", "existing-scratch", "scratch-elsewhere"])
def test_a_request_the_runner_must_refuse_gets_no_verdict_and_runs_nothing(fields, why):
    bad = request(solution(ENV, "reference"), "bad", **fields)
    script = f"mkdir -m 0777 /tmp/taken && printf %s \"$REQUEST\" | {RUNNER}"
    stdout = sandbox(("--cap-add", "ALL"), ["sh", "-c", script], env={"REQUEST": bad.to_json()})
    report = the_report(stdout, "bad")
    assert (report["outcome"], report["error_type"]) == ("no_verdict", "verifier_error"), report
    assert why in report["reason"], report["reason"]
    assert IN_PLAY not in events(stdout, "bad")


@pytest.mark.docker
def test_a_runner_killed_mid_run_leaves_no_done_and_reads_as_a_vanished_sandbox():
    sleeper = request("import time\ndef coin_change(coins, amount):\n    time.sleep(60)", "lost")
    script = f'printf %s "$REQUEST" | {RUNNER} & sleep 2.5; kill -9 $!; wait'  # $!: the runner
    stdout = sandbox(("--cap-add", "ALL"), ["sh", "-c", script], env={"REQUEST": sleeper.to_json()})
    seen = events(stdout, "lost")
    assert IN_PLAY in seen and HEARTBEAT in seen and REPORT not in seen and DONE not in seen, seen
    outcome = classify(sleeper, RunFacts(runtime="provider", exit_code=None, stdout=stdout), ENV)
    assert not outcome.has_verdict and outcome.error_type == "sandbox_lost", outcome.to_dict()


@pytest.mark.docker
def test_the_runner_counts_the_oom_kills_it_sees_in_its_facts():
    # Processes that together outgrow the container: the kernel's OOM killer takes some, the runner counts them.
    # Faulting in 640 MiB costs 0.5-0.7 s of CPU here, but up to 1.3 s in a new VM whose memory the hypervisor
    # has not backed yet: with the case's own 1 s the CPU limit could fire first (an honest solution_timeout, but
    # not what this test is about), so the case gets 10 s.
    hogs = ("import os, time\ndef coin_change(coins, amount):\n    for _ in range(20):\n        if os.fork() == 0:\n"
            "            x = bytearray(400 * 1024**2)\n            time.sleep(100)\n    time.sleep(100)")
    bomb = request(hogs, "oom", limits=load_environment(ENV).limits.replace(case_cpu_s=10.0, total_cpu_s=20.0))
    stdout = sandbox(("--cap-drop", "ALL", "--cap-add", "SETUID", "--cap-add", "SETGID", "--cap-add", "KILL",
                      "--init", "--memory", "640m", "--memory-swap", "640m"),
                     ["python3", "-I", "-B", "-m", "deepgym_runner"], stdin=bomb.to_json().encode())
    report = the_report(stdout, "oom")
    assert report["error_type"] == "solution_oom", report["details"]
    seen = events(stdout, "oom")
    counts = [beat["oom_kills"] for beat in seen[HEARTBEAT]] + [seen[DONE][0]["oom_kills"]]
    assert counts == sorted(counts) and counts[0] == 0 and counts[-1] >= 1, counts


@pytest.mark.docker
def test_a_daemon_left_alone_by_its_worker_is_killed_by_its_uid():
    # The worker exits at once; only the non-dumpable grandchild is left to kill, found by its uid alone.
    hiding = request(DAEMONIZE + "os._exit(3)\n", "hiding", uid=25000)
    stdout = sandbox(("--cap-add", "ALL"), ["sh", "-c", f'printf %s "$REQUEST" | {RUNNER}; {UIDS}'],
                     env={"REQUEST": hiding.to_json()})
    assert the_report(stdout, "hiding")["error_type"] == "solution_error"
    assert re.search(r"UIDS \[(.*)\]", stdout.decode()).group(1) == "0", stdout.decode()[-500:]
