"""The client: turn model responses into verdicts for an environment.

``DeepGym(mode).run(env, response)`` extracts the submission, judges it in a fresh sandbox of the mode's
provider (:func:`deepgym.judging.observe`), and classifies what was observed. It returns a :class:`~deepgym.verdict.Verdict` or raises
:class:`~deepgym.verdict.NoVerdictError`. ``run_batch`` does the same for many responses in parallel and
returns every outcome in order, so a failure never costs the samples already judged.
"""

from __future__ import annotations

import logging
import os
import secrets
import time
import traceback
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Iterable, Sequence

from . import shutdown
from .accounting import NoVerdictMonitor
from .admission import Admission
from .environments import Environment, load_environment
from .extract import check_reasoning, extract_code, extract_patch
from .judging import Images, isolation_for, observe
from .pushed import pinned_refs
from .rows import RowTask
from .runner.protocol import Request
from .sandbox import MODES, make_provider
from .verdict import NoVerdictError, Observation, Verdict, classify

log = logging.getLogger("deepgym")
Outcome = Verdict | NoVerdictError


def submission(env: Environment, response: str, reasoning: str = "auto") -> str | None:
    """What judging ``response`` in ``env`` runs, by the extraction rules (:mod:`deepgym.extract`): the diff of
    a patch task, else the code; None when there is nothing to run."""
    if env.kind == "patch":
        return extract_patch(response, reasoning=reasoning)
    return extract_code(response, entry_point=env.entry_point, reasoning=reasoning)


def batch_tasks(env: str | Environment | RowTask | Sequence[RowTask],
                responses: Sequence[str]) -> list[Environment | RowTask]:
    """What each response of a batch is judged in: ``env`` for all, or one dataset row's tests per response."""
    if isinstance(env, (list, tuple)):
        if len(env) != len(responses):
            raise ValueError(f"run_batch got {len(env)} rows for {len(responses)} responses; give one per response")
        return list(env)
    return [env if isinstance(env, RowTask) else load_environment(env)] * len(responses)


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


class DeepGym:
    """Scores model responses in an environment's verifier image.

    Args:
        mode: ``docker`` (a fresh locked-down container per sample), ``daytona`` (a fresh Daytona sandbox of
            the same image, docs/providers.md), ``auto`` (docker when an engine answers, else the one remote
            provider whose credentials are set; never unisolated), or ``local`` (no isolation, for developing
            environments; needs ``allow_local=True`` or ``DEEPGYM_ALLOW_LOCAL=1``).
        max_parallel: samples judged at once by ``run_batch`` (default: the CPU count, at least 2; beyond it
            latency grows without more throughput, see benchmarks/throughput.py).
        max_sandboxes: how many sandboxes may run at once on this host, counted across every deepgym process
            and thread (:mod:`deepgym.admission`; default ``DEEPGYM_MAX_SANDBOXES``, else the CPU count). A
            sample waits for a free slot before its clocks start, so waiting never costs it its verdict. A
            remote provider's account has its own bound, host-wide (``DEEPGYM_<MODE>_MAX_SANDBOXES``).
        allow_local: the explicit opt-in that ``mode="local"`` requires.
        allow_stale_image: judge with an image built from other environment files than this host's (default:
            ``DEEPGYM_ALLOW_STALE_IMAGE=1``, else refused as ``image_stale``); such verdicts say
            ``image_status: stale``.
        docker_host: the Docker engine of ``docker`` mode, as DOCKER_HOST spells it (``unix://``, ``tcp://``,
            ``ssh://user@host``); default: DOCKER_HOST, else the local socket.
        image_manifest: a pushed-images manifest (``deepgym images push``): every environment it lists is judged
            in the image it pins by digest (default: ``DEEPGYM_IMAGE_MANIFEST``, else the local image names).
    """

    def __init__(self, mode: str = "auto", *, max_parallel: int | None = None, allow_local: bool | None = None,
                 allow_stale_image: bool | None = None, max_sandboxes: int | None = None,
                 docker_host: str | None = None, image_manifest: str | Path | None = None):
        if mode not in MODES:
            raise ValueError(f"unknown mode {mode!r}; known modes: {', '.join(MODES)}")
        self.mode = mode
        self.max_parallel = max_parallel or max(2, os.cpu_count() or 1)
        options: dict[str, Any] = {"max_parallel": self.max_parallel}
        if mode == "local":
            options["allow_local"] = allow_local
        if docker_host is not None:
            if mode not in ("auto", "docker"):
                raise ValueError(f"docker_host is an option of mode 'docker', not {mode!r}")
            options["docker_host"] = docker_host
        pinned = pinned_refs(image_manifest)
        self.provider = make_provider(mode, **options)
        key = self.provider.admission_key
        self.admission = Admission(key, max_sandboxes) if key is not None else None
        self.images = Images(allow_stale_image=allow_stale_image, pinned=pinned)
        self.monitor = NoVerdictMonitor()
        shutdown.install()  # SIGTERM/SIGINT: remove this process's containers first (DEEPGYM_SIGNAL_HANDLERS=0: not)

    @property
    def backend(self) -> str:
        return self.provider.name

    def judge(self, env: str | Environment | RowTask, response: str, *, variant: int = 0,
              reasoning: str = "auto", isolation: str | None = None) -> Outcome:
        """The outcome for one response, returned rather than raised. Counted by ``self.monitor``, which warns
        when more than 5 samples in a block of 100 have no verdict. ``reasoning`` is ``open`` when the prompt
        opened ``<think>`` (DeepSeek-R1, Qwen3 templates), see :mod:`deepgym.extract`; it is per call, so one
        client serves prompts of either kind. ``env`` may be a dataset row's tests
        (:func:`deepgym.rows.row_task`), judged in the runtime image. ``isolation`` is ``container`` (a fresh
        container per sample) or ``process`` (a warm container, docs/warm.md); default: the manifest's."""
        task = env if isinstance(env, RowTask) else None
        env = task.environment if task is not None else load_environment(env)
        isolation = isolation_for(env, isolation, self.provider)
        if not 0 <= variant < env.variants:
            raise ValueError(f"variant {variant} is out of range: {env.id} has {env.variants} variant(s), "
                             f"0 to {env.variants - 1}")
        code = submission(env, response, reasoning)
        if code is None:
            error_type = "invalid_patch" if env.kind == "patch" else "no_code_block"
            self.monitor.record(False)
            return Verdict(score=0.0, passed=False, error_type=error_type,
                           details=f"the response has no {'diff' if env.kind == 'patch' else 'fenced code block'}, "
                                   "so nothing was run", environment=env.id, runtime=self.backend, variant=variant)
        request = Request(nonce=secrets.token_hex(16), kind=env.kind, submission=code, entry_point=env.entry_point,
                          variant=variant, scoring=env.scoring, limits=env.limits,
                          tests=task.tests if task is not None else None)
        started = time.monotonic()
        try:
            observation = observe(self.provider, env, request, self.images, admission=self.admission,
                                  isolation=isolation)
        except Exception as exc:  # noqa: BLE001 - judging never raises; if it does, it is our bug, not the model's
            log.error("provider %s failed on %s:\n%s", self.backend, env.id, traceback.format_exc())
            observation = Observation(runtime=self.backend, infra_error="verifier_error",
                                      infra_reason=f"deepgym's {self.backend} provider failed: {exc!r}",
                                      elapsed_s=time.monotonic() - started)
        outcome = classify(request, observation, env.id)
        self.monitor.record(not outcome.has_verdict, outcome.error_type)
        return outcome

    def run(self, env: str | Environment | RowTask, response: str, *, variant: int = 0,
            reasoning: str = "auto", isolation: str | None = None) -> Verdict:
        """The verdict for one response. Raises NoVerdictError when the infrastructure failed."""
        outcome = self.judge(env, response, variant=variant, reasoning=reasoning, isolation=isolation)
        if isinstance(outcome, NoVerdictError):
            raise outcome
        return outcome

    def run_batch(self, env: str | Environment | RowTask | Sequence[RowTask], responses: Iterable[str], *,
                  variant: int = 0, max_parallel: int | None = None, reasoning: str = "auto",
                  isolation: str | None = None) -> BatchResult:
        """Outcomes for many responses, in order; an entry without a verdict has ``has_verdict`` False. ``env``
        may also be a list of dataset rows' tests, one per response (each row judged with its own)."""
        check_reasoning(reasoning)
        responses = list(responses)
        tasks = batch_tasks(env, responses)
        workers = max(1, min(max_parallel or self.max_parallel, len(responses)))
        with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="deepgym") as pool:
            return BatchResult(pool.map(lambda job: self.judge(job[0], job[1], variant=variant, reasoning=reasoning,
                                                               isolation=isolation), zip(tasks, responses)))

    async def ajudge(self, env: str | Environment | RowTask, response: str, **options: Any) -> Outcome:
        """:meth:`judge` for a coroutine, with the same arguments: it blocks no event loop, and a sample waiting
        for its admission slot holds no thread (:mod:`deepgym.aio`)."""
        from .aio import judge

        return await judge(self, env, response, options)

    async def arun(self, env: str | Environment | RowTask, response: str, **options: Any) -> Verdict:
        """:meth:`run` for a coroutine, with the same arguments (see :meth:`ajudge`). Raises NoVerdictError."""
        outcome = await self.ajudge(env, response, **options)
        if isinstance(outcome, NoVerdictError):
            raise outcome
        return outcome

    async def arun_batch(self, env: str | Environment | RowTask | Sequence[RowTask], responses: Iterable[str], *,
                         max_parallel: int | None = None, **options: Any) -> BatchResult:
        """:meth:`run_batch` for a coroutine, with the same arguments: every sample is a coroutine until it is
        admitted. ``max_parallel`` caps how many of this batch's samples run at once (default: as many as
        admission lets run)."""
        from .aio import run_batch

        return await run_batch(self, env, responses, max_parallel, options)

    def asession(self, env: str | Environment, variant: int = 0):
        """:meth:`session` for a coroutine: an async context manager returning a
        :class:`deepgym.aio.AsyncSession`, whose ``start``, ``step``, ``score`` and ``close`` are awaited."""
        from .aio import AsyncSession

        return AsyncSession(self, self.session(env, variant))

    def session(self, env: str | Environment, variant: int = 0):
        """A live multi-turn episode of a ``session`` environment in its own container: a context manager
        returning a :class:`deepgym.session.Session` (``start``, ``step``, ``score``, ``close``); for a
        ``desktop`` environment, a :class:`deepgym.desktop.DesktopSession` with the same interface."""
        from .session import Session

        if load_environment(env).kind == "desktop":
            from .desktop import DesktopSession

            return DesktopSession(self, env, variant)
        return Session(self, env, variant)

    def close(self) -> None:
        """Remove any sandbox this client still owns and close its connections."""
        from . import aio, desktop

        aio.close(self)
        desktop.close_pool(self)  # its containers are removed through the provider, so before it closes
        self.provider.close()

    def __enter__(self) -> DeepGym:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
