"""The untrusted side of every task. Runs as an unprivileged user, never as the runner.

``python3 -m deepgym_runner.confine.worker MODE MEMORY_MB NOFILE CPU_S ARGS...``, or :func:`main` with those arguments in a
child of the worker zygote (:mod:`zygote`), which is how a confined runner starts its ``function`` workers.

Before anything untrusted runs, the process lowers its own limits (soft = hard, so they cannot be raised
again) and volunteers as the first victim of an out-of-memory kill. Then, by mode:

- ``function SCRATCH REQUESTS_FD REPLIES_FD``: load the submission as module ``solution`` and answer calls.
  The runner sends arguments as JSON; the worker replies with the return value as JSON (for a row's tests,
  both in :mod:`literal`'s richer encoding, keyword arguments too). Only plain data crosses, so a rigged
  ``__eq__`` gains nothing: the runner, or a row's trusted test process, does every comparison.
- ``probe REPO REQUESTS_FD REPLIES_FD``: the same for a patch task's hidden probes: with the patched
  repository importable, run the probes' setup once, then evaluate one probe expression per call.
- ``apply STAGE WORK``: as the patch applier's user, copy the staged repository to WORK, apply STAGE/patch.diff
  with ``git apply`` or else ``patch --fuzz``, then restore the hidden tests over it. Exit 0 applied, 3 not.
- ``pytest REPO RESULTS_FD NODEID...``: run the listed tests with a plugin that reports each outcome on
  RESULTS_FD.

Everything in this process is under the submission's control once its code runs, including this module's
functions; the runner treats whatever comes back as untrusted data.
"""

from __future__ import annotations

import os
import resource
import sys
import types

from .. import wire

TYPE_CHECKING = False  # typing is not imported at start-up: a worker starts once per sample at least
if TYPE_CHECKING:
    from typing import Any, Callable

PATCH_FUZZ = "3"
# shutil, subprocess and tempfile are imported where a mode needs them: together they cost a function task's
# worker some 8 ms of start-up, a noticeable share of a small sample in warm mode.


def fresh_dir(root: str, prefix: str) -> str:
    """A new folder of this user only (0700) under ``root``, as ``tempfile.mkdtemp`` makes without importing it."""
    while True:
        path = os.path.join(root, prefix + os.urandom(6).hex())
        try:
            os.mkdir(path, 0o700)
            return path
        except FileExistsError:
            continue


def confine(memory_mb: int, nofile: int, cpu_s: int) -> None:
    memory = memory_mb * 1024 * 1024
    resource.setrlimit(resource.RLIMIT_AS, (memory, memory))
    resource.setrlimit(resource.RLIMIT_NOFILE, (nofile, nofile))
    resource.setrlimit(resource.RLIMIT_CPU, (cpu_s, cpu_s))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    try:
        with open("/proc/self/oom_score_adj", "w") as f:
            f.write("1000")
    except OSError:
        pass
    os.umask(0o022)


def describe(exc: BaseException) -> str:
    """``Type: message`` for an exception whose ``__str__`` may itself be hostile."""
    try:
        message = str(exc)
    except BaseException:  # noqa: BLE001 - the submission defines this __str__
        message = "<unprintable>"
    return f"{type(exc).__name__}: {message}"[:2000]


def error_type(exc: BaseException) -> str:
    return "solution_oom" if isinstance(exc, MemoryError) else "solution_error"


def serve(requests_fd: int, replies_fd: int, load: Callable[[dict], Callable[[dict], Any]]) -> None:
    """Answer the runner's calls: the first line loads (``load`` returns the call for each later line)."""
    requests = os.fdopen(requests_fd, "rb")
    replies = os.fdopen(replies_fd, "wb")

    def send(message: dict) -> None:
        replies.write(wire.dumps(message).encode() + b"\n")
        replies.flush()

    try:
        call = load(wire.loads(requests.readline()))
    except BaseException as exc:  # noqa: BLE001 - SystemExit and friends are the submission's too
        send({"event": "load_error", "error_type": error_type(exc), "error": describe(exc)})
        return
    send({"event": "ready"})
    for line in requests:
        request = wire.loads(line)
        try:
            encoded = wire.dumps({"id": request["id"], "ok": True, "value": call(request)})
        except BaseException as exc:  # noqa: BLE001
            encoded = wire.dumps({"id": request["id"], "ok": False, "error_type": error_type(exc),
                                  "raises": type(exc).__name__, "error": describe(exc)})
        replies.write(encoded.encode() + b"\n")
        replies.flush()


def _module(name: str, path: str) -> types.ModuleType:
    module = types.ModuleType(name)
    module.__file__ = path
    sys.modules[name] = module
    return module


def load_solution(scratch_root: str) -> Callable[[dict], Callable[[dict], Any]]:
    """Function tasks: run the submission as module ``solution`` in a fresh scratch dir; call its entry point."""
    sys.setrecursionlimit(10_000)
    scratch = fresh_dir(scratch_root, "solution-")
    os.chdir(scratch)
    os.environ["HOME"] = scratch

    def load(hello: dict) -> Callable[[dict], Any]:
        module = _module("solution", os.path.join(scratch, "solution.py"))
        # dont_inherit: the submission is compiled as python3 would compile it, without this module's __future__
        # imports (postponed annotations would let ``def f(x: List[int])`` run without importing List).
        exec(compile(hello.get("prelude", "") + hello["code"], "solution.py", "exec", dont_inherit=True),
             module.__dict__)
        names = hello.get("names") or [hello["entry_point"]]
        # APPS-style rows name a method of ``class Solution`` (LeetCode's layout), as verl's prime_code reads them.
        owner = module.__dict__["Solution"]() if hello.get("solution_class") and "class Solution" in hello["code"] \
            else None
        entries = {name: getattr(owner, name, None) if owner is not None else module.__dict__.get(name)
                   for name in names}
        for name, entry in entries.items():
            if not callable(entry):
                raise NameError(f"the submission does not define a function named {name!r}")
        if not hello.get("literal"):
            return lambda request: entries[names[0]](*request["args"])
        from .. import literal

        def call(request: dict) -> Any:
            kwargs = literal.decode(request["kwargs"]) if request.get("kwargs") is not None else {}
            return literal.encode(entries[request.get("name", names[0])](*literal.decode(request["args"]), **kwargs))

        return call

    return load


def load_probes(repo: str) -> Callable[[dict], Callable[[dict], Any]]:
    """Patch tasks' probes: import from the patched repository, evaluate each probe expression."""
    os.chdir(repo)
    sys.path.insert(0, repo)
    sys.dont_write_bytecode = True
    os.environ["HOME"] = fresh_dir(os.environ.get("TMPDIR", "/tmp"), "home-")

    def load(hello: dict) -> Callable[[dict], Any]:
        namespace = _module("probes", os.path.join(repo, "probes.py")).__dict__
        exec(compile(hello["setup"], "probes.py", "exec"), namespace)
        return lambda request: eval(request["expr"], namespace)

    return load


def apply_patch(stage: str, work: str) -> int:
    """Copy STAGE/repo to WORK, apply STAGE/patch.diff, restore STAGE/hidden over it. 0 applied, 3 not."""
    import shutil
    import subprocess

    repo = os.path.join(work, "repo")
    diff = os.path.join(stage, "patch.diff")
    attempts = [
        ["git", "apply", "--whitespace=nowarn", "-p1", diff],
        ["patch", "--batch", "--forward", "--unified", f"--fuzz={PATCH_FUZZ}", "-p1", "--no-backup-if-mismatch",
         "--reject-file=-", "--input", diff],
    ]
    errors = []
    for command in attempts:
        shutil.rmtree(repo, ignore_errors=True)
        shutil.copytree(os.path.join(stage, "repo"), repo, symlinks=True)
        result = subprocess.run(command, cwd=repo, capture_output=True, text=True, stdin=subprocess.DEVNULL,
                                env={"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": work,
                                     "GIT_CONFIG_NOSYSTEM": "1", "LANG": "C.UTF-8"})
        if result.returncode == 0:
            shutil.copytree(os.path.join(stage, "hidden"), repo, symlinks=True, dirs_exist_ok=True)
            return 0
        errors.append(f"{command[0]}: {(result.stderr or result.stdout).strip()[-600:]}")
    sys.stderr.write("\n".join(errors))
    return 3


class _Reporter:
    """pytest plugin: one JSON line per test outcome on a pipe the runner reads, plus session markers."""

    def __init__(self, fd: int):
        self.out = os.fdopen(fd, "w", buffering=1)

    def _send(self, **message) -> None:
        self.out.write(wire.dumps(message) + "\n")

    def pytest_collection_finish(self, session) -> None:
        self._send(event="collected", count=len(session.items))

    def pytest_runtest_logreport(self, report) -> None:
        if report.when == "call" or report.outcome != "passed":
            self._send(event="test", nodeid=report.nodeid, when=report.when, outcome=report.outcome)

    def pytest_sessionfinish(self, session, exitstatus) -> None:
        self._send(event="finished", exitstatus=int(exitstatus))


def run_pytest(repo: str, results_fd: int, nodeids: list[str]) -> int:
    import pytest

    os.chdir(repo)
    os.environ["HOME"] = fresh_dir(os.environ.get("TMPDIR", "/tmp"), "home-")
    sys.dont_write_bytecode = True
    return int(pytest.main(["-q", "-p", "no:cacheprovider", "-p", "no:randomly", "--rootdir", repo, *nodeids],
                           plugins=[_Reporter(results_fd)]))


def main(argv: list[str]) -> int:
    mode, memory_mb, nofile, cpu_s, rest = argv[0], int(argv[1]), int(argv[2]), int(argv[3]), argv[4:]
    confine(memory_mb, nofile, cpu_s)
    if mode in ("function", "probe"):
        loader = load_solution if mode == "function" else load_probes
        serve(int(rest[1]), int(rest[2]), loader(rest[0]))
        return 0
    if mode == "apply":
        return apply_patch(rest[0], rest[1])
    if mode == "pytest":
        return run_pytest(rest[0], int(rest[1]), rest[2:])
    raise SystemExit(f"unknown worker mode {mode!r}")


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
