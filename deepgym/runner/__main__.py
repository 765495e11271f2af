"""Entry point: ``python3 -m deepgym_runner [--request FILE] [--env-dir DIR] [--scratch-root DIR] [--unconfined]``,
or ``python3 -m deepgym_runner serve`` for warm mode's long-lived server (:mod:`serve`): one request judged by
:mod:`oneshot`, whose confinement is the container's (:mod:`confine.container`) or, ``--unconfined``, the host's
local mode (:mod:`confine.local`).

The host starts it as ``python3 -I -B -c "from deepgym_runner.__main__ import leave, main; leave(main())"``
(:data:`deepgym.sandbox.base.IMAGE_RUNNER`), the same without runpy's imports.

Reads one request (stdin by default), writes protocol events to stdout, exits 0 whenever it wrote a report
and the final ``done`` event (whatever the verdict) and 2 when the request itself (or an argument) was unreadable.

Confined, the runner first drops every privilege it does not need (:func:`privileges.drop_privileges`), then
checks the image and the request's uids and scratch folder; any of them wrong is a no-verdict report.
"""

from __future__ import annotations

import os
import sys

from .protocol import DEFAULT_ENV_DIR, SCRATCH_ROOT


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["serve"]:
        from .serve import main as serve

        return serve(argv[1:])
    options = parse_options(argv)
    if isinstance(options, str):
        print(f"deepgym_runner: {options}\n{__doc__.splitlines()[0]}", file=sys.stderr)
        return 2
    from .oneshot import judge_request

    workers = None
    if options["--unconfined"]:
        from .confine.local import Local

        confinement = Local()
    else:
        from .confine.container import Container
        from .confine.forked import Workers

        confinement = Container()
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
    return judge_request(raw, options["--env-dir"], options["--scratch-root"], confinement, workers)


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
