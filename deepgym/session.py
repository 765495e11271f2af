"""Multi-turn sessions: one fresh container per episode, shell actions as an unprivileged agent, and a final
verifier that reads the state the agent left.

::

    with gym.session("shell_repair_script", variant=1) as session:
        first = session.start()                       # Observation: the task and the workspace
        step = session.step("cat calc.py")            # StepResult(observation, reward, done)
        ...
        verdict = session.score()                     # a Verdict, or raises NoVerdictError

**Who runs what.** The container is the environment's own image, locked down like a judging sandbox, and
lives only for the episode: :meth:`Session.close` removes it on every outcome, and its init ends it at its
lifetime even if this process dies (the provider's reaper removes what a dead owner left). Each action is a
fresh ``bash -c`` run as the agent's uid (:data:`AGENT_UID`, no capabilities) in its workspace; the final
verification runs as root with three capabilities (:mod:`deepgym.runner.session`), kills every process of the
agent and proves none is left, runs the environment's probes of the agent's code as the agent, then the hidden
verifier as another uid (:data:`VERIFIER_UID`) in a fresh folder the agent never could reach.

**Budgets** (the manifest's ``session:``, :class:`~deepgym.environments.SessionLimits`): a timed-out action
returns its partial output and ``[timed out after N s]`` and the episode goes on; after ``max_steps`` actions,
or ``episode_s`` after the first observation (the model's own thinking time included), the episode is done.
deepgym enforces them, because verl's loop has no timeout anywhere.

**Admission** (:mod:`deepgym.admission`): an episode holds one of the host's sandbox slots while it does work
on the host, the same slots as single-turn samples: while :meth:`~BaseSession.start` makes its container and
the first observation, during each step's action and during the final verification. Between them (the model
thinking) it holds none: the slots bound *running* actions, not living containers, because an idle container
uses no CPU and counting it would let idle episodes keep every sample waiting. Waiting is never charged:
not to a step's timeout or the verification's (their clocks start once the slot is held), and not to the
episode's wall budget (``episode_s`` counts the model's time between actions, not its waits). The start
waits as long as a single-turn sample does; the later waits of an episode share an allowance of
``episode_s`` in all, which its container's lifetime includes, and a wait beyond it ends the episode with
no verdict (row 2). A shutdown ends a waiting episode as ``cancelled`` (row 6). Providers without an
admission key (a remote account) bound their own sandboxes. :mod:`deepgym.aio` waits on the event loop and
hands the slot to the call (:func:`handed`).

**Services** an environment declares (a server the task asks for) are started by a trusted supervisor at
the agent's request, survive the kill of the agent's processes, and are checked at grading
(:mod:`deepgym.runner.services`). **Local mode** (``DeepGym(mode="local", allow_local=True)``) runs an
episode on the host with none of this isolation, for developing an environment only (docs/sessions.md).

**Failures** are decided in one table, :func:`failure_result`.
"""

from __future__ import annotations

import contextlib
import contextvars
import json
import secrets
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar, Union

from . import shutdown
from .admission import Admission, AdmissionCancelled, AdmissionTimeout, Slot
from .environments import Environment, load_environment
from .runner.protocol import IN_PLAY, REPORT, parse_events
from .sandbox import (ExecOptions, ExecResult, ImageMissing, ProviderUnavailable, SandboxError, SandboxLost, SandboxSpec,
                      StartFailure)
from .verdict import CaseResult, NoVerdictError, Verdict

if TYPE_CHECKING:
    from .client import DeepGym

AGENT_UID = 10000
VERIFIER_UID = 10002
WORKSPACE = "/tmp/work"
SESSION_RUNNER = ("python3", "-I", "-B", "-m", "deepgym_runner.episode.verify")
# Local mode runs the host's session runner, from the same deepgym as this process (see deepgym.sandbox.local.LOCAL_RUNNER).
LOCAL_SESSION_RUNNER = (sys.executable, "-I", "-B", "-c",
                        "import runpy, sys\nsys.path.insert(0, sys.argv.pop(1))\n"
                        "runpy.run_module('deepgym.runner.episode.verify', run_name='__main__', alter_sys=True)",
                        str(Path(__file__).resolve().parent.parent))
# What the agent's commands may hold beyond the manifest's limits: the session runner and the file helper.
RUNNER_MEMORY_MB = 128
RUNNER_PIDS = 16
# The host's slack around the in-sandbox deadlines: engine round trips, a busy host.
HOST_GRACE_S = 30.0
# A probe's wall-clock limit when session.json gives none (deepgym.runner.session's default too).
PROBE_TIMEOUT_S = 10.0
# Stopping a session's service supervisor (up to twice deepgym.runner.services.STOP_WAIT_S) and starting its
# health check (deepgym.runner.session.HEALTH_GRACE_S).
SERVICE_STOP_S = 20.0
MAX_ACTION_CHARS = 64 << 10
ACTION_STDOUT_BYTES = 1 << 20
TIMED_OUT = "[timed out after {seconds:g} s]"
# What docker's exec prints, with status 126, when the engine could not start the command in the container
# (its pids are used up, its init is gone).
EXEC_NOT_STARTED = b"OCI runtime exec failed"
START_ATTEMPTS = 3
START_RETRY_S = 0.2
CUT = "\n[... {count} characters cut ...]\n"
_Episode = TypeVar("_Episode", bound="BaseSession")
Wait = Union[Slot, AdmissionCancelled, AdmissionTimeout]
"""How a wait for an admission slot ended: the slot taken, or why there is none."""
# A wait for a session call's slot that the call's caller did itself (deepgym.aio, on the event loop).
_handed: contextvars.ContextVar[list[Wait] | None] = contextvars.ContextVar("deepgym_session_wait", default=None)


@contextlib.contextmanager
def handed(admission: Admission, wait: Wait) -> Iterator[None]:
    """Within the block, the next session call's wait for its slot is ``wait``, done by the caller: the slot it
    took (held for the block, :meth:`Admission.holding`; the caller releases it) or how its wait ended. How
    :class:`deepgym.aio.AsyncSession` waits as a coroutine and runs the call in a worker thread."""
    token = _handed.set([wait])
    try:
        if isinstance(wait, Slot):
            with admission.holding(wait):
                yield
        else:
            yield
    finally:
        _handed.reset(token)


@dataclass(frozen=True)
class Observation:
    """What the agent sees after a step: text, and optionally images (PNG bytes), so computer use fits."""

    text: str
    images: tuple[bytes, ...] = ()


@dataclass(frozen=True)
class StepResult:
    """One step: what the agent sees, the step's reward (0 unless the environment rewards steps: the
    episode's reward is :meth:`Session.score`) and whether the episode is over."""

    observation: Observation
    reward: float
    done: bool


def cut_output(text: str, limit: int) -> str:
    """``text`` within ``limit`` characters: its head and its tail around a marker saying how much went."""
    if len(text) <= limit:
        return text
    marker_room = len(CUT.format(count=len(text)))
    keep = max(0, limit - marker_room)
    head, tail = keep - keep // 2, keep // 2
    return text[:head] + CUT.format(count=len(text) - head - tail) + (text[-tail:] if tail else "")


def not_started(result: ExecResult) -> bool:
    """Whether the provider could not start the command at all (it ran nothing). The agent could print the
    same itself, which only ends its own episode with a 0."""
    return result.exit_code == 126 and result.stdout.startswith(EXEC_NOT_STARTED)


def invalid_action(action: Any) -> str | None:
    """Why ``action`` is not a shell command the agent may run, or None. Shown to the agent as text."""
    if not isinstance(action, str):
        return f"an action is a shell command (a string), not {type(action).__name__}"
    if not action.strip():
        return "the action is empty; send a shell command"
    if "\0" in action:
        return "the action contains a NUL character"
    if len(action) > MAX_ACTION_CHARS:
        return f"the action is {len(action)} characters long; the limit is {MAX_ACTION_CHARS}"
    return None


def failure_result(exc: BaseException, *, phase: str, environment: str, variant: int = 0, acting_s: float = 0.0,
                   elapsed_s: float = 0.0, lifetime_s: float = float("inf"),
                   runtime: str = "docker") -> Verdict | NoVerdictError:
    """The outcome of an episode that ``exc`` ended, in ``phase`` (``start``, ``action`` or ``verify``).

    One table; no verdict only for failures that are ours for certain, everything else scored:

    ===  =====================================================  =========  ===================================
    row  failure                                                phase      outcome
    ===  =====================================================  =========  ===================================
    1    the engine, provider, network or credentials failed    any        no verdict, ``daemon_unavailable``
    2    the sandbox could not be created or started, or no     start;     no verdict, its own type
         admission slot came free in time (StartFailure)        any
    3    the sandbox's lifetime ran out and the agent's own     any        no verdict, ``sandbox_lost``
         actions took less than half the episode
    4    the sandbox broke under the agent: killed, hung, its   action,    scored 0, ``policy_sandbox_failure``
         pids used up (any other failed action)                 verify
    5    a failure of deepgym's own code (not a sandbox error)  any        no verdict, ``verifier_error``
    6    any failure while deepgym shuts down (it removes the   any        no verdict, ``cancelled``
         episode's container, :mod:`deepgym.shutdown`)
    ===  =====================================================  =========  ===================================

    The other rows are not exceptions and are decided where they happen: an invalid or disallowed action
    comes back as text and the episode goes on (:func:`invalid_action`); a verifier that could not run or
    timed out before it read the agent's state is no verdict (``verifier_error``, ``verifier_timeout``), one
    that timed out after it is a scored 0 (``solution_timeout``), one that could not run because the agent
    filled the sandbox is ``policy_sandbox_failure`` (:mod:`deepgym.runner.session`); an episode where the
    agent never acted scores 0 (``no_action``, :meth:`Session.score`).

    Row 2 includes an admission wait that timed out (deepgym's sandboxes raise StartFailure for it, as the
    provider accounts' slots do for a single-turn sample): nothing of the agent's ran in it, in any phase.

    Row 4 includes a container removed from outside while the agent acted: the engine cannot tell that from
    one the agent's processes brought down, and the rule charges what it cannot read to the episode, so that
    "no verdict" is never an outcome the policy can choose.
    """
    where = {"environment": environment, "runtime": runtime, "variant": variant}
    if shutdown.requested():  # row 6, before row 4: the shutdown broke the sandbox, not the agent
        return NoVerdictError("cancelled", f"deepgym is shutting down ({shutdown.reason()}), which ended the episode "
                                           f"in its {phase} phase", **where)
    if not isinstance(exc, SandboxError):
        return NoVerdictError("verifier_error", f"deepgym failed in the session's {phase} phase: {exc!r}", **where)
    if isinstance(exc, ProviderUnavailable):
        return NoVerdictError(exc.error_type, exc.reason, **where)
    if phase == "start" or isinstance(exc, StartFailure):
        return NoVerdictError(exc.error_type, exc.reason, **where)
    if elapsed_s >= lifetime_s and 2 * acting_s < elapsed_s:
        return NoVerdictError("sandbox_lost", f"the sandbox's lifetime of {lifetime_s:g}s ran out, most of it not in "
                                              f"the agent's actions ({acting_s:.1f}s of {elapsed_s:.1f}s)", **where)
    return Verdict(score=0.0, passed=False, error_type="policy_sandbox_failure",
                   details=f"the episode ended in its {phase} phase because the sandbox broke under the agent: "
                           f"{exc.reason}", **where)


def replay(gym: DeepGym, env: str | Environment, actions: list[str], *, variant: int = 0) -> Verdict | NoVerdictError:
    """The outcome of an episode that runs ``actions`` in order (fewer if the episode ends first), returned
    rather than raised: what ``deepgym check`` does with an environment's reference and wrong sequences."""
    with gym.session(env, variant) as session:
        try:
            session.start()
            for action in actions:
                if session.step(action).done:
                    break
            return session.score()
        except NoVerdictError as failure:
            return failure


def action_sequences(env: Environment, name: str) -> dict[int, list[str]]:
    """``solutions/<name>.json`` of a session environment: variant -> its list of shell actions."""
    data = json.loads((env.path / "solutions" / f"{name}.json").read_text())
    return {int(variant): list(actions) for variant, actions in data.items()}


@dataclass
class _Clock:
    """When the episode started, and how much of it the agent's own actions took."""

    started: float = field(default_factory=time.monotonic)
    acting_s: float = 0.0
    waited_s: float = 0.0
    """How long the episode waited for admission slots after its start: never charged to its budget."""
    observed: float | None = None
    """When the first observation was ready: the episode's budget runs from there, not from the container's
    creation (which a busy engine makes slow)."""

    @property
    def elapsed_s(self) -> float:
        return time.monotonic() - self.started

    @property
    def budget_used_s(self) -> float:
        """The episode's wall budget used: the time since the first observation, less the admission waits."""
        return 0.0 if self.observed is None else time.monotonic() - self.observed - self.waited_s


class BaseSession:
    """What every kind of episode shares: one container, a start, steps until done, and a score, with the
    rules of each in one place (the budgets, the failure table, the outcome fixed once). A subclass brings
    its own container and channel: :meth:`_refusal`, :meth:`_open`, :meth:`_parse`, :meth:`_exchange`,
    :meth:`_observe` and :meth:`_verify`. Use it as a context manager, or call :meth:`close`."""

    def __init__(self, gym: DeepGym, env: str | Environment, variant: int = 0):
        self.env = load_environment(env)
        refusal = self._refusal(gym)
        if refusal is not None:
            raise ValueError(refusal)
        if not 0 <= variant < self.env.variants:
            raise ValueError(f"variant {variant} is out of range: {self.env.id} has {self.env.variants} "
                             f"variant(s), 0 to {self.env.variants - 1}")
        self.gym = gym
        self.variant = variant
        self.limits = self.env.session
        self.steps = 0
        self.done = False
        self.image_id: str | None = None
        self.image_status: str | None = None
        self.timings: dict[str, float] = {}
        """What the episode measured beyond its clock (a desktop's: whether it was prewarmed, its first
        screen); the verdict's timings carry it."""
        self._sandbox: Any = None
        self._clock = _Clock()
        self._wait_allowance_s = self.limits.episode_s
        """How long the episode's waits for admission slots after its start may take in all."""
        self._lifetime_s = (self.limits.episode_s + self._wait_allowance_s + self._verify_deadline_s()
                            + 3 * HOST_GRACE_S)
        self._outcome: Verdict | NoVerdictError | None = None

    @property
    def acted(self) -> bool:
        return self.steps > 0

    @property
    def outcome(self) -> Verdict | NoVerdictError | None:
        """The episode's fixed outcome once it has one (a failure ended it, or :meth:`score` ran), else None."""
        return self._outcome

    def _where(self) -> dict[str, Any]:
        return {"environment": self.env.id, "runtime": self.gym.backend, "variant": self.variant}

    def _spec(self, image_id: str, *, memory_mb: int = 0, pids: int = 0) -> SandboxSpec:
        """The container's spec: the manifest's limits, plus ``memory_mb`` and ``pids`` for what deepgym runs in
        it beside the agent."""
        from .judging import ENVIRONMENT_LABEL

        limits = self.env.limits
        return SandboxSpec(image=image_id, memory_mb=limits.memory_mb + memory_mb, pids=limits.pids + pids,
                           cpus=limits.cpus, nofile=limits.nofile, tmpfs_mb=limits.tmpfs_mb,
                           lifetime_s=self._lifetime_s, labels={ENVIRONMENT_LABEL: self.env.id})

    def start(self) -> Observation:
        """Make the episode's container ready; returns the first observation. Raises NoVerdictError when the
        sandbox cannot be made (the container is removed then)."""
        if self._sandbox is not None or self._outcome is not None:
            raise RuntimeError("this session was started already; open a new one for another episode")
        with self._admitted("start") as refused:
            if refused is not None:
                raise refused
            self._clock = _Clock()  # once admitted: the container's lifetime starts with its creation
            try:
                first = self._open()
            except SandboxError as exc:
                if isinstance(exc, ImageMissing):
                    self.gym.images.forget(self.env)
                self._end(failure_result(exc, phase="start", **self._where()))
                raise self._outcome from None
        if isinstance(first, str):
            self._end(NoVerdictError("sandbox_start_failure", first, **self._where()))
            raise self._outcome
        self._clock.observed = time.monotonic()
        return first

    def step(self, action: Any) -> StepResult:
        """Run one action as the agent and return what it sees.

        An invalid action comes back as text and counts as a step. A valid one first waits for an admission
        slot, which its timeout and the episode's budget do not count. A failed action ends the episode (its
        outcome is fixed by :func:`failure_result`; :meth:`score` returns or raises it)."""
        if self._sandbox is None and self._outcome is None:
            raise RuntimeError("call start() first")
        if self.done or self._outcome is not None:
            raise RuntimeError("the episode is over; call score()")
        self.steps += 1
        parsed, problem = self._parse(action)
        if problem is not None:
            return self._after(Observation(f"invalid action: {problem}"))
        left = self.limits.episode_s - self._clock.budget_used_s
        if left <= 0:
            self.done = True
            return StepResult(Observation(f"[the episode's {self.limits.episode_s:g} s are up; nothing was done]"),
                              0.0, True)
        timeout = min(self.limits.step_timeout_s, left)  # the wait for the slot is not charged to it
        with self._admitted("action") as refused:
            if refused is not None:
                return StepResult(Observation(f"the environment stopped: {refused.reason}"), 0.0, True)
            started = time.monotonic()
            try:
                reply = self._exchange(action, parsed, timeout)
            except SandboxError as exc:
                self._clock.acting_s += time.monotonic() - started
                self._end(self._failure(exc, "action"))
                return StepResult(Observation(f"the sandbox failed: {exc.reason}"), 0.0, True)
            took = time.monotonic() - started
            self._clock.acting_s += took
            return self._observe(parsed, reply, timeout, took)

    def _after(self, observation: Observation) -> StepResult:
        """The step's result once the budgets had their say: the step budget and the episode's wall clock."""
        if self.steps >= self.limits.max_steps or self._clock.budget_used_s >= self.limits.episode_s:
            self.done = True
        return StepResult(observation, 0.0, self.done)

    def score(self) -> Verdict:
        """End the episode and verify the state the agent left; the same outcome on every call. Raises
        NoVerdictError when the infrastructure failed."""
        if self._outcome is None:
            self.done = True
            if self._sandbox is None:
                raise RuntimeError("call start() first")
            if not self.acted:
                self._end(Verdict(score=0.0, passed=False, error_type="no_action",
                                  details="the episode ended before the agent took any action", **self._where()))
            else:
                with self._admitted("verify") as refused:
                    if refused is None:
                        self._end(self._verify())
        if isinstance(self._outcome, NoVerdictError):
            raise self._outcome
        return self._outcome

    def wait_left_s(self) -> float | None:
        """How long the episode's next wait for an admission slot may take: None before the start (no container
        lives yet, so it waits as long as a single-turn sample), else what is left of its allowance."""
        if self._clock.observed is None:
            return None
        return max(0.0, self._wait_allowance_s - self._clock.waited_s)

    @contextlib.contextmanager
    def _admitted(self, phase: str) -> Iterator[NoVerdictError | None]:
        """Hold an admission slot for the block (see the module's docstring): yields None once it is held, or
        the no-verdict outcome that ended the episode instead (shut down, or no slot in time). The wait goes on
        the episode's clock as waited, never as used. Without an admission (a remote provider's account bounds
        its own sandboxes) the block runs at once."""
        admission = self.gym.admission
        if admission is None:
            yield None
            return
        given = _handed.get()
        wait = given.pop() if given else None  # the caller's wait, for this call only
        asked = time.monotonic()
        with contextlib.ExitStack() as holding:
            failure: BaseException | None = None if isinstance(wait, Slot) else wait
            if failure is None and shutdown.requested():
                failure = AdmissionCancelled("deepgym is shutting down")
            if failure is None:
                # A handed slot was taken on the event loop and is held in this context already
                # (Admission.holding), so slot() yields that one: never a second slot for the same call.
                try:
                    holding.enter_context(admission.slot(timeout_s=self.wait_left_s(), cancelled=shutdown.requested))
                except (AdmissionCancelled, AdmissionTimeout) as exc:
                    failure = exc
            self._clock.waited_s += wait.waited_s if isinstance(wait, Slot) else time.monotonic() - asked
            if isinstance(failure, AdmissionTimeout):
                failure = StartFailure(f"{failure}; the episode's waits for a slot after its start reached their "
                                       f"allowance of {self._wait_allowance_s:g} s")
            if failure is not None:
                self._end(failure_result(failure, phase=phase, **self._where()))
                yield self._outcome
                return
            yield None

    def _scored(self, report: dict[str, Any]) -> Verdict | NoVerdictError:
        """The outcome a final verification's report gives: its score, or no verdict when it has none."""
        error_type = report.get("error_type")
        if "score" not in report:
            return NoVerdictError(error_type or "verifier_error", report.get("details", ""), **self._where())
        cases = tuple(CaseResult(id=str(c.get("id")), passed=bool(c.get("passed")), expected=c.get("expected"),
                                 actual=c.get("actual")) for c in report.get("cases", []) if isinstance(c, dict))
        return Verdict(score=report["score"], passed=report["passed"], error_type=error_type,
                       details=report.get("details", ""), cases=cases, cases_total=len(cases),
                       timings={"episode_s": round(self._clock.elapsed_s, 3),
                                "acting_s": round(self._clock.acting_s, 3),
                                "admission_wait_s": round(self._clock.waited_s, 3), **self.timings},
                       image_id=self.image_id, image_status=self.image_status, **self._where())

    def _failure(self, exc: SandboxError, phase: str) -> Verdict | NoVerdictError:
        """The outcome of a sandbox failure in ``phase`` after the start, by :func:`failure_result`."""
        return failure_result(exc, phase=phase, acting_s=self._clock.acting_s, elapsed_s=self._clock.elapsed_s,
                              lifetime_s=self._lifetime_s, **self._where())

    def _end(self, outcome: Verdict | NoVerdictError) -> None:
        """Fix the episode's outcome, count it, and remove the container."""
        self._outcome = outcome
        self.done = True
        self.gym.monitor.record(not outcome.has_verdict, outcome.error_type)
        self.close()

    def close(self) -> None:
        """Remove the container (never reused). Idempotent; call it on every path (the context manager does)."""
        if self._sandbox is not None:
            sandbox, self._sandbox = self._sandbox, None
            sandbox.close()

    def __enter__(self: _Episode) -> _Episode:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # What each kind of episode brings ----------------------------------------------------------------------

    def _refusal(self, gym: DeepGym) -> str | None:
        """Why this episode cannot run ``self.env`` on ``gym`` (shown in a ValueError), or None."""
        raise NotImplementedError

    def _verify_deadline_s(self) -> float:
        """The host's deadline for the final verification (the container's lifetime covers it)."""
        raise NotImplementedError

    def _open(self) -> Observation | str:
        """Make the container (``self._sandbox``) and show the task: the first observation, or why the
        sandbox could not be prepared. Raises SandboxError."""
        raise NotImplementedError

    def _parse(self, action: Any) -> tuple[Any, str | None]:
        """``action`` as this episode runs it, and why it is invalid (None when it is not)."""
        raise NotImplementedError

    def _exchange(self, action: Any, parsed: Any, timeout_s: float) -> Any:
        """Carry out the action within ``timeout_s`` (the step's limit, or what is left of the episode);
        returns the sandbox's reply. Raises SandboxError when the sandbox broke."""
        raise NotImplementedError

    def _observe(self, parsed: Any, reply: Any, timeout_s: float, took_s: float) -> StepResult:
        """The step's result from the sandbox's reply (usually through :meth:`_after`)."""
        raise NotImplementedError

    def _verify(self) -> Verdict | NoVerdictError:
        """Run the final verification in the container: its outcome (:meth:`_scored`, :meth:`_failure`)."""
        raise NotImplementedError


class Session(BaseSession):
    """One episode of a ``session`` environment in its own container. Use it as a context manager, or call
    :meth:`close`; :meth:`start` first, then :meth:`step` until done, then :meth:`score`."""

    def __init__(self, gym: DeepGym, env: str | Environment, variant: int = 0):
        self.local = gym.provider.name == "local"
        self.workspace = WORKSPACE
        """The agent's working directory as its commands see it: the host's path in local mode."""
        super().__init__(gym, env, variant)

    def _refusal(self, gym: DeepGym) -> str | None:
        if self.env.session is None:
            return f"{self.env.id} is a {self.env.kind} environment, not a session one; use DeepGym.run for it"
        if self.local and self.env.services:
            return (f"{self.env.id} has services, which need a sandbox's uids; mode='local' has none. "
                    f"Use mode='docker'")
        return None

    def _open(self) -> Observation | str:
        """Create the episode's container and the agent's workspace."""
        if not self.local:  # local mode runs on the host's own files (docs/sessions.md): for development only
            self.image_id, self.image_status = self.gym.images.resolve(self.gym.provider, self.env)
        spec = self._spec(self.image_id or "host", memory_mb=RUNNER_MEMORY_MB, pids=RUNNER_PIDS)
        self._sandbox = self.gym.provider.create(spec)
        if self.local:
            self.workspace = str(self._sandbox.root / WORKSPACE.lstrip("/"))
        report, _ = self._session_runner("setup", timeout_s=HOST_GRACE_S + 30)
        if report is None or not report.get("ok"):
            detail = (report or {}).get("details", "the session runner gave no report")
            return f"the workspace could not be prepared: {detail}"
        task = (self.env.path / "start" / str(self.variant) / "TASK.md")
        text = self.env.prompt.rstrip() + (f"\n\n{task.read_text().rstrip()}" if task.is_file() else "")
        return Observation(f"{text}\n\nYour working directory is {self.workspace}.")

    def _parse(self, action: Any) -> tuple[Any, str | None]:
        return action, invalid_action(action)

    def _exchange(self, action: Any, parsed: Any, timeout_s: float) -> ExecResult:
        """Run the shell command as the agent; stdout and stderr together."""
        options = ExecOptions(timeout_s=timeout_s, user=None if self.local else f"{AGENT_UID}:{AGENT_UID}",
                              cwd=WORKSPACE,
                              env={"HOME": self.workspace, "TMPDIR": self.workspace, "TERM": "dumb", "LANG": "C.UTF-8",
                                   "PATH": "/usr/local/bin:/usr/bin:/bin"},
                              stdout_limit=ACTION_STDOUT_BYTES)
        for attempt in range(START_ATTEMPTS):
            # A command the engine could not start ran nothing, so trying again replays nothing: a busy
            # engine's hiccup is not the agent's fault. A sandbox whose pids the agent took fails every try.
            result = self._sandbox.exec(["bash", "-c", "exec 2>&1\n" + action], options)
            if not not_started(result) or attempt == START_ATTEMPTS - 1:
                break
            time.sleep(START_RETRY_S)
        if not_started(result):
            said = result.stdout[:300].decode(errors="replace")
            raise SandboxLost(f"the action could not start in the sandbox: {said}")
        return result

    def _observe(self, parsed: Any, reply: ExecResult, timeout_s: float, took_s: float) -> StepResult:
        text = reply.stdout.decode("utf-8", "replace")
        if reply.stdout_truncated:
            text += "\n[output beyond 1 MiB dropped]"
        if reply.timed_out:
            text += ("\n" if text and not text.endswith("\n") else "") + TIMED_OUT.format(seconds=round(timeout_s, 1))
        elif reply.exit_code:
            text += f"\n[exit status {reply.exit_code}]"
        return self._after(Observation(cut_output(text, self.limits.output_chars)))

    def _verify(self) -> Verdict | NoVerdictError:
        try:
            report, in_play = self._session_runner("verify", timeout_s=self._verify_deadline_s())
        except SandboxError as exc:
            return self._failure(exc, "verify")
        if report is None:
            error = "verifier_timeout" if not in_play else "sandbox_lost"
            return NoVerdictError(error, "the final verification gave no report", **self._where())
        return self._scored(report)

    def _verify_deadline_s(self) -> float:
        """The verifier's limit, every probe's, and slack. The probes run the agent's code, so each may take its
        whole limit; the deadline never cuts them short."""
        config = json.loads((self.env.tests_dir / "session.json").read_text())
        probes = config.get("probes", {}).get(str(self.variant), [])
        services = sum(service.check_timeout_s for service in self.env.services) + (
            SERVICE_STOP_S if self.env.services else 0.0)
        return (self.limits.verify_timeout_s + sum(float(p.get("timeout_s", PROBE_TIMEOUT_S)) for p in probes)
                + services + HOST_GRACE_S)

    def _session_runner(self, command: str, *, timeout_s: float) -> tuple[dict[str, Any] | None, bool]:
        """Run the in-sandbox session runner; returns (its report or None, whether it said ``in_play``).
        Raises SandboxError. A runner killed at the host's deadline has no report."""
        nonce = secrets.token_hex(16)
        request = {"nonce": nonce, "agent_uid": AGENT_UID, "verifier_uid": VERIFIER_UID, "workspace": self.workspace,
                   "variant": self.variant, "verify_timeout_s": self.limits.verify_timeout_s,
                   "probe_timeout_s": PROBE_TIMEOUT_S,
                   "services": [service.to_request() for service in self.env.services]}
        runner = SESSION_RUNNER
        if self.local:
            runner = LOCAL_SESSION_RUNNER
            request.update(unconfined=True, env_dir=str(self.env.tests_dir), start_dir=str(self.env.path / "start"))
        options = ExecOptions(stdin=json.dumps(request).encode(), timeout_s=timeout_s,
                              user=None if self.local else "0:0")
        result = self._sandbox.exec([*runner, command], options)
        if result.exit_code is None and not result.timed_out:
            raise SandboxLost("the session runner vanished without an exit status")
        events = parse_events(result.stdout, nonce)
        reports = [e.get("report") for e in events if e.get("event") == REPORT]
        in_play = any(e.get("event") == IN_PLAY for e in events)
        if len(reports) != 1 or not isinstance(reports[0], dict):
            if result.timed_out:
                return None, in_play
            if result.exit_code not in (0, None) or not_started(result):
                # The exec could not start the runner at all: the sandbox has no room for a process.
                raise SandboxLost(f"the session runner could not run (exit status {result.exit_code}): "
                                  f"{result.stderr_tail.strip()[-300:]}")
            return {"error_type": "verifier_error", "details": "the session runner gave no single report"}, in_play
        return reports[0], in_play
