"""One judging path over any sandbox: the request goes to the runner on its stdin, the runner runs in a fresh
sandbox of the environment's image, and what came back becomes an :class:`~deepgym.verdict.RunFacts`.

:func:`observe` never decides a verdict (:func:`~deepgym.verdict.classify` does, from the runner's own facts),
and never raises for a failure of the sandbox or its provider: that is the observation's ``infra_error``.
The same code serves every provider; Docker's attached main process is only a faster
:meth:`~deepgym.sandbox.Provider.run`.

Images are resolved once per environment by :class:`Images` and sandboxes start from the resolved id, never
from the tag, so a verdict's ``image_id`` is the image that judged it even when the tag moves mid-run. An
image built from other environment files than the host's (its content-hash label differs) is refused
(``image_stale``, no verdict) unless the caller allows it knowingly; then every verdict it gives says
``image_status: stale``.
"""

from __future__ import annotations

import contextlib
from functools import lru_cache
from importlib import metadata
import logging
import os
import threading
import time
from collections.abc import Mapping
from dataclasses import replace

from .shutdown import reason as shutdown_reason
from .shutdown import requested as shutdown_requested
from .admission import Admission, AdmissionCancelled
from .environments import ISOLATIONS, START_GRACE_S, Environment, sandbox_spec

from .swe_images import ensure as ensure_layer
from .errors import DeepGymError, ImageBuildError
from .images import HASH_LABEL, content_hash, hash_status, image_name, runner_hash
from .registration import registered_name
from .runner.protocol import Request
from .sandbox import ExecOptions, ExecResult, ImageMissing, Provider, SandboxError, SandboxSpec, StartFailure
from .sandbox.base import IMAGE_RUNNER
from .verdict import RunFacts

log = logging.getLogger("deepgym")
STALE_OPT_IN_VARIABLE = "DEEPGYM_ALLOW_STALE_IMAGE"
# Warm mode's containers run the runner as a server (deepgym/runner/serve.py, docs/warm.md).
WARM_RUNNER = (*IMAGE_RUNNER, "serve")


class ImageStale(SandboxError):
    """The image was built from other environment files than the host's."""

    error_type = "image_stale"


def isolation_for(env: Environment, isolation: str | None, provider: Provider) -> str:
    """How a sample of ``env`` is isolated: ``isolation`` when the call names one, else the manifest's.
    ``process`` (warm containers) exists only where the provider offers it (:attr:`Provider.process_isolation
    <deepgym.sandbox.base.Provider.process_isolation>`: docker's warm pools, and local mode, which has no
    isolation either way): a manifest's ``process`` elsewhere means ``container`` (stricter), a call's is
    refused."""
    chosen = env.isolation if isolation is None else isolation
    if chosen not in ISOLATIONS:
        raise ValueError(f"unknown isolation {chosen!r}; use 'container' (a fresh container per sample, the "
                         f"default) or 'process' (warm containers, docs/warm.md)")
    if chosen == "process" and not provider.process_isolation:
        if isolation is None:
            return "container"
        raise ValueError(f"isolation='process' needs the docker provider, and this client judges on "
                         f"{provider.name!r}; use isolation='container' or DeepGym('docker')")
    return chosen


class Images:
    """Each environment's image as (id, status), resolved once per client and image name (a new DEEPGYM_TAG
    names another image; a tag moved mid-run does not). A refusal and a missing image are not remembered, so
    an image built or rebuilt mid-run is taken up by the next sample."""

    def __init__(self, *, allow_stale_image: bool | None = None, pinned: Mapping[str, str] | None = None):
        self.allow_stale_image = (allow_stale_image if allow_stale_image is not None
                                  else os.environ.get(STALE_OPT_IN_VARIABLE) == "1")
        self.pinned = dict(pinned or {})
        self._resolved: dict[str, tuple[str, str]] = {}
        self._lock = threading.Lock()

    def ref(self, env: Environment) -> str:
        """The image ``env``'s sandboxes start from: the pushed, digest-pinned reference when ``pinned`` (a
        pushed-images manifest) names one, else the local name."""
        return self.pinned.get(env.id, image_name(env.id))

    def resolve(self, provider: Provider, env: Environment) -> tuple[str, str]:
        """(image id, status) of ``env``'s image. Raises ImageMissing, ImageStale or ProviderUnavailable.

        For a provider whose images are where its sandboxes run (:attr:`Provider.images_elsewhere
        <deepgym.sandbox.base.Provider.images_elsewhere>`) nothing is asked here: the id is the reference, and
        the machine that makes the sandbox checks it against :meth:`required_labels`, so only a current image
        ever judges there."""
        if provider.images_elsewhere:
            return self.ref(env), "current"
        if provider.registers_images:
            return self._registered(provider, env)
        ref = self._key(provider, env)
        with self._lock:
            known = self._resolved.get(ref)
        if known is not None:
            return known
        layered = self._layered(env) if env.instance_image is not None else None
        try:
            image = provider.image(ref)
        except ImageMissing:
            fix = f"pull it with `docker pull {ref}`" if env.id in self.pinned else \
                f"build it with `deepgym images build {env.id}`"
            raise ImageMissing(f"{ref} is not on the engine; {fix}") from None
        status = hash_status(image.labels.get(HASH_LABEL), layered or content_hash(env.id))
        if status == "stale" and not self.allow_stale_image:
            rebuild = f"`deepgym images build {env.id}`" + (
                f" and push it again (`deepgym images push --registry R {env.id}`)" if env.id in self.pinned else "")
            raise ImageStale(f"{ref} was built from other files of environment {env.id!r} than this host's "
                             f"(the prompt and limits would not match its hidden tests); rebuild it with {rebuild}, "
                             f"or judge with it knowingly: allow_stale_image=True or {STALE_OPT_IN_VARIABLE}=1")
        if status == "stale":
            log.warning("judging %s with stale image %s (allowed): every verdict says image_status 'stale'",
                        env.id, ref)
        with self._lock:
            self._resolved[ref] = (image.id, status)
        return image.id, status

    def required_labels(self, provider: Provider, env: Environment) -> dict[str, str]:
        """The labels ``env``'s image must carry where ``provider`` makes the sandbox: this host's content hash
        of ``env``'s files for a provider whose images are elsewhere (a stale image is refused there whatever
        ``allow_stale_image`` says, since no one here could see it), nothing for one whose image id was
        checked here."""
        return {HASH_LABEL: content_hash(env.id)} if provider.images_elsewhere else {}

    @staticmethod
    def _layered(env: Environment) -> str:
        """The content hash of an SWE-style environment's layer, built now if missing or stale (on first use)."""
        try:
            return ensure_layer(env)
        except ImageBuildError as exc:
            raise StartFailure(f"deepgym's runner could not be layered onto {env.instance_image}: {exc}") from None

    def _registered(self, provider: Provider, env: Environment) -> tuple[str, str]:
        """(image id, status) of ``env``'s image as registered with ``provider`` under its content-hash name
        (:func:`deepgym.registration.registered_name`): current by construction, since the name changes
        with the environment's files."""
        name = self._key(provider, env)
        with self._lock:
            known = self._resolved.get(name)
        if known is not None:
            return known
        try:
            image = provider.image(name)
        except ImageMissing as exc:
            raise ImageMissing(f"{exc.reason}; {env.id}'s current files need it registered: `deepgym images push "
                               f"--registry R {env.id}` then `deepgym images register {provider.name} {env.id}`"
                               ) from None
        with self._lock:
            self._resolved[name] = (image.id, "current")
        return image.id, "current"

    def forget(self, provider: Provider, env: Environment) -> None:
        """Drop what :meth:`resolve` remembered of ``env``'s image on ``provider`` (it went missing)."""
        with self._lock:
            self._resolved.pop(self._key(provider, env), None)

    def _key(self, provider: Provider, env: Environment) -> str:
        """The name :meth:`resolve` remembers ``env``'s image under on ``provider``: the one it resolves."""
        return registered_name(env.id) if provider.registers_images else self.ref(env)


def runner_exit(result: ExecResult) -> int | None:
    """The runner's own exit status, or None when it did not end by itself: killed at the deadline, or by a
    signal, which every provider here reports as 128 + the signal (a shell's convention) or as a negative
    status. The runner itself exits only with 0, 1 or 2, so no status of its own is mistaken for a kill."""
    if result.timed_out or result.exit_code is None or not 0 <= result.exit_code <= 128:
        return None
    return result.exit_code


def observe(provider: Provider, env: Environment, request: Request, images: Images, *,
          admission: Admission | None = None, isolation: str = "container") -> RunFacts:
    """Run the runner for ``request`` in a fresh sandbox of ``env`` and report what was observed.

    With ``admission``, the sandbox first waits for a slot (:mod:`deepgym.admission`); every clock of the
    sample starts once it has one, and the wait is reported apart (the verdict's ``admission_wait_s``). The
    host's deadline (the runner's own plus START_GRACE_S) is the exec's timeout; a command killed there has
    ``deadline_hit`` and no exit status, and the runner's heartbeats say whose fault it was.
    ``isolation="process"`` judges in a warm sandbox of the provider's (:meth:`Provider.warm_pool
    <deepgym.sandbox.base.Provider.warm_pool>`), where it has one; see :func:`isolation_for`.

    A sample that deepgym's shutdown (:mod:`deepgym.shutdown`) overlaps has no verdict (``cancelled``): one
    not started yet never starts, one waiting for its slot stops waiting, and one running, whose sandbox the
    shutdown removes, is not read as whatever that removal looks like."""
    if shutdown_requested():
        return _cancelled(provider)
    gate = admission.slot(cancelled=shutdown_requested) if admission is not None else contextlib.nullcontext()
    try:
        with gate as slot:
            observation = _observe(provider, env, request, images, isolation)
    except AdmissionCancelled:
        return _cancelled(provider)
    if shutdown_requested():
        return _cancelled(provider)
    return observation if slot is None else replace(observation, admission_wait_s=slot.waited_s)


def _cancelled(provider: Provider) -> RunFacts:
    return RunFacts(runtime=provider.name, infra_error="cancelled",
                    infra_reason=f"deepgym is shutting down ({shutdown_reason()}), so this sample was stopped "
                                    f"before its verdict; judge it again in a process that is not shutting down")


@lru_cache(maxsize=None)
def _version() -> str:
    """deepgym's installed version (the package's own ``__version__`` would make this module import it)."""
    try:
        return metadata.version("deepgym")
    except metadata.PackageNotFoundError:
        return "unknown"


def provenance(provider: Provider, env: Environment, images: Images, image_id: str | None) -> dict[str, object]:
    """The host's half of a verdict's provenance (the request's half is added by
    :func:`~deepgym.verdict.classify`): which environment files, image and runner judged, with which deepgym.
    ``environment_hash`` is None for an environment this host cannot hash (one built in memory by a test)."""
    try:
        environment_hash: str | None = content_hash(env.id)
    except DeepGymError:
        environment_hash = None
    ref = None if provider.host_image is not None else (
        registered_name(env.id) if provider.registers_images else images.ref(env))
    return {"environment": env.id, "environment_hash": environment_hash, "image_id": image_id, "image_ref": ref,
            "image_digest": ref.split("@", 1)[1] if ref and "@sha256:" in ref else None,
            "runner_hash": runner_hash(), "deepgym_version": _version()}


def _observe(provider: Provider, env: Environment, request: Request, images: Images, isolation: str) -> RunFacts:
    started = time.monotonic()
    placed = _Placed(provider, env, images)
    try:
        spec = placed.spec()
        timeout_s = request.limits.host_deadline_s + START_GRACE_S
        warm = provider.warm_pool() if isolation == "process" else None
        if warm is not None:
            result = warm.run(spec, WARM_RUNNER, request, timeout_s)
        else:
            result = provider.run(spec, provider.runner_argv(str(env.tests_dir)), runner_options(request))
    except SandboxError as exc:
        return placed.failed(exc, started)
    return placed.facts(result, started)


async def aobserve(provider: Provider, env: Environment, request: Request, images: Images) -> RunFacts:
    """:func:`observe` awaited, for a provider that :attr:`~deepgym.sandbox.base.Provider.awaits` and has no
    admission of this host's (Ray's nodes take their own): no thread waits for the sample."""
    if shutdown_requested():
        return _cancelled(provider)
    started = time.monotonic()
    placed = _Placed(provider, env, images)
    try:
        result = await provider.arun(placed.spec(), provider.runner_argv(str(env.tests_dir)), runner_options(request))
    except SandboxError as exc:
        return placed.failed(exc, started)
    return _cancelled(provider) if shutdown_requested() else placed.facts(result, started)


def runner_options(request: Request) -> ExecOptions:
    """The runner's exec: the request on its stdin, the host's deadline (the runner's own plus START_GRACE_S)."""
    return ExecOptions(stdin=request.to_json().encode() + b"\n",
                       timeout_s=request.limits.host_deadline_s + START_GRACE_S)


class _Placed:
    """One sample's sandbox on ``provider``: its spec (and the image it resolved), and its facts either way."""

    def __init__(self, provider: Provider, env: Environment, images: Images):
        self.provider, self.env, self.images = provider, env, images
        self.image_id: str | None = None
        self.image_status: str | None = None

    def spec(self) -> SandboxSpec:
        provider, env = self.provider, self.env
        if provider.host_image is not None:
            return sandbox_spec(env, provider.host_image)
        self.image_id, self.image_status = self.images.resolve(provider, env)
        return replace(sandbox_spec(env, self.image_id), image_labels=self.images.required_labels(provider, env))

    def failed(self, exc: SandboxError, started: float) -> RunFacts:
        if isinstance(exc, ImageMissing):
            self.images.forget(self.provider, self.env)
        return RunFacts(runtime=self.provider.name, infra_error=exc.error_type, infra_reason=exc.reason,
                        elapsed_s=time.monotonic() - started, image_id=self.image_id, image_status=self.image_status)

    def facts(self, result: ExecResult, started: float) -> RunFacts:
        image_id = result.image_id or self.image_id
        return RunFacts(runtime=self.provider.name, exit_code=runner_exit(result), deadline_hit=result.timed_out,
                        stdout=result.stdout, stderr_tail=result.stderr_tail, elapsed_s=time.monotonic() - started,
                        image_id=image_id, image_status=self.image_status, node=result.node,
                        provenance=provenance(self.provider, self.env, self.images, image_id))
