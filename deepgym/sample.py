"""One single-turn sample on its way to an outcome, prepared once: its environment, how it is isolated, and the
runner's request with the submission extracted from the response. The sync path (:meth:`deepgym.DeepGym.judge`)
and the async one (:mod:`deepgym.aio`) both prepare a sample here and then decide it, so a response is
extracted once whichever path judges it.
"""

from __future__ import annotations

import secrets
from collections.abc import Sequence
from dataclasses import dataclass

from .environments import Environment, load_environment
from .extract import submission
from .judging import isolation_for
from .outcome import Verdict
from .rows import RowTask
from .runner.protocol import DIFF_KINDS, Request
from .sandbox import Provider
from .verdict import zero


@dataclass(frozen=True)
class Sample:
    """A sample with something to run."""

    env: Environment
    request: Request
    isolation: str


def prepare(task: str | Environment | RowTask, response: str, *, provider: Provider, variant: int = 0,
            reasoning: str = "auto", isolation: str | None = None) -> Sample | Verdict:
    """The sample of ``response`` in ``task``, or its verdict at once when the response has nothing to run (a
    scored 0: no code block, no diff). Raises ValueError for a variant or an isolation that does not exist."""
    row = task if isinstance(task, RowTask) else None
    env = row.environment if row is not None else load_environment(task)
    isolation = isolation_for(env, isolation, provider)
    if not 0 <= variant < env.variants:
        raise ValueError(f"variant {variant} is out of range: {env.id} has {env.variants} variant(s), "
                         f"0 to {env.variants - 1}")
    code = submission(env, response, reasoning)
    if code is None:
        error_type = "invalid_patch" if env.kind in DIFF_KINDS else "no_code_block"
        return zero(error_type, f"the response has no {'diff' if env.kind in DIFF_KINDS else 'fenced code block'}, "
                                "so nothing was run", environment=env.id, runtime=provider.name, variant=variant)
    request = Request(nonce=secrets.token_hex(16), kind=env.kind, submission=code, entry_point=env.entry_point,
                      variant=variant, scoring=env.scoring, limits=env.limits, tests=row.tests if row is not None else None)
    return Sample(env, request, isolation)


def batch_tasks(env: str | Environment | RowTask | Sequence[RowTask],
                responses: Sequence[str]) -> list[Environment | RowTask]:
    """What each response of a batch is judged in: ``env`` for all, or one dataset row's tests per response."""
    if isinstance(env, (list, tuple)):
        if len(env) != len(responses):
            raise ValueError(f"run_batch got {len(env)} rows for {len(responses)} responses; give one per response")
        return list(env)
    return [env if isinstance(env, RowTask) else load_environment(env)] * len(responses)
