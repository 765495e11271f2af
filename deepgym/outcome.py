"""What an outcome is: a :class:`Verdict` (a score the trainer may use), a :class:`NoVerdictError` (the
infrastructure failed: never trained on), and a batch of them (:class:`BatchResult`).

Only :mod:`deepgym.verdict` decides which one a sample or an episode gets; this module holds the shapes alone, so
that everything that carries an outcome (the client, the async face, episodes, the trainers' adapters) can
name them without importing the rules.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import asdict, dataclass, field
from typing import Any, Union

from .errors import DeepGymError
from .runner.protocol import ERROR_TYPES, is_scored

@dataclass(frozen=True)
class CaseResult:
    """One hidden case: its id, whether it passed, short summaries of input, expected and actual values."""

    id: str
    passed: bool
    input: str | None = None
    expected: str | None = None
    actual: str | None = None
    error_type: str | None = None
    error: str | None = None
    cpu_s: float = 0.0


@dataclass(frozen=True)
class Verdict:
    """A judged sample. ``score`` is in [0, 1]; ``passed`` means every hidden case passed."""

    score: float
    passed: bool
    error_type: str | None
    details: str
    environment: str
    runtime: str
    variant: int = 0
    cases: tuple[CaseResult, ...] = ()
    cases_total: int = 0
    timings: dict[str, float] = field(default_factory=dict)
    image_id: str | None = None
    image_status: str | None = None
    """``current``, ``unverified`` (built without deepgym's hash label, e.g. by hand) or ``stale`` (built from
    other environment files, judged only because stale images were allowed); None when no image judged."""
    node: str | None = None
    """The machine that judged it when the provider chose one of several (``mode="ray"``: the Ray node id), so
    that a verdict can be traced to the node and its image (``image_id`` is that node's); None otherwise."""
    provenance: dict[str, Any] = field(default_factory=dict)
    """What it takes to judge the sample again (``deepgym replay``, docs/canaries-and-replay.md): the
    environment's content hash, the image's id, reference and digest, the runner's hash, the variant, the
    limits, the submission's sha256 (and a dataset row's tests'), and deepgym's version."""

    has_verdict = True

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["cases"] = [asdict(case) for case in self.cases]
        data["has_verdict"] = True
        return data


class NoVerdictError(DeepGymError):
    """The infrastructure failed, so this sample has no verdict and must not be trained on (never as a 0).

    It is raised by :meth:`deepgym.DeepGym.run` and returned in place of a verdict by ``run_batch``, so both
    kinds of batch entry answer ``has_verdict``, ``score``, ``error_type`` and ``to_dict()``.
    """

    has_verdict = False
    score = None
    passed = None

    def __init__(self, error_type: str, reason: str, *, environment: str | None = None,
                 runtime: str | None = None, variant: int = 0):
        if error_type not in ERROR_TYPES or is_scored(error_type):
            raise ValueError(f"{error_type!r} is not a no-verdict error type")
        self.error_type = error_type
        self.reason = reason
        self.environment = environment
        self.runtime = runtime
        self.variant = variant
        where = f" [{environment} on {runtime}]" if environment else ""
        super().__init__(f"no verdict ({error_type}){where}: {reason}")

    def __reduce__(self):
        # Pickled across processes (verl's reward workers are Ray actors): the same class, message and fields.
        return (_restore, (self.__class__, self.args, dict(self.__dict__)))

    def to_dict(self) -> dict[str, Any]:
        return {"has_verdict": False, "score": None, "passed": None, "error_type": self.error_type,
                "reason": self.reason, "environment": self.environment, "runtime": self.runtime,
                "variant": self.variant}


def _restore(cls: type[NoVerdictError], args: tuple, state: dict[str, Any]) -> NoVerdictError:
    error = cls.__new__(cls)
    error.args = args
    error.__dict__.update(state)
    return error


Outcome = Union[Verdict, NoVerdictError]
"""What judging one sample or one episode gives: a verdict, or no verdict."""


class BatchResult(list):
    """One entry per response, in order: a Verdict, or a NoVerdictError (``has_verdict`` False)."""

    @property
    def scored(self) -> int:
        return sum(1 for entry in self if entry.has_verdict)

    @property
    def no_verdict(self) -> int:
        return len(self) - self.scored

    def counts(self) -> dict[str, int]:
        """How many entries ended each way: ``passed``, or their error type."""
        return dict(Counter("passed" if e.has_verdict and e.passed else e.error_type for e in self))

    def summary(self) -> dict[str, Any]:
        scores = [e.score for e in self if e.has_verdict]
        return {"samples": len(self), "scored": len(scores), "no_verdict": len(self) - len(scores),
                "mean_score": sum(scores) / len(scores) if scores else None, "by_outcome": self.counts()}
