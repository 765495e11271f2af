"""Canaries: answers whose verdict is known, judged now and then in the image that judges the samples.

An image can go bad mid-run (a damaged layer, a rebuild that changed a dependency, a clock bug inside it) and
turn right answers into 0s that look like any other 0. So before an image's first sample in a process, and
again every ``every_samples`` samples or ``every_s`` seconds, the environment's reference solution and one
known-wrong one (``solutions/``) are judged like samples: the reference must score 1 and pass, the wrong one
must have a verdict and not pass. An episode environment replays its reference and a wrong action sequence
(variant 0); the generic image that judges dataset rows gets a tiny built-in row of each format, with a right
and a wrong answer.

A canary with the wrong verdict makes the image *unhealthy*: its samples get no verdict (``image_unhealthy``)
without being run, until a canary passes again (retried every ``retry_s``; the image's tag is resolved afresh,
so a rebuilt or retagged image is taken up). A canary without a verdict proves nothing either way (the engine
may be down): the image keeps its state and the check is retried after ``retry_s``. Samples already judged
keep their verdicts. Canaries wait for admission slots as samples do, one sandbox at a time, so a waiting
sample never waits longer for a canary than for one sample.

The state is per process and per image reference, shared by every client, so a process judges each image's
canaries once at first use however many clients it makes. A periodic check is also held back until the
samples judged since the last one took ``1 / budget`` times its cost (1 % by default), so canaries cost at
most that share of judging time after the first check. ``DEEPGYM_CANARIES=0`` (or ``DeepGym(canaries=False)``)
turns them off; ``DEEPGYM_CANARY_EVERY_S`` and ``DEEPGYM_CANARY_EVERY_SAMPLES`` change the defaults.
"""

from __future__ import annotations

import json
import logging
import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from .environments import Environment
from .outcome import NoVerdictError, Outcome
from .rows import RowTask, row_task

if TYPE_CHECKING:
    from .session.episode import Episode

log = logging.getLogger("deepgym")
VARIABLE = "DEEPGYM_CANARIES"
EPISODE_KINDS = ("session", "desktop")
# Known-wrong solutions whose only fault is being slow fail by using up the whole CPU limit: too dear for a
# canary while a faster wrong one exists.
SLOW_MARKERS = ("exponential", "quadratic", "no_memo")


@dataclass(frozen=True)
class CanaryPolicy:
    """When canaries run: at an image's first use, then every ``every_samples`` samples or ``every_s`` seconds,
    whichever comes first, once the samples since the last check took ``1 / budget`` times its cost; an
    unhealthy image or an inconclusive check is retried every ``retry_s``."""

    every_s: float = 900.0
    every_samples: int = 1000
    budget: float = 0.01
    retry_s: float = 30.0

    @classmethod
    def from_environment(cls) -> CanaryPolicy | None:
        """The policy ``DEEPGYM_CANARIES`` and its companions set; None when they turn canaries off."""
        if os.environ.get(VARIABLE, "1") == "0":
            return None
        defaults = cls()
        return cls(every_s=float(os.environ.get("DEEPGYM_CANARY_EVERY_S", defaults.every_s)),
                   every_samples=int(os.environ.get("DEEPGYM_CANARY_EVERY_SAMPLES", defaults.every_samples)))


@dataclass(frozen=True)
class Canary:
    """One answer with a known verdict: ``right`` must score 1 and pass, a wrong one must not pass."""

    name: str
    task: Environment | RowTask
    answer: Any
    """A response (a single-turn task), or an episode's list of actions."""
    right: bool


def fenced(env: Environment, text: str) -> str:
    """A solution file as a model would answer: prose around one fenced block."""
    language = "diff" if env.kind == "patch" else "python"
    return f"Here is my answer.\n\n```{language}\n{text.rstrip()}\n```\n"


# The generic row image's canaries: one tiny row of each format, with a right and a wrong answer.
_ROWS = (
    ("stdin_stdout", {"inputs": ["2 3\n"], "outputs": ["5\n"]},
     "a, b = map(int, input().split())\nprint(a + b)", "a, b = map(int, input().split())\nprint(a - b)"),
    ("call_based", {"fn_name": "add", "inputs": ["2\n3"], "outputs": ["5"]},
     "def add(a, b):\n    return a + b", "def add(a, b):\n    return a - b"),
    ("assert_humaneval", {"test": "def check(candidate):\n    assert candidate(2, 3) == 5\n", "entry_point": "add"},
     "def add(a, b):\n    return a + b", "def add(a, b):\n    return a - b"),
    ("assert_mbpp", {"test_list": ["assert add(2, 3) == 5"]},
     "def add(a, b):\n    return a + b", "def add(a, b):\n    return a - b"),
)


def action_sequences(env: Environment, name: str) -> dict[int, list[Any]]:
    """``solutions/<name>.json`` of an episode environment: variant -> its list of actions (shell commands, or
    ``computer`` actions)."""
    data = json.loads((env.path / "solutions" / f"{name}.json").read_text())
    return {int(variant): list(actions) for variant, actions in data.items()}


def play(open_session: Callable[[], Episode], actions: list[Any]) -> Outcome:
    """The outcome of an episode (``open_session`` opens it) that runs ``actions`` in order, fewer if it ends
    first, returned rather than raised: an episode canary, and what ``deepgym check`` replays."""
    with open_session() as session:
        try:
            session.start()
            for action in actions:
                if session.step(action).done:
                    break
            return session.score()
        except NoVerdictError as failure:
            return failure


def canaries_for(env: Environment) -> list[Canary]:
    """The canaries of ``env``'s image: its reference and first fast known-wrong solution, or the built-in
    rows for the generic row image; none for an environment without solutions."""
    if env.kind == "row":
        found = []
        for source, truth, right, wrong in _ROWS:
            task = row_task(source, truth)
            found += [Canary(f"{source}:right", task, fenced(env, right), True),
                      Canary(f"{source}:wrong", task, fenced(env, wrong), False)]
        return found
    solutions = env.solutions()
    wrong = sorted((name for name in solutions if name.startswith("wrong_")),
                   key=lambda name: (any(marker in name for marker in SLOW_MARKERS), name))
    if "reference" not in solutions or not wrong:
        return []
    if env.kind in EPISODE_KINDS:
        return [Canary(name, env, action_sequences(env, name)[0], name == "reference") for name in ("reference", wrong[0])]
    return [Canary(name, env, fenced(env, solutions[name].read_text()), name == "reference")
            for name in ("reference", wrong[0])]


def wrongness(canary: Canary, outcome: Outcome) -> str | None:
    """How ``outcome`` is not what ``canary`` must get (None when it is, or when it has no verdict)."""
    if not outcome.has_verdict:
        return None
    if canary.right and not (outcome.passed and outcome.score == 1.0):
        return f"the reference scored {outcome.score:g} ({outcome.error_type}): {outcome.details[:300]}"
    if not canary.right and outcome.passed:
        return f"the known-wrong solution passed with score {outcome.score:g}"
    return None


@dataclass
class _Health:
    """One image's canary state in this process."""

    lock: threading.Lock = field(default_factory=threading.Lock)
    checked: bool = False
    healthy: bool = True
    failure: str = ""
    last_s: float = 0.0
    samples: int = 0
    judged_s: float = 0.0
    cost_s: float = 0.0


_STATES: dict[Any, _Health] = {}
_STATES_LOCK = threading.Lock()


def _state(key: Any) -> _Health:
    with _STATES_LOCK:
        return _STATES.setdefault(key, _Health())


class Canaries:
    """A client's canaries: :meth:`gate` before a sample, :meth:`judged` after it. ``key_of`` names the image
    a sample of an environment would run in, as (runtime, image id, reference), or None when it has none to
    check (missing, stale: the sample's own no verdict says so); ``judge`` judges one canary without the gate
    (and without counting it as a sample); ``forget`` drops an environment's resolved image so its tag is
    resolved afresh; ``report`` tells the client's monitor which canary failed, or None once it recovered."""

    def __init__(self, policy: CanaryPolicy, judge: Callable[[Canary, Any], Outcome],
                 key_of: Callable[[Environment], tuple[str, str, str] | None], forget: Callable[[Environment], None],
                 report: Callable[[str, str | None], None]):
        self.policy = policy
        self.checks = 0
        self.spent_s = 0.0
        """Checks this client ran, and the wall-clock seconds they took (benchmarks/canaries.py)."""
        self._judge = judge
        self._key_of = key_of
        self._forget = forget
        self._report = report

    def due(self, env: Environment) -> bool:
        """Whether a check of ``env``'s image is due now."""
        key = self._key_of(env)
        return key is not None and self._due(_state(key))

    def _due(self, state: _Health) -> bool:
        policy = self.policy
        since = time.monotonic() - state.last_s
        if not state.checked or not state.healthy:
            return not state.last_s or since >= policy.retry_s
        periodic = state.samples >= policy.every_samples or since >= policy.every_s
        return periodic and state.samples > 0 and state.judged_s * policy.budget >= state.cost_s

    def gate(self, env: Environment, admission: Any, *, wait: bool = True) -> NoVerdictError | None:
        """Check ``env``'s image when a check is due (``wait``: behind a check another thread runs at the
        image's first use), then the sample's refusal when the image is unhealthy, else None. An unhealthy
        image due for its retry is resolved afresh first, so a rebuilt or retagged one is checked instead."""
        key = self._key_of(env)
        if key is None:
            return None
        state = _state(key)
        if state.checked and not state.healthy and self._due(state):
            self._forget(env)
            key = self._key_of(env)
            if key is None:
                return None
            state = _state(key)
        if self._due(state) and state.lock.acquire(blocking=wait and not state.checked):
            try:
                if self._due(state):
                    self._check(key, state, env, admission)
            finally:
                state.lock.release()
        return self.refusal(env)

    def refusal(self, env: Environment) -> NoVerdictError | None:
        """The sample's refusal when ``env``'s image is unhealthy, else None, checking nothing: for a caller that
        must never block (a coroutine on the event loop), which had a due check run elsewhere first."""
        key = self._key_of(env)
        if key is None:
            return None
        state = _state(key)
        if state.checked and not state.healthy:
            return NoVerdictError("image_unhealthy", f"{key[2]} ({key[1]}) is unhealthy: {state.failure}. Its "
                                                     f"samples get no verdict until a canary passes again (retried "
                                                     f"every {self.policy.retry_s:g}s; rebuild or retag the image)",
                                  environment=env.id, runtime=key[0])
        return None

    def judged(self, env: Environment, elapsed_s: float) -> None:
        """Count one sample judged in ``env``'s image, and the time it took."""
        key = self._key_of(env)
        if key is None:
            return
        state = _state(key)
        with _STATES_LOCK:
            state.samples += 1
            state.judged_s += elapsed_s

    def _check(self, key: tuple[str, str, str], state: _Health, env: Environment, admission: Any) -> None:
        started = time.monotonic()
        failures, unknown = [], []
        for canary in canaries_for(env):
            outcome = self._judge(canary, admission)
            how = wrongness(canary, outcome)
            if how is not None:
                failures.append(f"canary {env.id}:{canary.name} failed: {how}")
            elif not outcome.has_verdict:
                unknown.append(f"{canary.name} ({outcome.error_type})")
        self.checks += 1
        state.last_s = time.monotonic()
        state.cost_s = state.last_s - started
        self.spent_s += state.cost_s
        state.samples, state.judged_s = 0, 0.0
        image = f"{key[2]} ({key[1]})"
        if failures:
            state.checked, state.healthy, state.failure = True, False, "; ".join(failures)
            log.error("deepgym: %s is unhealthy, its samples get no verdict (image_unhealthy): %s", image,
                      state.failure)
            self._report(key[2], f"{key[1]}: {state.failure}")
        elif unknown:
            log.warning("deepgym: the canaries of %s had no verdict (%s); checking again in %gs", image,
                        ", ".join(unknown), self.policy.retry_s)
        else:
            if state.checked and not state.healthy:
                log.warning("deepgym: %s is healthy again: its canaries passed", image)
            self._report(key[2], None)
            state.checked, state.healthy, state.failure = True, True, ""
