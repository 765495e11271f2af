"""SWE-style instances as episodes: the agent works in the instance's repository through a persistent terminal,
and its final diff against ``base_commit`` is graded as a single-turn response's diff would be.

::

    task = swe_task(row)                                   # deepgym.swe: the same task serves both ways in
    with gym.session(task) as session:                     # an SweSession
        first = session.start()                            # the problem statement; cwd: the repository
        session.step("sed -i 's/a - b/a + b/' calc/ops.py")
        verdict = session.score()                          # FAIL_TO_PASS and PASS_TO_PASS, per test in cases

The container is the instance's layer (:mod:`deepgym.swe_images`). Everything but the in-sandbox side is a
persistent terminal's episode (:class:`~deepgym.session.terminal.TerminalActions`): the actions, the budgets,
the admission, the kill of every process of the agent, proved, before anything is read. The in-sandbox side
(:mod:`deepgym.runner.episode.swe`) copies the repository into the agent's workspace at ``base_commit``, and
at grading takes the agent's diff against it and judges it with the single-turn judge, on the image's pristine
repository, so nothing the agent left in its workspace but that diff counts.
"""

from __future__ import annotations

from typing import Any

from ..rows import RowTask
from ..sandbox.base import IMAGE_PYTHON
from .episode import HOST_GRACE_S, Context, Episode
from .shell import AGENT_UID
from .terminal import TerminalActions, TerminalSession

# The in-sandbox side of an SWE episode, as the layered image carries the runner.
IMAGE_SWE_EPISODE = (*IMAGE_PYTHON, "-m", "deepgym_runner.episode.swe")


class SweActions(TerminalActions):
    """A persistent terminal in the instance's repository, graded by its final diff."""

    def __init__(self, context: Context, task: RowTask):
        super().__init__(context)
        self.task = task

    def refusal(self, episode: Episode) -> str | None:
        provider = episode.context.provider
        if provider.host_image is not None or not self.runner.own_uids or not provider.streams:
            return (f"SWE episodes run in the instance's image, with uids of their own, through a persistent "
                    f"terminal whose stream stays open; mode={episode.context.runtime!r} lacks one of these. Use "
                    f"mode='docker' (the single-turn way in, a response's diff, needs no terminal)")
        return super().refusal(episode)

    def runner_argv(self) -> tuple[str, ...]:
        return IMAGE_SWE_EPISODE

    def runner_request(self, episode: Episode, nonce: str) -> dict[str, Any]:
        env = episode.env
        return {"nonce": nonce, "agent_uid": AGENT_UID, "workspace": self.workspace, "tests": self.task.tests,
                "scoring": env.scoring, "limits": env.limits.to_dict()}

    def verify_deadline_s(self, episode: Episode) -> float:
        """The single-turn judge's own deadline, the diff's, and slack."""
        return episode.env.limits.host_deadline_s + 2 * HOST_GRACE_S


class SweSession(TerminalSession):
    """One episode of an SWE-style instance (see the module's docstring); :meth:`DeepGym.session
    <deepgym.DeepGym.session>` makes one for a task of :func:`deepgym.swe.swe_task`."""

    def __init__(self, context: Context, task: RowTask, variant: int = 0):
        Episode.__init__(self, context, task.environment, variant, SweActions(context, task))
