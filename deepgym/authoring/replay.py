"""An episode environment's action sequences (``solutions/<name>.json``) and their replay: what ``deepgym check``,
the tests and the benchmarks drive episodes with."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..canary import action_sequences, play
from ..environments import Environment
from ..outcome import Outcome

if TYPE_CHECKING:
    from ..client import DeepGym

__all__ = ["action_sequences", "replay"]


def replay(gym: DeepGym, env: str | Environment, actions: list[Any], *, variant: int = 0) -> Outcome:
    """The outcome of an episode that runs ``actions`` in order (fewer if the episode ends first), returned
    rather than raised: what ``deepgym check`` does with an environment's reference and wrong sequences."""
    return play(lambda: gym.session(env, variant), actions)
