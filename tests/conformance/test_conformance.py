"""What every sandbox provider promises, checked against the real thing (see conftest.py for choosing the
providers). Docker runs every check both ways: through Provider.run's attached main process and through the
generic create-and-exec path. Local mode isolates nothing; where it cannot promise a property the check is
an expected failure that says exactly why, never a pass."""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from deepgym import load_environment
from deepgym.extract import extract_code, extract_patch
from deepgym.judging import Images, observe
from deepgym.runner.protocol import Request
from deepgym.sandbox import ExecOptions, File, ProviderUnavailable, SandboxLost
from deepgym.sandbox.base import STDERR_TAIL_BYTES
from deepgym.verdict import classify

ROOT = Path(__file__).resolve().parents[2]
SUBMISSION = "10000:10000"


def options(**fields) -> ExecOptions:
    return ExecOptions(**{"timeout_s": 30.0, **fields})


def test_stdin_is_delivered(target):
    data = os.urandom(3 << 20)
    result = target.provider.run(target.spec(), target.py("import sys\nsys.stdout.buffer.write(sys.stdin.buffer.read())"),
                                 options(stdin=data))
    assert (result.exit_code, result.timed_out, result.stdout == data) == (0, False, True)


@pytest.mark.parametrize("code", [0, 1, 3, 42, 255])
def test_exit_codes_come_back_intact(target, code):
    result = target.provider.run(target.spec(), target.py(f"import sys\nsys.exit({code})"), options())
    assert (result.exit_code, result.timed_out) == (code, False)


def test_a_command_killed_by_a_signal_exits_128_plus_it(target):
    result = target.provider.run(target.spec(), target.py("import os, signal\nos.kill(os.getpid(), signal.SIGKILL)"),
                                 options())
    assert (result.exit_code, result.timed_out) == (137, False)


def test_env_cwd_and_user_are_the_execs(target):
    if target.name == "local" and os.getuid() != 0:
        pytest.xfail("local runs commands as you: another uid needs deepgym to run as root")
    code = "import json, os\nprint(json.dumps([os.environ.get('CONFORMANCE'), os.getcwd(), os.getuid(), os.getgid()]))"
    result = target.provider.run(target.spec(), target.py(code),
                                 options(env={"CONFORMANCE": "yes"}, cwd="/tmp", user=SUBMISSION))
    value, cwd, uid, gid = json.loads(result.stdout)
    assert (value, uid, gid) == ("yes", 10000, 10000) and cwd.endswith("/tmp")


def test_output_caps_hold(target):
    code = "import sys\nsys.stdout.buffer.write(b'o' * (8 << 20))\nsys.stderr.buffer.write(b'e' * 100000 + b'END')"
    result = target.provider.run(target.spec(), target.py(code), options(stdout_limit=1 << 20))
    assert result.exit_code == 0 and result.stdout_truncated and result.stdout == b"o" * (1 << 20)
    assert len(result.stderr_tail) <= STDERR_TAIL_BYTES and result.stderr_tail.endswith("END")


def test_a_command_past_its_timeout_is_killed_with_no_exit_status(target):
    # 6 s: time enough for the interpreter to start and print on a loaded host, so the output is there to keep.
    result = target.provider.run(target.spec(), target.py("import time\nprint('up', flush=True)\ntime.sleep(60)"),
                                 options(timeout_s=6.0))
    assert result.timed_out and result.exit_code is None and result.stdout == b"up\n"
    assert 6.0 <= result.elapsed_s < 40.0  # ended at its timeout (with a loaded host's backstop), not at 60 s


# A command that leaves a daemon behind (double fork, setsid, stdio closed) and then hangs. The daemon appends
# to ./beat every 0.1 s, so whether it lives is seen in the sandbox's files, whatever pid namespace it is in.
DAEMONISE = """
import os, time
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        null = os.open(os.devnull, os.O_RDWR)
        for fd in (0, 1, 2):
            os.dup2(null, fd)
        while True:
            with open('beat', 'ab') as f:
                f.write(b'.')
            time.sleep(0.1)
    os._exit(0)
os.wait()
time.sleep(60)
"""
# ./beat's size before and after the first second in which it did not grow (or the last second of 20): a live
# daemon grows it ten times a second; one killed a moment ago may land a last write before it stops.
BEATING = ("import os, time\nbefore, until = os.path.getsize('beat'), time.monotonic() + 20\nwhile True:\n"
           "    time.sleep(1.0)\n    after = os.path.getsize('beat')\n"
           "    if after == before or time.monotonic() > until:\n        break\n    before = after\n"
           "print(before, after)\n")


@pytest.mark.parametrize("user", [SUBMISSION, "0:0"], ids=["unprivileged", "root"])
def test_a_timeout_kills_the_whole_tree_daemons_included(target, user):
    if target.name == "local":
        if os.getuid() != 0:
            pytest.xfail("local can only kill the process group of a command of your own uid; a setsid() daemon "
                         "escapes it")
        if user == "0:0":
            pytest.xfail("local kills a root command's process group only (root's kill(-1) would stop the host); "
                         "a setsid() daemon escapes it")
    with target.provider.create(target.spec()) as box:
        result = box.exec(target.py(DAEMONISE), options(timeout_s=3.0, user=user, cwd="/tmp"))
        assert result.timed_out and result.exit_code is None
        before, after = box.exec(target.py(BEATING), options(user="0:0", cwd="/tmp")).stdout.split()
        assert int(before) > 0, "the daemon never ran"
        assert before == after, f"the daemon of {user} survived the timeout: ./beat grew from {before} to {after}"
        assert box.exec(target.py("print('still usable')"), options()).stdout == b"still usable\n"


def test_a_timeout_kills_nothing_outside_the_sandbox(target):
    """A process of the submission's uid on the host, outside every sandbox, outlives a timed-out command of the
    same uid in one: killing by uid must stay inside the sandbox (another sample's submission may be that
    process)."""
    if os.getuid() != 0:
        pytest.skip("needs root, to start a process of the submission's uid on the host")
    uid, gid = SUBMISSION.split(":")
    bystander = subprocess.Popen(["setpriv", f"--reuid={uid}", f"--regid={gid}", "--clear-groups", "sleep", "60"])
    try:
        with target.provider.create(target.spec()) as box:
            result = box.exec(target.py("import time\ntime.sleep(60)"), options(timeout_s=2.0, user=SUBMISSION))
            assert result.timed_out
        time.sleep(0.3)
        assert bystander.poll() is None, f"the host's uid-{uid} process was killed (status {bystander.returncode})"
    finally:
        bystander.kill()
        bystander.wait()


NETWORK = """
import json, os, socket
def tcp():
    s = socket.create_connection(('1.1.1.1', 53), timeout=2)
def udp():
    socket.socket(socket.AF_INET, socket.SOCK_DGRAM).sendto(b'x', ('8.8.8.8', 53))
def dns():
    socket.getaddrinfo('example.com', 80)
found = {'interfaces': sorted(os.listdir('/sys/class/net'))}
found['up'] = [n for n in found['interfaces'] if int(open('/sys/class/net/%s/flags' % n).read(), 16) & 1]
def loopback():
    server = socket.create_server(('127.0.0.1', 0))
    socket.create_connection(server.getsockname(), timeout=2).close()
def localhost():
    socket.getaddrinfo('localhost', 80)
for name, probe in [('tcp', tcp), ('udp', udp), ('dns', dns), ('loopback', loopback), ('localhost', localhost)]:
    try:
        probe()
        found[name] = 'open'
    except OSError as exc:
        found[name] = type(exc).__name__
print(json.dumps(found))
"""


def test_no_network(target):
    target.only_isolated("no network: its commands use the host's interfaces, routes and resolver")
    found = json.loads(target.provider.run(target.spec(), target.py(NETWORK), options()).stdout)
    assert found["up"] == ["lo"] and "open" not in (found["tcp"], found["udp"], found["dns"]), found
    assert found["loopback"] == "open", found  # a session's services and their health checks listen on it
    assert found["localhost"] == "open", found  # the name resolves, with or without an /etc/hosts of the engine's
    target.only_if_settable("interfaces")
    assert found["interfaces"] == ["lo"], found


def test_the_memory_limit_holds(target):
    target.only_isolated("a memory limit of the sandbox (the runner limits its submissions per process only)")
    target.only_if_settable("memory")
    code = "x = bytearray(256 << 20)\nfor i in range(0, len(x), 4096):\n    x[i] = 1\nprint('allocated')"
    result = target.provider.run(target.spec(memory_mb=96), target.py(code), options())
    assert result.exit_code not in (0, None) and b"allocated" not in result.stdout


def test_the_pids_limit_holds(target):
    target.only_isolated("a pids limit of the sandbox (the runner limits its submissions per process only)")
    target.only_if_settable("pids")
    code = ("import os, time\nmade = 0\nfor _ in range(64):\n    try:\n        pid = os.fork()\n    except OSError:\n"
            "        break\n    if pid == 0:\n        time.sleep(2)\n        os._exit(0)\n    made += 1\nprint(made)")
    result = target.provider.run(target.spec(pids=16), target.py(code), options())
    assert result.exit_code == 0 and int(result.stdout) < 16


def test_a_file_round_trip_keeps_bytes_modes_and_owners(target):
    if target.name == "local" and os.getuid() != 0:
        pytest.xfail("local can give a file to another owner only when deepgym runs as root")
    with target.provider.create(target.spec()) as box:
        files = {"/tmp/mine": File(os.urandom(70000), mode=0o600, uid=10000, gid=10000),
                 "/tmp/roots": File(b"#!/bin/sh\n", mode=0o755), "/tmp/empty": File(b"", mode=0o640, uid=10000, gid=0)}
        for path, file in files.items():
            box.put(path, file)
        for path, file in files.items():
            assert box.get(path) == file, path
        read = box.exec(target.py("import sys\nsys.stdout.buffer.write(open('mine', 'rb').read())"),
                        options(user=SUBMISSION, cwd="/tmp"))
        assert read.stdout == files["/tmp/mine"].data, "the owner reads its file from inside"
        with pytest.raises(FileNotFoundError):
            box.get("/tmp/none")


def _attack_table():
    spec = importlib.util.spec_from_file_location("conformance_attacks", ROOT / "tests" / "hostile" / "attacks.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return [attack for attack in module.ATTACKS if attack.category == "forgery"]


@pytest.mark.parametrize("attack", _attack_table(), ids=lambda attack: attack.id)
def test_the_verdict_cannot_be_forged_from_inside(target, attack):
    target.only_isolated("an unforgeable verdict: the submission runs as the runner's user and can reach its "
                         "channel")
    env = load_environment(attack.env)
    code = (extract_patch(attack.response) if env.kind == "patch"
            else extract_code(attack.response, entry_point=env.entry_point))
    request = Request(nonce=os.urandom(16).hex(), kind=env.kind, submission=code, entry_point=env.entry_point,
                      scoring=env.scoring, limits=env.limits)
    outcome = classify(request, observe(target.provider, env, request, Images()), env.id)
    assert outcome.has_verdict and not outcome.passed and outcome.error_type in attack.expected, outcome.to_dict()


COIN_CHANGE_ANSWERS = {
    "right": ((ROOT / "environments/coin_change/solutions/reference.py").read_text(), 1.0, None),
    "wrong": ((ROOT / "environments/coin_change/solutions/wrong_greedy.py").read_text(), 0.0, "wrong_answer"),
    "looping": ("def coin_change(coins, amount):\n    while True:\n        pass\n", 0.0, "solution_timeout"),
}


@pytest.mark.parametrize("answer", COIN_CHANGE_ANSWERS)
def test_coin_change_is_judged_right_wrong_and_looping(target, answer):
    """The whole judging path (runner, request, report, classification) through this provider."""
    code, score, error_type = COIN_CHANGE_ANSWERS[answer]
    env = load_environment("coin_change")
    request = Request(nonce=os.urandom(16).hex(), kind=env.kind, submission=code, entry_point=env.entry_point,
                      scoring=env.scoring, limits=env.limits)
    outcome = classify(request, observe(target.provider, env, request, Images()), env.id)
    assert (outcome.has_verdict, outcome.score, outcome.error_type) == (True, score, error_type), outcome.to_dict()


def _remove_from_outside(target, box) -> None:
    if target.outside is not None:
        target.outside.remove_from_outside(box.id)
    elif target.name == "local":
        shutil.rmtree(box.root)
    else:
        subprocess.run([*target.cli, "rm", "-f", box.id], check=True, capture_output=True)


def _kill_from_outside(target, box) -> None:
    if target.name == "local":
        pytest.xfail("local cannot tell a command killed from outside from one that died of SIGKILL itself")
    if target.outside is not None:
        return target.outside.kill_from_outside(box.id)
    subprocess.run([*target.cli, "kill", box.id], check=True, capture_output=True)


@pytest.mark.parametrize("how", [_remove_from_outside, _kill_from_outside], ids=["removed", "killed"])
def test_a_sandbox_lost_mid_exec_is_a_typed_infrastructure_error(target, how):
    with target.provider.create(target.spec()) as box:
        if how is _kill_from_outside and target.name == "local":
            how(target, box)
        threading.Timer(1.0, how, (target, box)).start()
        with pytest.raises(SandboxLost):
            box.exec(target.py("import time\ntime.sleep(30)"), options())


def test_an_attached_run_removed_mid_run_is_a_typed_infrastructure_error(target):
    if not getattr(target.provider, "attach", False):
        pytest.skip("the attached main process is the docker provider's Provider.run (attach); the others run through "
                    "create+exec")
    from deepgym.sandbox.docker import LABEL

    returned = threading.Event()

    def remove() -> None:
        """From 1.5 s on, until the run returns: on a loaded machine or a slow transport (ssh) the run's
        container may not exist yet at the first look."""
        while not returned.wait(0.5):
            found = subprocess.run([*target.cli, "ps", "-q", "--filter", f"label={LABEL}={target.provider.run_id}"],
                                   capture_output=True, text=True).stdout.split()
            if found:
                subprocess.run([*target.cli, "rm", "-f", *found], capture_output=True)

    remover = threading.Timer(1.0, remove)
    remover.start()
    try:
        with pytest.raises(SandboxLost):
            target.provider.run(target.spec(), target.py("import time\ntime.sleep(30)"), options())
    finally:
        returned.set()
        remover.join()


def test_an_awaited_exec_is_the_execs_result_where_the_provider_says_it_awaits(target):
    """Provider.awaits is a promise about its sandboxes: aexec gives what exec gives (output, exit status, the
    timeout's kill) with no thread of its own; a provider that does not await says so at once."""
    import asyncio

    code = target.py("import sys, time\nprint(sys.argv[1:], flush=True)\ntime.sleep(float(sys.argv[-1]))\nsys.exit(3)")
    with target.provider.create(target.spec()) as box:
        if not target.provider.awaits:
            with pytest.raises(NotImplementedError, match="call exec"):
                asyncio.run(box.aexec([*code, "0"], options()))
            return
        waited = asyncio.run(box.aexec([*code, "0"], options()))
        direct = box.exec([*code, "0"], options())
        late = asyncio.run(box.aexec([*code, "60"], options(timeout_s=3.0)))
    assert (waited.exit_code, waited.stdout, waited.timed_out) == (direct.exit_code, direct.stdout, False) == (
        3, b"['0']\n", False)
    assert late.timed_out and late.exit_code is None and late.stdout == b"['60']\n"


def _gone(target, box) -> bool:
    if target.outside is not None:
        return target.outside.gone(box.id)
    if target.name == "local":
        return not box.root.exists()
    return subprocess.run([*target.cli, "inspect", box.id], capture_output=True).returncode != 0


def test_close_is_idempotent_and_leaves_nothing_behind(target):
    box = target.provider.create(target.spec())
    outcome: list[object] = []

    def hang() -> None:
        try:
            outcome.append(box.exec(target.py("import time\ntime.sleep(30)"), options()))
        except SandboxLost as exc:
            outcome.append(exc)

    running = threading.Thread(target=hang)
    running.start()
    time.sleep(1.0)
    box.close()
    box.close()
    running.join(timeout=20)
    assert not running.is_alive(), "a command outlived its sandbox's close"
    assert isinstance(outcome[0], SandboxLost), f"a command cut short by close came back as {outcome[0]}"
    deadline = time.monotonic() + 60  # a busy engine removes slowly
    while not _gone(target, box) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert _gone(target, box)


def test_labels_allow_a_leak_sweep(target):
    label = {"deepgym.conformance": os.urandom(4).hex()}
    boxes = [target.provider.create(target.spec(labels=label)) for _ in range(2)]
    other = target.provider.create(target.spec())
    try:
        assert target.provider.sweep(label) == 2
        assert all(_gone(target, box) for box in boxes) and not _gone(target, other)
    finally:
        for box in (*boxes, other):  # a swept sandbox's handle may hold more than the sandbox (Ray's actor)
            box.close()


def test_an_unreachable_provider_is_a_typed_infrastructure_error(target, monkeypatch, tmp_path):
    if target.name.startswith("modal"):
        pytest.skip("Modal's client retries a connection for 63 s before it gives up: the row is "
                    "tests/providers/test_exit_states.py::test_row_unreachable_api_is_provider_unavailable[modal]")
    if target.outside is not None:
        with socket.socket() as closed:  # a port nothing listens on
            closed.bind(("127.0.0.1", 0))
            nowhere = f"http://127.0.0.1:{closed.getsockname()[1]}"
        if target.name.startswith("apple"):
            from deepgym.sandbox.apple import AppleProvider

            provider = AppleProvider(cli=str(tmp_path / "no-container-cli"))
        elif target.name.startswith("daytona"):
            from deepgym.sandbox.daytona import DaytonaProvider

            provider = DaytonaProvider(api_key="any", api_url=f"{nowhere}/api", target="us")
        else:
            from deepgym.sandbox.e2b import E2BProvider

            provider = E2BProvider(api_key=target.provider.api_key, api_url=nowhere, sandbox_url=nowhere)
        with pytest.raises(ProviderUnavailable):
            provider.run(target.spec(), target.py("print(1)"), options())
        with pytest.raises(ProviderUnavailable):
            provider.sweep({})
        provider.close()
        return
    if target.name == "ray":
        import ray

        from deepgym.sandbox.ray import RayProvider

        with socket.socket() as closed:  # a port nothing listens on
            closed.bind(("127.0.0.1", 0))
            nowhere = f"127.0.0.1:{closed.getsockname()[1]}"
        monkeypatch.setattr(ray, "is_initialized", lambda: False)  # not the session's own connection
        provider = RayProvider(address=nowhere)
        with pytest.raises(ProviderUnavailable):
            provider.run(target.spec(), target.py("print(1)"), options())
        with pytest.raises(ProviderUnavailable):
            provider.sweep({})
        return
    if not target.name.startswith("docker"):
        pytest.skip(f"{target.name} has no engine or API to lose")
    from deepgym.sandbox.docker import DockerProvider

    monkeypatch.setenv("DOCKER_HOST", f"unix://{tmp_path}/no-engine.sock")
    provider = DockerProvider(attach=target.provider.attach)
    with pytest.raises(ProviderUnavailable):
        provider.run(target.spec(), target.py("print(1)"), options())
    with pytest.raises(ProviderUnavailable):
        provider.sweep({})
    provider.close()
