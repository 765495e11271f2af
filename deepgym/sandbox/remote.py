"""What every remote provider's sandbox shares: exec with stdin, a deadline of our own, separate stdout and
stderr, files with modes and owners, all on top of the three things each provider's API offers (upload a file,
run a command string, delete the sandbox).

Remote APIs differ exactly where judging is fragile: Daytona merges stderr into stdout, returns text and
discards all output on its exec deadline; E2B raises for a non-zero exit; Modal's ``wait()`` returns -1 on its
deadline; none but Modal takes stdin. So a :class:`RemoteSandbox` never trusts the provider with a command's
outcome. Each exec uploads one file into a root-only folder of the sandbox (an options header, then the
stdin bytes; nothing secret ever appears on a command line, which ``/proc`` shows to every user) and runs
:data:`EXEC_HELPER` as root on it. The helper unlinks the file, runs the command as its user with its cwd and
environment (any uid but root with ``no_new_privs``, as docker's ``no-new-privileges``: no setuid binary of the
image makes the agent root), enforces the deadline itself (killing the whole tree: every process of the user,
and every descendant, daemons included, since it is their subreaper) and prints one report line: the exit
status, the stdout (base64, capped), the stderr tail, whether the deadline fired. The provider's own deadline is set
later (``PROVIDER_GRACE_S``); a provider exec that ends without the helper's report means the sandbox went
away or was cut off: :class:`~deepgym.sandbox.base.SandboxLost`, never a guess at an exit status.

An adapter implements :class:`Remote` (one provider sandbox) and translates its SDK's exceptions to the
typed sandbox errors in one place; everything else is here.
"""

from __future__ import annotations

import base64
import json
import os
import shlex
import threading
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence

from .base import STDERR_TAIL_BYTES, ExecOptions, ExecResult, File, Sandbox, SandboxLost, SandboxSpec, StartFailure
from .quota import AccountLimits
from .docker.scripts import FILE_HELPER, FILE_TIMEOUT_S, file_error, read_file_reply

# How much later than the helper's own deadline the provider's exec deadline is: the helper's kill and report.
PROVIDER_GRACE_S = 30.0
REPORT_MARK = "DEEPGYM-EXEC-REPORT"
# Run as root by the sandbox's python3: argv[1] is the exec file (a JSON header line, then stdin).
EXEC_HELPER = r'''
import base64, ctypes, json, os, signal, subprocess, sys, threading, time
path = sys.argv[1]
with open(path, "rb") as f:
    header = f.readline()
    stdin = f.read()
os.unlink(path)
o = json.loads(header)
libc = ctypes.CDLL(None, use_errno=True)
libc.prctl(36, 1, 0, 0, 0)  # PR_SET_CHILD_SUBREAPER: orphans come back to us
uid, gid = (int(x) for x in o["user"].split(":"))
# PR_SET_NO_NEW_PRIVS, as docker's no-new-privileges: a setuid binary of the image makes no other uid root
unprivileged = (lambda: libc.prctl(38, 1, 0, 0, 0)) if uid else None
env = {"PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", **o["env"]}
start = time.monotonic()
try:
    child = subprocess.Popen(o["argv"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             cwd=o["cwd"], env=env, user=uid, group=gid, extra_groups=[], start_new_session=True,
                             preexec_fn=unprivileged)
except OSError as exc:
    print(o["mark"], json.dumps({"spawn_error": repr(exc)}), flush=True)
    sys.exit(0)
out, err, over = bytearray(), bytearray(), [False]
def feed():
    try:
        child.stdin.write(stdin)
    except OSError:
        pass
    try:
        child.stdin.close()
    except OSError:
        pass
def drain_out():
    while True:
        chunk = child.stdout.read1(1 << 16)
        if not chunk:
            return
        room = o["stdout_limit"] - len(out)
        over[0] = over[0] or len(chunk) > room
        out.extend(chunk[:max(0, room)])
def drain_err():
    while True:
        chunk = child.stderr.read1(1 << 16)
        if not chunk:
            return
        err.extend(chunk)
        if len(err) > 2 * o["tail"]:
            del err[:-o["tail"]]
threads = [threading.Thread(target=t, daemon=True) for t in (feed, drain_out, drain_err)]
for t in threads:
    t.start()
def tree():
    me, parents = os.getpid(), {}
    for p in os.listdir("/proc"):
        if p.isdigit():
            try:
                data = open("/proc/%s/stat" % p, "rb").read()
                parents[int(p)] = int(data[data.rindex(b")") + 2:].split()[1])
            except (OSError, ValueError):
                pass
    found = []
    for pid in parents:
        seen, up = 0, parents.get(pid)
        while up and seen < 64:
            if up == me:
                found.append(pid)
                break
            up, seen = parents.get(up), seen + 1
    return found
def kill_user():
    if uid == 0:
        return
    pid = os.fork()
    if pid == 0:
        try:
            os.setgroups([]); os.setresgid(gid, gid, gid); os.setresuid(uid, uid, uid)
            os.kill(-1, signal.SIGKILL)
        finally:
            os._exit(0)
    os.waitpid(pid, 0)
timed_out = False
try:
    child.wait(timeout=max(0.0, o["timeout_s"] - (time.monotonic() - start)))
except subprocess.TimeoutExpired:
    timed_out = True
    for _ in range(200):
        kill_user()
        alive = tree()
        for pid in alive:
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        try:
            while os.waitpid(-1, os.WNOHANG)[0]:
                pass
        except ChildProcessError:
            pass
        if not alive:
            break
        time.sleep(0.01)
    child.wait()
for t in threads[1:]:
    t.join(10)
code = child.returncode
print(o["mark"], json.dumps({"exit_code": None if timed_out else (128 - code if code < 0 else code),
                             "timed_out": timed_out, "stdout": base64.b64encode(bytes(out)).decode(),
                             "truncated": over[0], "stderr": err[-o["tail"]:].decode("utf-8", "replace"),
                             "elapsed_s": time.monotonic() - start}), flush=True)
'''


# Run as root in the sandbox: take every interface but loopback down and check that none is up. For a provider
# with no network-off setting of its own (Apple's container VMs); the submission holds no CAP_NET_ADMIN to undo it.
NETWORK_DOWN = r'''
import fcntl, os, socket, struct, sys
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
for name in sorted(os.listdir("/sys/class/net")):
    if name == "lo":
        continue
    request = struct.pack("16sH14x", name.encode(), 0)
    flags = struct.unpack("16sH14x", fcntl.ioctl(s, 0x8913, request))[1]
    fcntl.ioctl(s, 0x8914, struct.pack("16sH14x", name.encode(), flags & ~1))
up = [n for n in os.listdir("/sys/class/net")
      if n != "lo" and int(open("/sys/class/net/%s/flags" % n).read(), 16) & 1]
print("NETWORK-DOWN", "ok" if not up else "still up: " + " ".join(up))
'''


# A provider's sandbox has a writable root, where Debian leaves /var/tmp and /run/lock writable by everyone;
# a submission could leave files there for a later command of a session. After this, as in docker mode, the
# only places it can write are /tmp, /dev/shm and /dev/mqueue.
CLOSE_SHARED_DIRS = ('for d in /var/tmp /run/lock; do if [ -d "$d" ] && [ ! -L "$d" ]; then chmod o-w "$d"; fi; '
                     'done')


class Remote(ABC):
    """One sandbox of a provider, as its API offers it. Each method raises the typed sandbox errors only:
    the adapter translates its SDK's exceptions (an exit status is never an exception here)."""

    id: str

    @abstractmethod
    def upload(self, path: str, data: bytes) -> None:
        """Write ``data`` at ``path`` (its folder exists), overwriting."""

    @abstractmethod
    def shell(self, script: str, timeout_s: float) -> str:
        """Run ``script`` with ``/bin/sh -c`` as root and return its stdout (stderr may be mixed in: only the
        helper's report line is read). Raises SandboxLost when the provider's own deadline passes."""

    @abstractmethod
    def delete(self) -> None:
        """Remove the sandbox. Never raises."""


def create_sandbox(limits: AccountLimits, make: Callable[[], Remote], spec: SandboxSpec, *,
                   network_down: bool = False) -> RemoteSandbox:
    """A :class:`RemoteSandbox` over the sandbox ``make()`` creates, under the account's ``limits``: a slot is
    taken first and comes back when the sandbox is closed, or at once when any step of the start fails (then
    a sandbox already made is deleted, so a failed start leaks nothing). A remote provider makes no mounts: an
    episode makes its folders itself (:mod:`deepgym.session.mounts`), and a spec that asks for them is refused."""
    if spec.mounts:
        raise ValueError(f"a remote provider makes no mounts ({', '.join(m.path for m in spec.mounts)}); make the "
                         f"folders in the sandbox instead (deepgym.session.mounts.make_folders)")
    release = limits.acquire(spec.lifetime_s)
    remote = None
    try:
        remote = make()
        return RemoteSandbox(remote, spec, on_close=release, network_down=network_down)
    except BaseException:
        if remote is not None:
            remote.delete()
        release()
        raise


def helper_command(python: str, exec_file: str) -> str:
    """The command line of one exec: constant but for the file's name."""
    return " ".join(shlex.quote(part) for part in (python, "-I", "-S", "-c", EXEC_HELPER, exec_file))


def parse_report(output: str, mark: str) -> dict | None:
    """The helper's report in ``output``, or None when it never wrote one."""
    for line in reversed(output.splitlines()):
        if line.startswith(mark + " "):
            return json.loads(line[len(mark) + 1:])
    return None


class RemoteSandbox(Sandbox):
    """A :class:`Sandbox` over a provider's :class:`Remote`; see the module's docstring."""

    def __init__(self, remote: Remote, spec: SandboxSpec, *, python: str = "python3", on_close=None,
                 network_down: bool = False):
        self.remote = remote
        self.id = remote.id
        self.spec = spec
        self.python = python
        self._on_close = on_close
        self._closed = False
        self._lock = threading.Lock()
        self.folder = f"/tmp/.deepgym-exec-{os.urandom(8).hex()}"
        # The one folder the exec files cross: root's, mode 0700, made before any untrusted code runs.
        try:
            self.remote.shell(f"umask 077 && mkdir {self.folder} && {CLOSE_SHARED_DIRS}", FILE_TIMEOUT_S)
            if network_down and not spec.network:
                said = self.remote.shell(" ".join(shlex.quote(p) for p in (python, "-I", "-S", "-c", NETWORK_DOWN)),
                                         FILE_TIMEOUT_S)
                if "NETWORK-DOWN ok" not in said:
                    raise StartFailure(f"cannot take sandbox {self.id}'s network down from inside: {said[-300:]!r}")
        except SandboxLost as exc:  # before anything ran, a sandbox lost is one that never started
            raise StartFailure(exc.reason) from None

    def exec(self, argv: Sequence[str], options: ExecOptions) -> ExecResult:
        if self._closed:
            raise SandboxLost(f"sandbox {self.id} is closed")
        started = time.monotonic()
        mark = f"{REPORT_MARK}-{os.urandom(8).hex()}"
        header = {"argv": list(argv), "user": options.user or self.spec.user, "cwd": options.cwd,
                  "env": dict(options.env), "timeout_s": options.timeout_s, "stdout_limit": options.stdout_limit,
                  "tail": STDERR_TAIL_BYTES, "mark": mark}
        exec_file = f"{self.folder}/{os.urandom(8).hex()}"
        self.remote.upload(exec_file, json.dumps(header).encode() + b"\n" + options.stdin)
        output = self.remote.shell(helper_command(self.python, exec_file), options.timeout_s + PROVIDER_GRACE_S)
        report = parse_report(output, mark)
        if report is None:
            raise SandboxLost(f"the command in sandbox {self.id} ended without the exec helper's report (the "
                              f"sandbox was killed, removed or cut off under it): {output[-300:]!r}")
        if "spawn_error" in report:
            # The command could not start (no such program): a shell's "not found" status, as docker gives.
            return ExecResult(exit_code=127, stdout=b"", stderr_tail=report["spawn_error"], timed_out=False,
                              elapsed_s=time.monotonic() - started)
        return ExecResult(exit_code=report["exit_code"], stdout=base64.b64decode(report["stdout"]),
                          stderr_tail=report["stderr"], timed_out=report["timed_out"],
                          elapsed_s=time.monotonic() - started, stdout_truncated=report["truncated"])

    def put(self, path: str, file: File) -> None:
        result = self.exec([self.python, *FILE_HELPER[1:], "put", path, str(file.mode), str(file.uid),
                            str(file.gid)], ExecOptions(stdin=file.data, user="0:0", timeout_s=FILE_TIMEOUT_S))
        if result.exit_code != 0:
            raise file_error(path, result)

    def get(self, path: str) -> File:
        return read_file_reply(path, self.exec([self.python, *FILE_HELPER[1:], "get", path],
                                               ExecOptions(user="0:0", timeout_s=FILE_TIMEOUT_S)))

    def close(self) -> None:
        with self._lock:
            if self._closed:
                return
            self._closed = True
        try:
            self.remote.delete()
        finally:
            if self._on_close is not None:
                self._on_close()
