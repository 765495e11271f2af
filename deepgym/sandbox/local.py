"""The local provider: a sandbox is a scratch folder on this host, and commands are host subprocesses.

It isolates nothing: commands run as you (or, when deepgym runs as root, as the exec's user), with your
files, your network and no memory, pids or CPU limit of the sandbox's own. It is for developing
environments only, so it needs an explicit opt-in (``allow_local=True`` or ``DEEPGYM_ALLOW_LOCAL=1``) and
warns when it starts. What it does promise, and the conformance suite checks:

- paths are the sandbox's: ``put``/``get`` and ``cwd`` resolve under the scratch folder (``/x`` is
  ``<folder>/x``, and ``/tmp`` exists, writable by all); argv is passed as it is;
- a timeout SIGKILLs the command's process group. A command of another uid (deepgym as root) runs as the
  init of a pid namespace of its own, so that kill also ends every process it started, daemonised ones
  included, and nothing else: a ``kill(-1)`` as that uid would reach the uid's processes everywhere on the
  host, other sandboxes' submissions included. A command of your own uid that calls ``setsid()`` escapes
  the group kill;
- ``close`` kills what is still running and removes the folder; a removed folder is SandboxLost.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import warnings
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, BinaryIO

from ..errors import LocalModeNotAllowedError
from .base import (STDERR_TAIL_BYTES, EpisodeRunner, ExecOptions, ExecResult, File, Image, Provider, Sandbox,
                   SandboxLost, SandboxSpec)

OPT_IN_VARIABLE = "DEEPGYM_ALLOW_LOCAL"
DEFAULT_PATH = "/usr/local/bin:/usr/bin:/bin"
LABELS_FILE = ".deepgym-labels"
POLL_S = 0.2
# The host's runner, from the same deepgym as this process (``-I`` ignores PYTHONPATH, so the package's own
# folder is put first explicitly).
LOCAL_RUNNER = (sys.executable, "-I", "-B", "-c",
                "import runpy, sys\nsys.path.insert(0, sys.argv.pop(1))\n"
                "runpy.run_module('deepgym.runner', run_name='__main__', alter_sys=True)")
LOCAL_EPISODE_RUNNER = (sys.executable, "-I", "-B", "-c",
                        "import runpy, sys\nsys.path.insert(0, sys.argv.pop(1))\n"
                        "runpy.run_module('deepgym.runner.episode.verify', run_name='__main__', alter_sys=True)")


class LocalEpisodeRunner(EpisodeRunner):
    """A shell episode on the host (docs/sessions.md): the host's episode runner, unconfined, reading the
    environment's own folders; every command runs as this process's user, in the sandbox's scratch folder."""

    argv = (*LOCAL_EPISODE_RUNNER, str(Path(__file__).resolve().parents[2]))
    own_uids = False

    def user(self, uid: int) -> str | None:
        return None

    def path(self, sandbox: Sandbox, path: str) -> str:
        if not isinstance(sandbox, LocalSandbox):
            raise TypeError(f"a local episode runs in a LocalSandbox, not {type(sandbox).__name__}")
        return str(sandbox.root / path.lstrip("/"))

    def request_fields(self, tests_dir: str, start_dir: str) -> dict[str, Any]:
        return {"unconfined": True, "env_dir": tests_dir, "start_dir": start_dir}


class LocalProvider(Provider):
    """Scratch folders under the system's temporary directory, labelled by a file inside each."""

    name = "local"
    process_isolation = True  # local isolates nothing, whichever isolation a sample asks for
    host_image = "host"

    def __init__(self, *, allow_local: bool | None = None, max_parallel: int = 0):
        allowed = allow_local if allow_local is not None else os.environ.get(OPT_IN_VARIABLE) == "1"
        if not allowed:
            raise LocalModeNotAllowedError(
                "mode='local' runs model-written code on this host as your user, with no isolation. It is for "
                f"developing environments only. Opt in with DeepGym(mode='local', allow_local=True) or "
                f"{OPT_IN_VARIABLE}=1, or use mode='docker'.")
        warnings.warn("deepgym local mode: submissions run UNCONFINED on this host as your user. Never train "
                      "with it.", RuntimeWarning, stacklevel=3)

    def image(self, ref: str) -> Image:
        """Local commands run the host's own files: every reference resolves to itself."""
        return Image(id=ref)

    def runner_argv(self, tests_dir: str) -> list[str]:
        """The host's runner, unconfined, reading the environment's hidden tests from ``tests_dir``."""
        return [*LOCAL_RUNNER, str(Path(__file__).resolve().parents[2]), "--unconfined", "--env-dir", tests_dir]

    def episode_runner(self) -> EpisodeRunner:
        return LocalEpisodeRunner()

    def create(self, spec: SandboxSpec) -> LocalSandbox:
        root = Path(tempfile.mkdtemp(prefix="deepgym-local-"))
        root.chmod(0o711)  # another uid may work in it (deepgym as root), not list it
        (root / "tmp").mkdir(mode=0o1777)
        (root / "tmp").chmod(0o1777)  # mkdir's mode passes through the umask
        (root / LABELS_FILE).write_text("".join(f"{key}={value}\n" for key, value in spec.labels.items()))
        return LocalSandbox(root, spec)

    def sweep(self, labels: Mapping[str, str]) -> int:
        wanted = {f"{key}={value}" for key, value in labels.items()}
        removed = 0
        for folder in Path(tempfile.gettempdir()).glob("deepgym-local-*"):
            try:
                carried = set((folder / LABELS_FILE).read_text().splitlines())
            except OSError:
                continue
            if wanted <= carried:
                shutil.rmtree(folder, ignore_errors=True)
                removed += 1
        return removed


class LocalSandbox(Sandbox):
    """One scratch folder and the subprocesses running in it."""

    def __init__(self, root: Path, spec: SandboxSpec):
        self.root = root
        self.id = root.name
        self.spec = spec
        self._running: set[subprocess.Popen] = set()
        self._lock = threading.Lock()
        self._closed = False

    def _path(self, path: str) -> Path:
        if not self.root.is_dir():
            raise SandboxLost(f"the sandbox's folder {self.root} was removed")
        return self.root / path.lstrip("/")

    def exec(self, argv: Sequence[str], options: ExecOptions) -> ExecResult:
        started = time.monotonic()
        uid, gid = (int(part) for part in (options.user or f"{os.getuid()}:{os.getgid()}").split(":"))
        command = list(argv) if (uid, gid) == (os.getuid(), os.getgid()) else _in_own_pid_namespace(argv, uid, gid)
        try:
            proc = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                    cwd=self._path(options.cwd), env={"PATH": DEFAULT_PATH, **options.env},
                                    start_new_session=True)
        except OSError as exc:  # the command could not start: a shell's statuses, as in a container
            return ExecResult(exit_code=127 if isinstance(exc, FileNotFoundError) else 126, stdout=b"",
                              stderr_tail=str(exc), timed_out=False, elapsed_s=time.monotonic() - started)
        with self._lock:
            self._running.add(proc)
        deadline = started + options.timeout_s
        # The input goes from a thread of its own: communicate() sends it only on its first call, so a slice
        # that ended before the input was all written would leave the command waiting for the rest for ever.
        feeder = threading.Thread(target=_feed, args=(proc.stdin, options.stdin or b""), daemon=True)
        proc.stdin = None  # the feeder's now: communicate() must neither write to it nor close it
        feeder.start()
        try:
            while True:  # in slices, so that a sandbox removed under the command stops it
                try:
                    stdout, stderr = proc.communicate(timeout=max(0.0, min(POLL_S, deadline - time.monotonic())))
                    timed_out = False
                    break
                except subprocess.TimeoutExpired:
                    gone = self._closed or not self.root.is_dir()
                    if gone or time.monotonic() >= deadline:
                        _kill(proc)
                        stdout, stderr = proc.communicate()
                        timed_out = not gone
                        break
        finally:
            # Done once the command's end of the pipe is closed; a process it left behind holding that end keeps
            # the feeder (a daemon thread) blocked, never this call.
            feeder.join(POLL_S)
            with self._lock:
                self._running.discard(proc)
        if self._closed or not self.root.is_dir():
            raise SandboxLost(f"the sandbox {self.root} was closed or removed under a running command")
        code = proc.returncode
        return ExecResult(exit_code=None if timed_out else (128 - code if code < 0 else code),
                          stdout=stdout[:options.stdout_limit],
                          stderr_tail=stderr[-STDERR_TAIL_BYTES:].decode("utf-8", "replace"), timed_out=timed_out,
                          elapsed_s=time.monotonic() - started, stdout_truncated=len(stdout) > options.stdout_limit)

    def put(self, path: str, file: File) -> None:
        target = self._path(path)
        target.write_bytes(file.data)
        os.chmod(target, file.mode)
        if (file.uid, file.gid) != (os.getuid(), os.getgid()):
            os.chown(target, file.uid, file.gid)

    def get(self, path: str) -> File:
        target = self._path(path)
        data = target.read_bytes()
        info = target.stat()
        return File(data=data, mode=info.st_mode & 0o7777, uid=info.st_uid, gid=info.st_gid)

    def close(self) -> None:
        with self._lock:
            if self._closed:
                return
            self._closed = True
            running = list(self._running)
        for proc in running:
            _kill(proc)
        shutil.rmtree(self.root, ignore_errors=True)


def _in_own_pid_namespace(argv: Sequence[str], uid: int, gid: int) -> list[str]:
    """``argv`` as ``uid``:``gid`` with no supplementary groups, as the init of a new pid namespace (with a
    /proc of its own). ``unshare`` stays in the command's process group, and ``--kill-child`` SIGKILLs the init
    when unshare dies; the kernel then kills everything left in the namespace. Exit statuses pass through:
    unshare re-raises the signal its child died of, and setpriv exits 127 or 126 when the command cannot
    start."""
    return ["unshare", "--pid", "--fork", "--kill-child", "--mount-proc",
            "setpriv", f"--reuid={uid}", f"--regid={gid}", "--clear-groups", "--", *argv]


def _kill(proc: subprocess.Popen) -> None:
    """SIGKILL the command's process group (for another uid's command, that ends its whole pid namespace)."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except OSError:
        pass


def _feed(pipe: BinaryIO, data: bytes) -> None:
    """Write ``data`` to a command's stdin and close it; a command that exits without reading it all is no error."""
    try:
        with pipe:
            pipe.write(data)
    except (BrokenPipeError, ValueError):
        pass
