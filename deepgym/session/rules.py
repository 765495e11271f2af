"""The episode table: how a failure ends an episode (:func:`failure_result`), and the pure rules around an
action (what a valid shell action is, how long output is cut, what a command that never started looks like).

Only :mod:`deepgym.verdict` builds a verdict; this table picks which one an episode's failure gets.
"""

from __future__ import annotations

from typing import Any

from ..outcome import Outcome
from ..sandbox import ExecResult, NodeLost, ProviderUnavailable, SandboxError, StartFailure
from ..shutdown import reason, requested
from ..verdict import NoVerdictError, zero

MAX_ACTION_CHARS = 64 << 10
CUT = "\n[... {count} characters cut ...]\n"
# What docker's exec prints, with status 126, when the engine could not start the command in the container
# (its pids are used up, its init is gone).
EXEC_NOT_STARTED = b"OCI runtime exec failed"


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
                   elapsed_s: float = 0.0, lifetime_s: float = float("inf"), runtime: str = "docker") -> Outcome:
    """The outcome of an episode that ``exc`` ended, in ``phase`` (``start``, ``action`` or ``verify``).

    One table; no verdict only for failures that are ours for certain, everything else scored:

    ===  =====================================================  =========  ===================================
    row  failure                                                phase      outcome
    ===  =====================================================  =========  ===================================
    1    the engine, provider, network or credentials failed,   any        no verdict, ``daemon_unavailable``
         or the machine holding the sandbox was lost                       (``sandbox_lost`` for a machine)
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
    comes back as text and the episode goes on (:func:`invalid_action`); the final verification's report is
    classified by :func:`deepgym.verdict.classify_episode` (a verifier that could not run or timed out before
    it read the agent's state is no verdict, one that timed out after it a scored 0); an episode where the
    agent never acted scores 0 (``no_action``, :meth:`deepgym.session.episode.Episode.score`).

    Row 2 includes an admission wait that timed out (deepgym's sandboxes raise StartFailure for it, as the
    provider accounts' slots do for a single-turn sample): nothing of the agent's ran in it, in any phase.

    Row 4 includes a container removed from outside while the agent acted: the engine cannot tell that from
    one the agent's processes brought down, and the rule charges what it cannot read to the episode, so that
    "no verdict" is never an outcome the policy can choose.
    """
    where = {"environment": environment, "runtime": runtime, "variant": variant}
    if requested():  # row 6, before row 4: the shutdown broke the sandbox, not the agent
        return NoVerdictError("cancelled", f"deepgym is shutting down ({reason()}), which ended the episode "
                                           f"in its {phase} phase", **where)
    if not isinstance(exc, SandboxError):
        return NoVerdictError("verifier_error", f"deepgym failed in the session's {phase} phase: {exc!r}", **where)
    if isinstance(exc, (ProviderUnavailable, NodeLost)):
        return NoVerdictError(exc.error_type, exc.reason, **where)
    if phase == "start" or isinstance(exc, StartFailure):
        return NoVerdictError(exc.error_type, exc.reason, **where)
    if elapsed_s >= lifetime_s and 2 * acting_s < elapsed_s:
        return NoVerdictError("sandbox_lost", f"the sandbox's lifetime of {lifetime_s:g}s ran out, most of it not in "
                                              f"the agent's actions ({acting_s:.1f}s of {elapsed_s:.1f}s)", **where)
    return zero("policy_sandbox_failure", f"the episode ended in its {phase} phase because the sandbox broke under "
                                          f"the agent: {exc.reason}", **where)
