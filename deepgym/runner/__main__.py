"""Entry point: ``python3 -m deepgym_runner [--request FILE] [--env-dir DIR] [--scratch-root DIR] [--unconfined]``,
or ``python3 -m deepgym_runner serve`` for warm mode's long-lived server (:mod:`serve`).

Reads one request (stdin by default), writes protocol events to stdout, exits 0 whenever it wrote a report
and the final ``done`` event (whatever the verdict) and 2 when the request itself (or an argument) was unreadable.

Confined, the runner first drops every privilege it does not need (:func:`privileges.drop_privileges`), then
checks the image and the request's uids and scratch folder; any of them wrong is a no-verdict report.
"""

from __future__ import annotations

import os
import stat
import sys
import threading

from . import judge
from .forked import WorkerConnection, Workers
from .privileges import drop_privileges
from .protocol import DONE, REPORT, REQUIRED_FILES, SCRATCH_ROOT, STARTED, Request, event_line

DEFAULT_ENV_DIR = "/opt/deepgym/env"


def environment_problem(env_dir: str, kind: str, confined: bool) -> str | None:
    """Why this image cannot judge fairly, or None. Shipped self-check: a misbuilt image (hidden tests the
    submission could read, a runner that is not root) gives no verdict, never a score."""
    if not os.path.isdir(env_dir):
        return f"the hidden tests directory {env_dir} does not exist"
    for required in REQUIRED_FILES.get(kind, ()):
        if not os.path.exists(os.path.join(env_dir, required)):
            return f"the hidden tests directory {env_dir} has no {required} (needed by {kind} tasks)"
    if confined:
        info = os.stat(env_dir)
        if info.st_uid != 0 or stat.S_IMODE(info.st_mode) & 0o077:
            return f"{env_dir} is readable by other users (mode {stat.S_IMODE(info.st_mode):o}); rebuild the image"
        if os.geteuid() != 0:
            return "the runner must start as root (with at least CAP_SETUID, CAP_SETGID and CAP_KILL) to confine submissions"
    return None


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["serve"]:
        from .serve import main as serve

        return serve(argv[1:])
    options = parse_options(argv)
    if isinstance(options, str):
        print(f"deepgym_runner: {options}\n{__doc__.splitlines()[0]}", file=sys.stderr)
        return 2
    workers = None
    if not options["--unconfined"]:
        try:
            # Before the request is read (a prewarmed runner waits here for its stdin): the zygote that forks
            # the function workers must never hold anything of a sample's.
            workers = Workers().connect()
        except OSError:
            pass  # every worker is then a fresh interpreter, as it would be without the zygote
    try:
        if options["--request"]:
            with open(options["--request"], "rb") as f:
                raw = f.read()
        else:
            raw = sys.stdin.buffer.read()
    except OSError as exc:
        print(f"deepgym_runner: unreadable request: {exc}", file=sys.stderr)
        return 2
    return judge_request(raw, options["--env-dir"], options["--scratch-root"], confined=not options["--unconfined"],
                         workers=workers)


def parse_options(argv: list[str]) -> dict | str:
    """The one-shot runner's options (see the module's docstring), or what is wrong with ``argv``. By hand, not
    argparse: its imports alone (re, gettext) cost a fresh container a few milliseconds of CPU per sample."""
    options: dict = {"--request": None, "--env-dir": DEFAULT_ENV_DIR, "--scratch-root": SCRATCH_ROOT,
                     "--unconfined": False}
    words = iter(argv)
    for word in words:
        name, has_value, value = word.partition("=")
        if name == "--unconfined" and not has_value:
            options[name] = True
        elif name in options and name != "--unconfined":
            value = value if has_value else next(words, None)
            if not value:
                return f"option {name} needs a value"
            options[name] = value
        else:
            return f"unknown argument {word!r}"
    return options


def judge_request(raw: bytes, env_dir: str, scratch_root: str, *, confined: bool,
                  workers: WorkerConnection | None = None) -> int:
    """Judge the request ``raw`` and write its events on stdout: the whole life of a one-shot runner, and of
    each child of warm mode's server (:mod:`serve`). Returns the exit status. ``workers``: the connection to a
    worker zygote started before ``raw`` was read (:class:`forked.Workers`), which then forks the workers."""
    try:
        request = Request.from_json(raw)
    except Exception as exc:  # noqa: BLE001 - anything unreadable is the host's problem, reported on stderr
        print(f"deepgym_runner: unreadable request: {exc}", file=sys.stderr)
        return 2

    writing = threading.Lock()  # the heartbeat thread writes events too: one whole line at a time

    def emit(event: str, payload: dict | None = None) -> None:
        with writing:
            sys.stdout.write(event_line(request.nonce, event, payload))
            sys.stdout.flush()

    heartbeat = judge.Heartbeat(emit)
    try:
        problem = environment_problem(env_dir, request.kind, confined)
        if problem is None and confined:
            problem = drop_privileges()
        if problem is None:
            problem = request.problem(os.geteuid() if confined else -1, scratch_root)
        if problem is not None:
            report = judge.no_verdict("verifier_error", problem)
        else:
            emit(STARTED)
            report = judge.run(request, env_dir, confined, scratch_root, emit, heartbeat, workers)
    except Exception:  # noqa: BLE001 - the runner's own failure is never the submission's
        import traceback

        report = judge.no_verdict("verifier_error", "the runner failed:\n" + traceback.format_exc(limit=8))
    emit(REPORT, {"report": report})
    emit(DONE, heartbeat.facts())
    return 0


def leave(code: int) -> None:
    """End the process with ``code`` once stdout and stderr are flushed (120 when they cannot be, as Python
    exits), without the interpreter's teardown of every module and object: nothing of the runner's is left
    to finalise (its untrusted processes are killed, its folders removed, the zygote ends when its socket
    closes), and the teardown costs a fresh runner milliseconds of CPU per sample."""
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            code = 120
    os._exit(code)


if __name__ == "__main__":
    leave(main())
