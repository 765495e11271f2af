"""The trusted side of a row's assert-style tests (HumanEval's ``check(candidate)``, MBPP's ``assert`` lines).

``main(["tests", MEMORY_MB, NOFILE, CPU_S, "-", REQUESTS_FD, REPLIES_FD])`` in a fresh interpreter
(:func:`~deepgym_runner.confine.processes.python_main`).

The runner starts this process as a user of its own (the request's ``applier_uid``, which a row never needs
for a patch), not as the submission's, so the submission can neither signal, trace nor read it, and the test
code never runs where the submission's code does. The first request line holds the tests:
``{"setup": code, "names": [...], "cases": [code, ...], "start": index}``. ``setup`` (the prompt's helpers
and the dataset's test code) runs once; then every name in ``names`` is bound to a stand-in that forwards
each call to the submission as data (:mod:`literal`), through the runner, and returns the submission's
result as a plain value, so each ``assert`` compares plain values here. Each case's code then runs in turn.

To the runner (replies fd): ``{"event": "call", "name", "args", "kwargs"}`` for each forwarded call (positional
and keyword arguments alike, as data), answered by
``{"reply": {"ok", "value", "raises", "error"}}``; ``{"event": "case", "index", "passed", "error"}`` after
each case; ``{"event": "setup_error", "error"}`` when the dataset's own code does not run; ``{"event": "done"}``.
"""

from __future__ import annotations

import builtins
import os
import sys

from .. import literal, wire
from ..confine.worker import confine, describe

TYPE_CHECKING = False  # typing and json are not imported: this trusted process starts fresh for every sample
if TYPE_CHECKING:
    from typing import Any, Callable

# Exceptions a submission's call may raise into the tests by name; the rest (SystemExit, KeyboardInterrupt,
# GeneratorExit, classes of its own) arrive as RuntimeError, so the tests' ``except Exception`` sees them as
# any failure and nothing stops the tests' process but the tests.
_FORWARDED = {name: value for name, value in vars(builtins).items()
              if isinstance(value, type) and issubclass(value, Exception)}
# Exceptions that end an iteration rather than report a failure: raised inside the tests' ``map()``, ``filter()``
# or an iterator's ``__next__``/``__anext__``, they would end the loop early and skip the cases it had left
# (``all(map(...))`` of nothing is True). They arrive as RuntimeError, as PEP 479 makes them leave a generator.
_ENDS_ITERATION = ("StopIteration", "StopAsyncIteration")


class SubmissionFailed(RuntimeError):
    """The submission's result cannot be used as a value (it is not plain data)."""


def _constructed(kind: type[BaseException], message: str) -> BaseException | None:
    try:
        return kind(message)
    except TypeError:
        return None


def raised(name: str, message: str) -> BaseException:
    """The exception the tests see for a submission's call that raised ``name`` (the worker's word, so only
    the builtin of that name or RuntimeError). A builtin whose constructor wants more than a message
    (UnicodeDecodeError, ExceptionGroup) arrives as its nearest ancestor that takes one, so the tests'
    ``except ValueError`` still catches it."""
    if name in _ENDS_ITERATION:
        return RuntimeError(f"the submission raised {name}: {message}")
    kinds = _FORWARDED.get(name, RuntimeError).__mro__
    return next(error for error in (_constructed(kind, message) for kind in kinds) if error is not None)


def _stand_in(name: str, send: Callable[[dict], None], receive: Callable[[], dict]) -> Callable[..., Any]:
    def call(*args: Any, **kwargs: Any) -> Any:
        send({"event": "call", "name": name, "args": literal.encode(list(args)), "kwargs": literal.encode(kwargs)})
        reply = receive()["reply"]
        if reply["ok"]:
            value = literal.decode(reply["value"])
            if value is literal.INVALID:
                raise SubmissionFailed(f"{name}() returned a value that is not plain data")
            return value
        raise raised(reply.get("raises") or "", reply.get("error") or "")

    call.__name__ = call.__qualname__ = name
    return call


def run(requests_fd: int, replies_fd: int) -> None:
    requests = os.fdopen(requests_fd, "rb")
    replies = os.fdopen(replies_fd, "wb")

    def send(message: dict) -> None:
        replies.write(wire.dumps(message).encode() + b"\n")
        replies.flush()

    def receive() -> dict:
        return wire.loads(requests.readline())

    tests = receive()
    namespace: dict[str, Any] = {"__name__": "__deepgym_tests__", "__builtins__": builtins}
    try:
        exec(compile(tests["setup"], "tests.py", "exec"), namespace)
    except BaseException as exc:  # noqa: BLE001 - the dataset's code is at fault, and the runner says so
        send({"event": "setup_error", "error": describe(exc)})
        return
    for name in tests["names"]:
        namespace[name] = _stand_in(name, send, receive)
    for index in range(tests["start"], len(tests["cases"])):
        error = None
        try:
            exec(compile(tests["cases"][index], f"case-{index}.py", "exec"), namespace)
        except AssertionError as exc:
            error = "an assertion failed" + (f": {describe(exc)}" if exc.args else "")
        except BaseException as exc:  # noqa: BLE001 - a test that raises on the submission's values fails
            error = describe(exc)
        send({"event": "case", "index": index, "passed": error is None, "error": error})
    send({"event": "done"})


def main(argv: list[str]) -> int:
    mode, memory_mb, nofile, cpu_s, _path, requests_fd, replies_fd = argv
    if mode != "tests":
        raise SystemExit(f"unknown mode {mode!r}")
    confine(int(memory_mb), int(nofile), int(cpu_s))
    sys.setrecursionlimit(10_000)
    run(int(requests_fd), int(replies_fd))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
