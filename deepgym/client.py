"""The client: turn model responses into verdicts for an environment.

``DeepGym(mode).run(env, response)`` extracts the submission, judges it in a fresh sandbox of the mode's
provider (:func:`deepgym.judging.observe`), and classifies what was observed. It returns a :class:`~deepgym.verdict.Verdict` or raises
:class:`~deepgym.verdict.NoVerdictError`. ``run_batch`` does the same for many responses in parallel and
returns every outcome in order, so a failure never costs the samples already judged.
"""

from __future__ import annotations

import asyncio
import logging
import os
import threading
import time
import traceback
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Iterable, Sequence

from .accounting import NoVerdictMonitor
from .admission import Admission, HeldSlot
from .canary import Canaries, Canary, CanaryPolicy, play
from .aio import AsyncFaces, in_event_loop
from .environments import Environment, load_environment
from .extract import check_reasoning
from .judging import Images, aobserve, observe
from .outcome import BatchResult, NoVerdictError, Outcome, Verdict
from .pushed import pinned_refs
from .rows import RowTask
from .sample import Sample, batch_tasks, prepare
from .sandbox import MODES, SandboxError, make_provider
from .sandbox.direct import host_admission
from .session import DesktopSession, Session, TerminalSession
from .session.desktop import Desktop
from .session.episode import Context
from .session.swe import SweSession
from .sandbox.ready import ReadyPool
from .session.ready import DesktopKind, ready_desktops, prewarm_size
from .shutdown import install
from .verdict import RunFacts, classify

__all__ = ["BatchResult", "DeepGym", "Outcome"]
log = logging.getLogger("deepgym")


class DeepGym(AsyncFaces):
    """Scores model responses in an environment's verifier image.

    Args:
        mode: ``docker`` (a fresh locked-down container per sample), ``daytona`` (a fresh Daytona sandbox of
            the same image, docs/providers.md), ``auto`` (docker when an engine answers, else the one remote
            provider whose credentials are set; never unisolated), ``ray`` (each sample placed by your Ray cluster
            on a node that offers ``deepgym_sandbox`` and judged there; this host needs no engine and no image,
            docs/ray.md), or ``local`` (no isolation, for developing environments; needs ``allow_local=True`` or
            ``DEEPGYM_ALLOW_LOCAL=1``).
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
        canaries: judge each image's reference and known-wrong solutions at its first use and now and then
            after, refusing its samples (``image_unhealthy``) while one gets a wrong verdict
            (:mod:`deepgym.canary`, docs/canaries-and-replay.md). True or None: on, as ``DEEPGYM_CANARIES``
            says (default on); False: off; a :class:`~deepgym.canary.CanaryPolicy`: on, with its schedule.
    """

    def __init__(self, mode: str = "auto", *, max_parallel: int | None = None, allow_local: bool | None = None,
                 allow_stale_image: bool | None = None, max_sandboxes: int | None = None,
                 docker_host: str | None = None, image_manifest: str | Path | None = None,
                 canaries: bool | CanaryPolicy | None = None):
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
        super().__init__()
        self.provider = make_provider(mode, **options)
        self.admission = host_admission(self.provider, max_sandboxes)
        self.images = Images(allow_stale_image=allow_stale_image, pinned=pinned)
        self.monitor = NoVerdictMonitor()
        policy = canaries if isinstance(canaries, CanaryPolicy) else (
            CanaryPolicy.from_environment() if canaries in (None, True) else None)
        self.canaries = None if policy is None else Canaries(
            policy, self._judge_canary, self._image_key, lambda env: self.images.forget(self.provider, env),
            self.monitor.canary)
        self._desktops: ReadyPool[DesktopKind, Desktop] | None = None
        self._desktops_lock = threading.Lock()
        install()  # SIGTERM/SIGINT: remove this process's containers first (DEEPGYM_SIGNAL_HANDLERS=0: not)

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
        return self._decide(self._prepare(env, response, variant=variant, reasoning=reasoning, isolation=isolation),
                            self.admission)

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
        if self.awaited and not in_event_loop():  # no thread need wait for a sample: coroutines on a loop of its own
            return asyncio.run(self.arun_batch(env, responses, max_parallel=workers, variant=variant,
                                               reasoning=reasoning, isolation=isolation))
        with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="deepgym") as pool:
            return BatchResult(pool.map(lambda job: self.judge(job[0], job[1], variant=variant, reasoning=reasoning,
                                                               isolation=isolation), zip(tasks, responses)))

    def session(self, env: str | Environment | RowTask, variant: int = 0) -> Session | DesktopSession:
        """A live multi-turn episode of a ``session`` environment in its own container: a context manager
        returning a :class:`deepgym.session.Session` (``start``, ``step``, ``score``, ``close``), or its
        :class:`deepgym.session.TerminalSession` when the manifest asks for a persistent terminal; for a
        ``desktop`` environment, a :class:`deepgym.session.DesktopSession` with the same interface; for an
        SWE-style instance (:func:`deepgym.swe.swe_task`), a :class:`deepgym.session.swe.SweSession`."""
        return self._session(env, variant, gated=True)

    def _session(self, env: str | Environment | RowTask, variant: int, *, gated: bool) -> Session | DesktopSession:
        """A session whose start passes the canaries' gate when ``gated`` (a canary's own episode is not)."""
        gate = (lambda environment: self._gate(environment, self.admission)) if gated else None
        context = Context(provider=self.provider, images=self.images, admission=self.admission, monitor=self.monitor,
                          runtime=self.backend, gate=gate)
        if isinstance(env, RowTask):
            if env.format != "swe":
                raise ValueError(f"a {env.data_source} row is judged single-turn (DeepGym.run); only SWE-style "
                                 f"instances (deepgym.swe.swe_task) are episodes")
            return SweSession(context, env, variant)
        environment = load_environment(env)
        if environment.kind == "desktop":
            ready = self._ready_desktops()
            take = (lambda spec, screen: ready.take(DesktopKind(spec, screen))) if ready is not None else None
            return DesktopSession(context, env, variant, take)
        if environment.session is not None and environment.session.terminal == "persistent":
            return TerminalSession(context, env, variant)
        return Session(context, env, variant)

    def close(self) -> None:
        """Remove any sandbox this client still owns and close its connections."""
        self._close_executors()
        desktops, self._desktops = self._desktops, None
        if desktops is not None:  # its containers are removed through the provider, so before it closes
            desktops.close()
        self.provider.close()

    def __enter__(self) -> DeepGym:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _prepare(self, env: str | Environment | RowTask, response: str, *, variant: int = 0, reasoning: str = "auto",
                 isolation: str | None = None, count: bool = True) -> Sample | Verdict:
        """The sample, extracted once; a response with nothing to run is decided (and, with ``count``, counted)
        at once."""
        prepared = prepare(env, response, provider=self.provider, variant=variant, reasoning=reasoning,
                           isolation=isolation)
        if count and not isinstance(prepared, Sample):
            self.monitor.record(False)
        return prepared

    def _decide(self, prepared: Sample | Verdict, admission: Admission | HeldSlot | None) -> Outcome:
        """The outcome of a prepared sample: refused when its image is unhealthy (:mod:`deepgym.canary`), else
        judged in a sandbox once ``admission`` gives it a slot and classified by
        :func:`deepgym.verdict.classify`; counted either way."""
        if not isinstance(prepared, Sample):
            return prepared
        refused = self._gate(prepared.env, admission)
        if refused is not None:
            return self._counted(prepared, refused, None)
        started = time.monotonic()
        return self._counted(prepared, self._classified(prepared, admission), started)

    def _gate(self, env: Environment, admission: Admission | HeldSlot | None) -> NoVerdictError | None:
        """The canaries' refusal of a sample of ``env`` (after a check, when one is due), or None. A sample that
        already holds its slot does not wait behind another thread's check, which may need that slot."""
        if self.canaries is None:
            return None
        return self.canaries.gate(env, admission, wait=not isinstance(admission, HeldSlot))

    def _image_key(self, env: Environment) -> tuple[str, str, str] | None:
        """The image a sample of ``env`` runs in, whose canary state it shares: (provider, image id,
        reference), or None when it cannot be resolved (the sample's own no verdict will say why)."""
        if self.provider.host_image is not None:  # no image: the host judges each environment's own tests
            return self.backend, f"{self.provider.host_image}:{env.id}", env.id
        try:
            image_id, _ = self.images.resolve(self.provider, env)
        except SandboxError:
            return None
        return self.backend, image_id, self.images.ref(env)

    def _judge_canary(self, canary: Canary, admission: Admission | HeldSlot | None) -> Outcome:
        """A canary's outcome, judged as a sample is but not gated, counted or timed as one."""
        env = canary.task.environment if isinstance(canary.task, RowTask) else canary.task
        if env.kind in ("session", "desktop"):
            return play(lambda: self._session(env, 0, gated=False), canary.answer)
        return self._classified(self._prepare(canary.task, canary.answer, count=False), admission)

    def _classified(self, prepared: Sample | Verdict, admission: Admission | HeldSlot | None) -> Outcome:
        """Judge a prepared sample in a sandbox and classify what was seen; nothing counted."""
        if not isinstance(prepared, Sample):
            return prepared
        started = time.monotonic()
        try:
            facts = observe(self.provider, prepared.env, prepared.request, self.images, admission=admission,
                            isolation=prepared.isolation)
        except Exception as exc:  # noqa: BLE001 - judging never raises; if it does, it is our bug, not the model's
            facts = self._bug(prepared, exc, started)
        return classify(prepared.request, facts, prepared.env.id)

    async def _adecide(self, prepared: Sample) -> Outcome:
        """:meth:`_decide` awaited on a provider that :attr:`~deepgym.sandbox.base.Provider.awaits` (no
        admission of this host's): no thread waits for the sample. A due canary check already ran in a thread
        (:meth:`AsyncFaces._check_canaries`), so here the image's health is only read, never checked."""
        refused = self.canaries.refusal(prepared.env) if self.canaries is not None else None
        if refused is not None:
            return self._counted(prepared, refused, None)
        started = time.monotonic()
        try:
            facts = await aobserve(self.provider, prepared.env, prepared.request, self.images)
        except Exception as exc:  # noqa: BLE001 - judging never raises; if it does, it is our bug, not the model's
            facts = self._bug(prepared, exc, started)
        return self._counted(prepared, classify(prepared.request, facts, prepared.env.id), started)

    def _bug(self, prepared: Sample, exc: Exception, started: float) -> RunFacts:
        log.error("provider %s failed on %s:\n%s", self.backend, prepared.env.id, traceback.format_exc())
        return RunFacts(runtime=self.backend, infra_error="verifier_error",
                        infra_reason=f"deepgym's {self.backend} provider failed: {exc!r}",
                        elapsed_s=time.monotonic() - started)

    def _counted(self, prepared: Sample, outcome: Outcome, started: float | None) -> Outcome:
        """``outcome``, counted by the monitor; a verdict judged since ``started`` also counts towards its
        image's canary schedule."""
        self.monitor.record(not outcome.has_verdict, outcome.error_type, reason=getattr(outcome, "reason", None),
                            environment=prepared.env.id)
        if self.canaries is not None and started is not None and outcome.has_verdict:
            self.canaries.judged(prepared.env, time.monotonic() - started)
        return outcome

    def _ready_desktops(self) -> ReadyPool[DesktopKind, Desktop] | None:
        """The client's ready desktops on its provider (None when prewarming is off), made on first use."""
        with self._desktops_lock:
            if self._desktops is None:
                size = prewarm_size()
                if size:
                    self._desktops = ready_desktops(self.provider, size, self.admission)
            return self._desktops
