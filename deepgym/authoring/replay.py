"""An episode environment's action sequences (``solutions/<name>.json``) and their replay: what ``deepgym check``,
the tests and the benchmarks drive episodes with."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from ..environments import Environment
from ..outcome import NoVerdictError, Outcome

if TYPE_CHECKING:
    from ..client import DeepGym


def replay(gym: DeepGym, env: str | Environment, actions: list[Any], *, variant: int = 0) -> Outcome:
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


def action_sequences(env: Environment, name: str) -> dict[int, list[Any]]:
    """``solutions/<name>.json`` of an episode environment: variant -> its list of actions (shell commands, or
    ``computer`` actions)."""
    data = json.loads((env.path / "solutions" / f"{name}.json").read_text())
    return {int(variant): list(actions) for variant, actions in data.items()}
