"""Ray's failures as deepgym's, in one place: what a lost task, a dead node or an answer from a node means for a
sample, depending on whether it had reached a sandbox.

Before the node said :class:`~deepgym.sandbox.ray.node.Started`, nothing of the submission had run: a worker or
node lost then is :class:`NotReached`, which the provider may send once more. After it, the submission may have
been in play when its node went, and nothing tells whose doing that was (a submission that brings its node down
must not get a second node to try): ``sandbox_lost`` (:class:`~deepgym.sandbox.base.NodeLost`, which an episode
never scores either). Neither is ever a 0.
"""

from __future__ import annotations

from ..base import ImageMissing, NodeLost, ProviderUnavailable, SandboxError, SandboxLost, StartFailure
from .node import Failed, Started

# The node's answers, back into the provider error each names.
_BY_TYPE: dict[str, type[SandboxError]] = {kind.error_type: kind for kind in
                                          (ProviderUnavailable, ImageMissing, StartFailure, SandboxLost)}


class NotReached(StartFailure):
    """The sample was lost before it reached a sandbox: it may be dispatched again, and is a start failure when
    it may not."""


def answered(failed: Failed) -> SandboxError:
    """The error a node's :class:`~deepgym.sandbox.ray.node.Failed` answer stands for."""
    return _BY_TYPE.get(failed.error_type, SandboxLost)(failed.reason)


def translated(exc: BaseException, started: Started | None) -> SandboxError:
    """The deepgym error for ``exc``, which ``ray.get`` raised for a sample's task (``started`` says whether
    and where it had reached a sandbox). Raises ``exc`` again when it is not Ray's, and a RuntimeError when
    deepgym's own code failed on the node after the sample started: both bugs of ours, which the client reports
    as ``verifier_error`` with their traceback."""
    import ray.exceptions

    if not isinstance(exc, ray.exceptions.RayError):
        raise exc
    what = f"{type(exc).__name__}: {_summary(exc)}"
    if isinstance(exc, ray.exceptions.RuntimeEnvSetupError):
        return StartFailure(f"Ray could not set up the judging task's runtime environment: {what}")
    if started is None:
        if isinstance(exc, ray.exceptions.RayTaskError):  # our code raised on the node before any sandbox
            return StartFailure(f"a Ray node could not run deepgym's judge (is deepgym installed there, at the "
                                f"caller's version?): {what}")
        return NotReached(f"Ray lost the judging task before it reached a sandbox: {what}")
    if isinstance(exc, ray.exceptions.RayTaskError):
        raise RuntimeError(f"deepgym's judge failed on Ray node {started.node}: {what}") from exc
    return NodeLost(f"Ray node {started.node} or its worker was lost while the sample was in play: {what}")


def _summary(exc: BaseException) -> str:
    """One line of ``exc``: what our code raised on the node (a RayTaskError's text is the whole traceback),
    else the first line of Ray's own message."""
    cause = getattr(exc, "cause", None)
    text = repr(cause) if isinstance(cause, BaseException) else str(exc).strip()
    return text.splitlines()[0][:300] if text else ""
