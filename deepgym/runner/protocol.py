"""The wire format between the host and the runner, and the error-type vocabulary both sides speak.

Request: one JSON object on the runner's stdin (or in a file), see :class:`Request`.

Events: the runner writes lines ``@@deepgym <nonce> <json>`` to its stdout. Only the runner writes there; the
submission's processes get pipes of their own. The host ignores every other line and every line with another
nonce. Five events exist, and they are the runner's facts: the host infers nothing from a provider's exit
code conventions (:func:`deepgym.verdict.classify`).

- ``started``: the request was read and the hidden tests were found.
- ``heartbeat``: every :data:`HEARTBEAT_S` while the runner judges, from a thread of its own:
  ``{"event": "heartbeat", "wall_s": 12.0, "runner_cpu_s": 0.31, "submission_cpu_s": 4.2, "oom_kills": 0,
  "cpu_stall_s": 0.8}``: the seconds since the runner started, its own CPU seconds and the submission's, the
  processes the kernel's OOM killer killed in the runner's cgroup and the seconds some task waited for a CPU
  (PSI ``some``, host-wide where the kernel does not scope it), the last three since judging began. The last two are ``null`` where
  the runner cannot measure them (no trusted cgroup, no PSI). Whose CPU grew in the last beats tells, after a
  missed host deadline, a submission that starved its runner from a runner that hung on its own and from a
  sandbox the host starved; an OOM kill after ``in_play`` tells a sandbox that ran out of memory.
- ``in_play``: submission code is about to run. Anything that goes wrong after this line may be the
  submission's doing; anything before it cannot be.
- ``report``: the final report (exactly one). See :mod:`deepgym_runner.oneshot`.
- ``done``: the last line, right after the report, with the same facts as a heartbeat: the runner ended on
  its own. A runner stream that stops without ``done`` and
  with an unknown exit is a sandbox that vanished.
"""

from __future__ import annotations

import math
import posixpath

from . import wire

TYPE_CHECKING = False  # typing and dataclasses are not imported at start-up: their milliseconds are paid per sample
if TYPE_CHECKING:
    from typing import Any

MARKER = "@@deepgym"
# Warm mode's server (:mod:`serve`) ends each sample with one line of its own, after the runner's events.
SERVE_MARKER = "@@deepgym-serve"
# Where an environment image keeps its hidden tests (root-only).
DEFAULT_ENV_DIR = "/opt/deepgym/env"
KINDS = ("function", "program", "patch")
# The kinds whose submission is a unified diff: a baked repository's, or a SWE-style instance image's.
DIFF_KINDS = ("patch", "swe")
# Every kind of environment: the runner's judged kinds, and multi-turn sessions (deepgym/runner/episode/verify.py).
ENVIRONMENT_KINDS = (*KINDS, "session", "desktop")
# What each kind's hidden tests hold (an environment's tests/ folder, /opt/deepgym/env in the image).
REQUIRED_FILES = {"function": ("cases.py",), "program": ("cases",), "patch": ("repo", "hidden", "spec.json", "probes.json")}
SCORINGS = ("all_or_nothing", "partial")
STARTED = "started"
IN_PLAY = "in_play"
HEARTBEAT = "heartbeat"
REPORT = "report"
DONE = "done"
# Every heartbeat (and ``done``) carries these numbers...
HEARTBEAT_FIELDS = ("wall_s", "runner_cpu_s", "submission_cpu_s")
# ... and these, each a number or null when the runner cannot measure it.
OPTIONAL_FACTS = ("oom_kills", "cpu_stall_s")
# Seconds between heartbeats. About 150 bytes each: an hour of judging writes some 530 KiB, far below what the
# host keeps of the runner's stdout.
HEARTBEAT_S = 1.0

# error_type -> (scored, meaning). Scored types are the submission's fault and come with a score (0 unless
# some cases passed under partial credit); the others mean "no verdict": the infrastructure failed.
ERROR_TYPES: dict[str, tuple[bool, str]] = {
    "no_code_block": (True, "the response had no fenced code block; nothing was run"),
    "wrong_answer": (True, "the submission ran but returned or printed a wrong result"),
    "solution_error": (True, "the submission did not compile, raised, crashed or exited early"),
    "solution_timeout": (True, "the submission used up its CPU time, or slept past its wall-clock limit"),
    "solution_oom": (True, "the submission ran out of memory (its own limit, or the whole sandbox)"),
    "output_limit_exceeded": (True, "the submission wrote more output than the limit allows"),
    "tests_failed": (True, "the patch applied but some of the listed tests failed"),
    "invalid_patch": (True, "the response has no usable unified diff (none, malformed, or binary)"),
    "patch_apply_failed": (True, "the diff does not apply, neither with git apply nor with patch --fuzz"),
    "test_infra_tampering": (True, "the diff touches tests or what the test run loads (conftest.py, config, .pth)"),
    "policy_sandbox_failure": (True, "a session's agent broke its own sandbox: an action or the final verifier "
                                     "could not run in it (killed, hung, its pids or disk used up)"),
    "service_failed": (True, "a session's service was not running at grading, or did not answer its health "
                             "check with HTTP 200"),
    "no_action": (True, "a session ended before the agent ran a single action"),
    "daemon_unavailable": (False, "the container engine or provider could not be reached"),
    "image_missing": (False, "the environment's image is not built or not pulled"),
    "image_stale": (False, "the environment's image was built from other environment files than the host's"),
    "sandbox_start_failure": (False, "the sandbox could not be created or started"),
    "sandbox_lost": (False, "the sandbox was killed or removed from outside, the connection to it was lost, or its "
                            "runner fell silent (no heartbeat) before the host's deadline"),
    "verifier_error": (False, "the runner or the hidden tests failed, or their report was unreadable"),
    "verifier_timeout": (False, "the runner missed the host's deadline on its own: before any submission code ran, "
                                "or busy with its own work (it got a third of a CPU and still did not report); or a "
                                "time limit fired before any process of the submission had started"),
    "invalid_score": (False, "the report's score was not a finite number in [0, 1]"),
    "host_overloaded": (False, "a wall-clock limit or the host's deadline fired while the host starved the sandbox "
                               "of CPU"),
    "image_unhealthy": (False, "a canary (the environment's reference or known-wrong solution, judged now and then "
                               "in the same image) got a wrong verdict, so the image's verdicts cannot be trusted "
                               "until a canary passes again"),
    "cancelled": (False, "deepgym was shutting down (SIGTERM, SIGINT, deepgym.shutdown) before the sample had its "
                         "verdict, so it was stopped or never started"),
}


def is_scored(error_type: str) -> bool:
    """True when ``error_type`` is the submission's fault (a score), False when it means no verdict."""
    return ERROR_TYPES[error_type][0]


class Record:
    """A frozen record of named fields, as a frozen dataclass is (keyword or positional construction, class
    attributes as defaults, equality, hash, repr, :meth:`replace`), without importing dataclasses: with inspect,
    ast and tokenize it costs every fresh runner some 10 ms of CPU. A subclass's fields are its annotated class
    attributes, in order (``FIELDS``); the unannotated ones are constants."""

    FIELDS: tuple[str, ...] = ()

    def __init_subclass__(cls) -> None:
        super().__init_subclass__()
        cls.FIELDS = tuple(cls.__dict__.get("__annotations__", {}))

    def __init__(self, *args: Any, **kwargs: Any):
        cls = type(self)
        if len(args) > len(cls.FIELDS):
            raise TypeError(f"{cls.__name__}() takes at most {len(cls.FIELDS)} positional arguments")
        values = dict(zip(cls.FIELDS, args))
        for name, value in kwargs.items():
            if name not in cls.FIELDS:
                raise TypeError(f"{cls.__name__}() got an unexpected keyword argument {name!r}")
            if name in values:
                raise TypeError(f"{cls.__name__}() got multiple values for argument {name!r}")
            values[name] = value
        for name in cls.FIELDS:
            if name not in values:
                if not hasattr(cls, name):
                    raise TypeError(f"{cls.__name__}() missing required argument {name!r}")
                values[name] = getattr(cls, name)
            object.__setattr__(self, name, values[name])

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError(f"cannot assign to field {name!r} of a frozen {type(self).__name__}")

    def __delattr__(self, name: str) -> None:
        raise AttributeError(f"cannot delete field {name!r} of a frozen {type(self).__name__}")

    def _values(self) -> tuple[Any, ...]:
        return tuple(getattr(self, name) for name in self.FIELDS)

    def __eq__(self, other: object) -> bool:
        return type(other) is type(self) and self._values() == other._values()  # type: ignore[attr-defined]

    def __hash__(self) -> int:
        return hash((type(self), self._values()))

    def __repr__(self) -> str:
        return f"{type(self).__name__}({', '.join(f'{name}={getattr(self, name)!r}' for name in self.FIELDS)})"

    def __reduce__(self) -> tuple[Any, ...]:
        return type(self), self._values()

    def replace(self, **changes: Any) -> Any:
        """A copy with ``changes``, as ``dataclasses.replace`` makes."""
        return type(self)(**{**{name: getattr(self, name) for name in self.FIELDS}, **changes})


class Limits(Record):
    """Resource limits for one sample. CPU limits count the submission's own CPU time, so a busy host does
    not make a correct answer time out; wall-clock limits are a backstop derived from them."""

    case_cpu_s: float = 2.0
    total_cpu_s: float = 20.0
    memory_mb: int = 512
    pids: int = 64
    nofile: int = 256
    output_kb: int = 1024
    tmpfs_mb: int = 64
    cpus: float = 1.0

    # A case may take this many times its CPU limit in wall-clock time before the wall limit fires.
    WALL_FACTOR = 3.0
    # A submission still runnable but starved of CPU when its wall limit fires gets up to this many wall
    # limits in all to reach its CPU limit (a busy host slows it; it is judged on its own CPU time).
    STARVED_GRACE = 3.0
    # Seconds the host waits beyond the runner's own budget before it kills the sandbox.
    HOST_GRACE_S = 30.0

    @property
    def case_wall_s(self) -> float:
        return self.case_cpu_s * self.WALL_FACTOR + 1.0

    @property
    def total_wall_s(self) -> float:
        return self.total_cpu_s * self.WALL_FACTOR + 5.0

    @property
    def runner_budget_s(self) -> float:
        """The longest the runner may judge: its total wall-clock budget, plus one case starved to its longest.
        A runner still judging after this is late, whatever the submission does."""
        return self.total_wall_s + self.case_wall_s * self.STARVED_GRACE

    @property
    def host_deadline_s(self) -> float:
        """The runner's budget plus slack for start-up and for the report to cross."""
        return self.runner_budget_s + self.HOST_GRACE_S

    def to_dict(self) -> dict[str, Any]:
        return {name: getattr(self, name) for name in self.FIELDS}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Limits:
        unknown = sorted(set(data) - set(cls.FIELDS))
        if unknown:
            raise ValueError(f"unknown limit(s) {unknown}; known: {sorted(cls.FIELDS)}")
        return cls(**data)


# Submission uids the runner accepts: never root or a system account, never past what uid_t holds.
MIN_UID = 1000
MAX_UID = 2**31 - 1
DEFAULT_UID = 10000
SCRATCH_ROOT = "/tmp"


class Request(Record):
    """What the host asks of the runner for one sample.

    ``uid`` runs the submission and ``applier_uid`` (default ``uid + 1``) applies a patch task's diff; the
    runner kills and measures each by that uid alone, so a warm pool or a session gives every sample uids of
    its own and nothing else in the sandbox is touched. ``scratch`` is the submission's directory: an absolute
    path under the runner's scratch root (``/tmp`` unless told otherwise) that must not exist yet; the runner
    creates it owned by ``uid``, mode 0700, and removes it afterwards. None: a fresh one under the root."""

    nonce: str
    kind: str
    submission: str
    entry_point: str | None = None
    variant: int = 0
    scoring: str = "all_or_nothing"
    limits: Limits = Limits()
    uid: int = DEFAULT_UID
    applier_uid: int | None = None
    scratch: str | None = None
    # A dataset row's tests (kind ``row``, see deepgym_runner.kinds.rows); environments keep theirs in the image.
    tests: dict[str, Any] | None = None

    @property
    def applier(self) -> int:
        return self.uid + 1 if self.applier_uid is None else self.applier_uid

    @property
    def uids(self) -> set[int]:
        """The users this sample's processes may run as: the submission's, and the applier's for the judges
        that run something as it (a diff's applier, a row's assert tests). The runner starts no process as any
        other user, and warm mode's clean-up sweeps these alone: a sweep of a user that ran nothing is a fork
        for nothing."""
        applies = self.kind in DIFF_KINDS or (self.kind == "row" and isinstance(self.tests, dict)
                                              and self.tests.get("format") == "assert")
        return {self.uid, self.applier} if applies else {self.uid}

    def problem(self, runner_uid: int, scratch_root: str = SCRATCH_ROOT) -> str | None:
        """Why the runner must refuse this request's uids or scratch directory, or None. A refusal is the
        host's bug (no verdict); it is decided before anything runs."""
        for name, uid in (("uid", self.uid), ("applier_uid", self.applier)):
            if isinstance(uid, bool) or not isinstance(uid, int) or not MIN_UID <= uid <= MAX_UID:
                return f"the request's {name} {uid!r} is not an integer from {MIN_UID} to {MAX_UID}"
            if uid == runner_uid:
                return f"the request's {name} {uid} is the runner's own"
        if self.applier == self.uid:
            return f"the request's applier_uid equals its uid ({self.uid}): the applier must be another user"
        if self.scratch is not None:
            if not isinstance(self.scratch, str) or not posixpath.isabs(self.scratch) \
                    or posixpath.normpath(self.scratch) != self.scratch:
                return f"the request's scratch {self.scratch!r} is not a normalized absolute path"
            if posixpath.dirname(self.scratch) != posixpath.normpath(scratch_root):
                return f"the request's scratch {self.scratch!r} is not directly under {scratch_root}"
        return None

    def to_json(self) -> str:
        data = {name: getattr(self, name) for name in self.FIELDS}
        data["limits"] = self.limits.to_dict()
        return wire.dumps(data)

    @classmethod
    def from_json(cls, text: str | bytes) -> Request:
        data = wire.loads(text)
        data["limits"] = Limits.from_dict(data.get("limits", {}))
        return cls(**data)


def event_line(nonce: str, event: str, payload: dict[str, Any] | None = None) -> str:
    """One line of the runner's stdout protocol, newline included."""
    body = {"event": event, **(payload or {})}
    return f"{MARKER} {nonce} {wire.dumps(body, allow_nan=False)}\n"


def parse_events(stdout: bytes, nonce: str) -> list[dict[str, Any]]:
    """The events carrying ``nonce`` in a runner's stdout, in order. Other lines are ignored; a marked line
    that is not valid JSON is returned as ``{"event": "malformed"}`` so the caller can refuse to trust it."""
    prefix = f"{MARKER} {nonce} ".encode()
    events: list[dict[str, Any]] = []
    for line in stdout.splitlines():
        if not line.startswith(prefix):
            continue
        try:
            event = wire.loads(line[len(prefix):])
        except ValueError:
            event = None
        events.append(event if isinstance(event, dict) else {"event": "malformed"})
    return events


def finite_score(value: Any) -> float | None:
    """``value`` as a score if it is a real number in [0, 1] (within 1e-9), else None. Never clamps a value
    that is really out of range."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    value = float(value)
    if not math.isfinite(value) or value < -1e-9 or value > 1 + 1e-9:
        return None
    return min(1.0, max(0.0, value))
