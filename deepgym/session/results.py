"""What an episode gives back: the agent's :class:`Observation` of each step and its :class:`StepResult`, and what
an episode's actions make of a reply (:class:`Reply`) or of the final verification (:class:`Verification`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..outcome import NoVerdictError


@dataclass(frozen=True)
class Observation:
    """What the agent sees after a step: text, and optionally images (PNG bytes), so computer use fits."""

    text: str
    images: tuple[bytes, ...] = ()
    screen: str | None = None
    """A persistent terminal's screen as it shows after the step (:mod:`deepgym.session.terminal`); None for
    other actions."""


@dataclass(frozen=True)
class StepResult:
    """One step: what the agent sees, the step's reward (0 unless the environment rewards steps: the
    episode's reward is :meth:`Episode.score`) and whether the episode is over."""

    observation: Observation
    reward: float
    done: bool


@dataclass(frozen=True)
class Reply:
    """What an action set made of an action's reply: the agent's observation, whether the action ended the
    episode (the agent said done, the browser closed), or the no-verdict outcome that ended it."""

    observation: Observation
    over: bool = False
    failure: NoVerdictError | None = None


@dataclass(frozen=True)
class Verification:
    """What the final verification left, for :class:`~deepgym.verdict.EpisodeFacts`."""

    report: Any
    deadline_hit: bool = False
    in_play: bool = False
    said: str = ""
