"""One episode, whatever the agent acts with: a container, a start, steps until done, and a score, with the rules
of each in one place: the clock and the budgets, the admission slot of every call that works on the host, the
failure table (:mod:`deepgym.session.rules`), and the outcome, fixed once and decided by :mod:`deepgym.verdict`.

What differs between a shell and a desktop (the container, the channel, what an action is) is the episode's
:class:`Actions`, composed in: :class:`~deepgym.session.shell.ShellActions`,
:class:`~deepgym.session.desktop.DesktopActions`. An episode gets a small :class:`Context` from its client, never
the client itself.

**Admission** (:mod:`deepgym.admission`): an episode holds one of the host's sandbox slots while it does work
on the host, the same slots as single-turn samples: while :meth:`Episode.start` makes its container and the
first observation, during each step's action and during the final verification. Between them (the model
thinking) it holds none: the slots bound *running* actions, not living containers, because an idle container
uses no CPU and counting it would let idle episodes keep every sample waiting. Waiting is never charged: not
to a step's timeout or the verification's (their clocks start once the slot is held), and not to the
episode's wall budget (``episode_s`` counts the model's time between actions, not its waits). The start
waits as long as a single-turn sample does; the later waits of an episode share an allowance of
``episode_s`` in all, which its container's lifetime includes, and a wait beyond it ends the episode with no
verdict (row 2). A shutdown ends a waiting episode as ``cancelled`` (row 6). Providers without an admission
key (a remote account) bound their own sandboxes. A caller that waited itself (the async face,
:mod:`deepgym.aio`, waits on its event loop) passes how its wait ended as the call's ``wait`` argument.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Callable, Protocol, TypeVar, Union

from ..admission import Admission, AdmissionCancelled, AdmissionTimeout, Slot
from ..environments import Environment, load_environment, sandbox_spec
from ..judging import provenance
from ..outcome import NoVerdictError, Outcome, Verdict
from ..sandbox import ImageMissing, Mount, Provider, SandboxError, SandboxSpec, StartFailure
from ..sandbox.base import awaited
from ..shutdown import requested
from ..verdict import EpisodeFacts, classify_episode, zero
from .results import Observation, Reply, StepResult, Verification
from .rules import failure_result

if TYPE_CHECKING:
    from ..accounting import NoVerdictMonitor
    from ..judging import Images

# The host's slack around the in-sandbox deadlines: engine round trips, a busy host.
HOST_GRACE_S = 30.0
_Episode = TypeVar("_Episode", bound="Episode")
Wait = Union[Slot, AdmissionCancelled, AdmissionTimeout]
"""How a wait for an admission slot ended: the slot taken, or why there is none."""


@dataclass(frozen=True)
class Context:
    """What an episode takes from its client: where sandboxes come from, which image, the host's slots, the
    no-verdict count, and the runtime's name its outcomes carry."""

    provider: Provider
    images: Images
    admission: Admission | None
    monitor: NoVerdictMonitor
    runtime: str
    gate: Callable[[Environment], NoVerdictError | None] | None = None
    """The canaries' gate (:mod:`deepgym.canary`): a start it refuses ends the episode with that refusal."""


class Actions(Protocol):
    """What an agent acts with, and the container and channel that carry it."""

    def refusal(self, episode: Episode) -> str | None:
        """Why this episode cannot run its environment on its context's provider (a ValueError), or None."""

    def verify_deadline_s(self, episode: Episode) -> float:
        """The host's deadline for the final verification (the container's lifetime covers it)."""

    def open(self, episode: Episode, keep: Callable[[Any], None]) -> Observation | str:
        """Make the container (handed to ``keep`` as soon as it exists) and show the task: the first observation,
        or why the sandbox could not be prepared. Raises SandboxError."""

    def parse(self, episode: Episode, action: Any) -> tuple[Any, str | None]:
        """``action`` as this episode runs it, and why it is invalid (None when it is not)."""

    def exchange(self, sandbox: Any, parsed: Any, timeout_s: float) -> Any:
        """Carry out the action within ``timeout_s``; the sandbox's reply. Raises SandboxError."""

    # Optional: ``async def aexchange(sandbox, parsed, timeout_s)``, :meth:`exchange` awaited on a sandbox whose
    # provider awaits (:meth:`~deepgym.sandbox.base.Sandbox.aexec`); actions without it step in a thread.

    def observe(self, episode: Episode, parsed: Any, reply: Any, timeout_s: float, took_s: float) -> Reply:
        """What the agent sees of the reply."""

    def verify(self, episode: Episode, sandbox: Any) -> Verification:
        """Run the final verification in the container. Raises SandboxError."""


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


class Episode:
    """One episode of an environment in its own container, acted on through ``actions``. Use it as a context
    manager, or call :meth:`close`; :meth:`start` first, then :meth:`step` until done, then :meth:`score`."""

    def __init__(self, context: Context, env: str | Environment, variant: int, actions: Actions):
        self.context = context
        self.actions = actions
        self.env = load_environment(env)
        refusal = actions.refusal(self)
        if refusal is not None:
            raise ValueError(refusal)
        if not 0 <= variant < self.env.variants:
            raise ValueError(f"variant {variant} is out of range: {self.env.id} has {self.env.variants} "
                             f"variant(s), 0 to {self.env.variants - 1}")
        self.variant = variant
        self.limits = self.env.session
        self.steps = 0
        self.done = False
        self.image_id: str | None = None
        self.node: str | None = None
        """The machine the episode's sandbox lives on, when the provider chose one of several (Ray's node)."""
        self.image_status: str | None = None
        self.timings: dict[str, float] = {}
        """What the episode measured beyond its clock (a desktop's: whether it was prewarmed, its first
        screen); the verdict's timings carry it."""
        self._sandbox: Any = None
        self._clock = _Clock()
        self._wait_allowance_s = self.limits.episode_s
        """How long the episode's waits for admission slots after its start may take in all."""
        self._lifetime_s = (self.limits.episode_s + self._wait_allowance_s + actions.verify_deadline_s(self)
                            + 3 * HOST_GRACE_S)
        self._outcome: Outcome | None = None
        self._refused: NoVerdictError | None = None
        self._gated = False

    @property
    def acted(self) -> bool:
        return self.steps > 0

    @property
    def outcome(self) -> Outcome | None:
        """The episode's fixed outcome once it has one (a failure ended it, or :meth:`score` ran), else None."""
        return self._outcome

    @property
    def lifetime_s(self) -> float:
        """How long the episode's container may live: its budgets, its waits, its verification and slack."""
        return self._lifetime_s

    def where(self) -> dict[str, Any]:
        """The fields every outcome of this episode carries."""
        return {"environment": self.env.id, "runtime": self.context.runtime, "variant": self.variant}

    def sandbox_spec(self, image_id: str, *, memory_mb: int = 0, pids: int = 0,
                     mounts: tuple[Mount, ...] = ()) -> SandboxSpec:
        """The container's spec (:func:`deepgym.environments.sandbox_spec`): the manifest's limits, plus
        ``memory_mb`` and ``pids`` for what deepgym runs in it beside the agent, and its ``mounts``, for the
        episode's lifetime."""
        spec = sandbox_spec(self.env, image_id, lifetime_s=self._lifetime_s, memory_mb=memory_mb, pids=pids,
                            mounts=mounts)
        return replace(spec, image_labels=self.context.images.required_labels(self.context.provider, self.env))

    def start(self, *, wait: Wait | None = None) -> Observation:
        """Make the episode's container ready; returns the first observation. Raises NoVerdictError when the
        sandbox cannot be made (the container is removed then). ``wait``: how the caller's own wait for the
        call's slot ended (see the module's docstring); None, and the call waits itself."""
        if self._sandbox is not None or self._outcome not in (None, self._refused):
            raise RuntimeError("this session was started already; open a new one for another episode")
        self.pass_gate()
        with self._admitted("start", wait) as refused:
            if refused is not None:
                raise refused
            self._clock = _Clock()  # once admitted: the container's lifetime starts with its creation
            try:
                first = self.actions.open(self, self._keep)
            except SandboxError as exc:
                if isinstance(exc, ImageMissing):
                    self.context.images.forget(self.context.provider, self.env)
                self._end(failure_result(exc, phase="start", **self.where()))
                raise self._outcome from None
        if isinstance(first, str):
            self._end(NoVerdictError("sandbox_start_failure", first, **self.where()))
            raise self._outcome
        self._clock.observed = time.monotonic()
        return first

    def pass_gate(self) -> None:
        """Pass the canaries' gate once (:mod:`deepgym.canary`), before the episode holds a slot, since a due
        check needs slots of its own; a refusal ends the episode and is raised (again, on every start)."""
        if not self._gated:
            self._gated = True
            self._refused = self.context.gate(self.env) if self.context.gate is not None else None
            if self._refused is not None:
                self._end(self._refused)
        if self._refused is not None:
            raise self._refused

    def step(self, action: Any, *, wait: Wait | None = None) -> StepResult:
        """Run one action as the agent and return what it sees.

        An invalid action comes back as text and counts as a step. A valid one first waits for an admission
        slot, which its timeout and the episode's budget do not count. A failed action ends the episode (its
        outcome is fixed by :func:`~deepgym.session.rules.failure_result`; :meth:`score` returns or raises it)."""
        planned = self._plan(action)
        if isinstance(planned, StepResult):
            return planned
        parsed, timeout = planned
        with self._admitted("action", wait) as refused:
            if refused is not None:
                return StepResult(Observation(f"the environment stopped: {refused.reason}"), 0.0, True)
            started = time.monotonic()
            try:
                reply = self.actions.exchange(self._sandbox, parsed, timeout)
            except SandboxError as exc:
                return self._lost(exc, started)
            return self._seen(parsed, reply, timeout, started)

    @property
    def awaits(self) -> bool:
        """Whether :meth:`astep` works: the provider awaits its sandboxes (Ray), bounds its slots itself, and the
        actions can be awaited."""
        return awaited(self.context.provider) and getattr(self.actions, "aexchange", None) is not None

    async def astep(self, action: Any) -> StepResult:
        """:meth:`step` awaited on the sandbox's own refs, holding no thread, when :attr:`awaits`: the same rules,
        with no admission slot to take (the provider's nodes take their own)."""
        if not self.awaits:
            raise RuntimeError(f"mode {self.context.runtime!r} cannot await an episode's step; call step()")
        planned = self._plan(action)
        if isinstance(planned, StepResult):
            return planned
        parsed, timeout = planned
        started = time.monotonic()
        try:
            reply = await self.actions.aexchange(self._sandbox, parsed, timeout)
        except SandboxError as exc:
            return self._lost(exc, started)
        return self._seen(parsed, reply, timeout, started)

    def score(self, *, wait: Wait | None = None) -> Verdict:
        """End the episode and verify the state the agent left; the same outcome on every call. Raises
        NoVerdictError when the infrastructure failed."""
        if self._outcome is None:
            self.done = True
            if self._sandbox is None:
                raise RuntimeError("call start() first")
            if not self.acted:
                self._end(zero("no_action", "the episode ended before the agent took any action", **self.where()))
            else:
                with self._admitted("verify", wait) as refused:
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

    def close(self) -> None:
        """Remove the container (never reused). Idempotent; call it on every path (the context manager does)."""
        if self._sandbox is not None:
            sandbox, self._sandbox = self._sandbox, None
            sandbox.close()

    def __enter__(self: _Episode) -> _Episode:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ------------------------------------------------------------------------------------------------------

    def _keep(self, sandbox: Any) -> None:
        self._sandbox = sandbox
        if getattr(sandbox, "node", None) is not None:  # placed by the provider: its node's image judged
            self.node, self.image_id = sandbox.node, sandbox.image_id or self.image_id

    def _plan(self, action: Any) -> tuple[Any, float] | StepResult:
        """A step's action as the actions run it, with its timeout; or the step's result when nothing is to run (an
        invalid action, the episode's time up)."""
        if self._sandbox is None and self._outcome is None:
            raise RuntimeError("call start() first")
        if self.done or self._outcome is not None:
            raise RuntimeError("the episode is over; call score()")
        self.steps += 1
        parsed, problem = self.actions.parse(self, action)
        if problem is not None:
            return self._after(Observation(f"invalid action: {problem}"))
        left = self.limits.episode_s - self._clock.budget_used_s
        if left <= 0:
            self.done = True
            return StepResult(Observation(f"[the episode's {self.limits.episode_s:g} s are up; nothing was done]"),
                              0.0, True)
        return parsed, min(self.limits.step_timeout_s, left)  # the wait for the slot is not charged to it

    def _lost(self, exc: SandboxError, started: float) -> StepResult:
        """The step whose action failed in the sandbox: the episode ends by the failure table."""
        self._clock.acting_s += time.monotonic() - started
        self._end(self._failure(exc, "action"))
        return StepResult(Observation(f"the sandbox failed: {exc.reason}"), 0.0, True)

    def _seen(self, parsed: Any, reply: Any, timeout: float, started: float) -> StepResult:
        """The step whose action the sandbox answered: what the agent sees, and whether the episode is over."""
        took = time.monotonic() - started
        self._clock.acting_s += took
        seen = self.actions.observe(self, parsed, reply, timeout, took)
        if seen.failure is not None:
            self._end(seen.failure)
            return StepResult(seen.observation, 0.0, True)
        if seen.over:
            self.done = True
        return self._after(seen.observation)

    def _after(self, observation: Observation) -> StepResult:
        """The step's result once the budgets had their say: the step budget and the episode's wall clock."""
        if self.steps >= self.limits.max_steps or self._clock.budget_used_s >= self.limits.episode_s:
            self.done = True
        return StepResult(observation, 0.0, self.done)

    @contextlib.contextmanager
    def _admitted(self, phase: str, wait: Wait | None) -> Iterator[NoVerdictError | None]:
        """Hold an admission slot for the block: yields None once it is held, or the no-verdict outcome that
        ended the episode instead (shut down, or no slot in time). ``wait`` is the caller's own wait, whose
        slot the caller releases; without it the block waits here. The wait goes on the episode's clock as
        waited, never as used. Without an admission (a remote provider's account bounds its own sandboxes) the
        block runs at once."""
        admission = self.context.admission
        if admission is None:
            yield None
            return
        asked = time.monotonic()
        with contextlib.ExitStack() as holding:
            failure: BaseException | None = None if isinstance(wait, Slot) else wait
            if failure is None and requested():
                failure = AdmissionCancelled("deepgym is shutting down")
            if failure is None and wait is None:
                try:
                    holding.enter_context(admission.slot(timeout_s=self.wait_left_s(), cancelled=requested))
                except (AdmissionCancelled, AdmissionTimeout) as exc:
                    failure = exc
            self._clock.waited_s += wait.waited_s if isinstance(wait, Slot) else time.monotonic() - asked
            if isinstance(failure, AdmissionTimeout):
                failure = StartFailure(f"{failure}; the episode's waits for a slot after its start reached their "
                                       f"allowance of {self._wait_allowance_s:g} s")
            if failure is not None:
                self._end(failure_result(failure, phase=phase, **self.where()))
                yield self._outcome
                return
            yield None

    def _verify(self) -> Outcome:
        """The final verification's outcome, by :func:`~deepgym.verdict.classify_episode`."""
        try:
            found = self.actions.verify(self, self._sandbox)
        except SandboxError as exc:
            return self._failure(exc, "verify")
        timings = {"episode_s": round(self._clock.elapsed_s, 3), "acting_s": round(self._clock.acting_s, 3),
                   "admission_wait_s": round(self._clock.waited_s, 3), **self.timings}
        return classify_episode(EpisodeFacts(report=found.report, deadline_hit=found.deadline_hit,
                                             in_play=found.in_play, said=found.said, timings=timings,
                                             image_id=self.image_id, image_status=self.image_status, node=self.node,
                                             provenance={**provenance(self.context.provider, self.env,
                                                                      self.context.images, self.image_id),
                                                         "variant": self.variant}, **self.where()))

    def _failure(self, exc: SandboxError, phase: str) -> Outcome:
        """The outcome of a sandbox failure in ``phase`` after the start, by the failure table."""
        return failure_result(exc, phase=phase, acting_s=self._clock.acting_s, elapsed_s=self._clock.elapsed_s,
                              lifetime_s=self._lifetime_s, **self.where())

    def _end(self, outcome: Outcome) -> None:
        """Fix the episode's outcome, count it, and remove the container."""
        self._outcome = outcome
        self.done = True
        self.context.monitor.record(not outcome.has_verdict, outcome.error_type,
                                    reason=getattr(outcome, "reason", None), environment=outcome.environment)
        self.close()
