"""The docker provider: locked-down containers on a Docker engine, driven through docker-py's low-level API.

A sandbox (:class:`~deepgym.sandbox.docker.sandbox.DockerSandbox`) is a container whose main process is a
small init of our own (:data:`~deepgym.sandbox.docker.scripts.INIT`, run by the image's ``python3``): it reaps
orphans, holds no capability it could lend, and ends the container when the spec's ``lifetime_s`` runs out,
so a sandbox outlives a dead deepgym by at most its lifetime. Commands run through ``docker exec``; files
cross through a small helper run by the file's owner.

**One-shot judging has a fast path.** :meth:`DockerProvider.run` makes ``argv`` the container's main
process under Docker's init and carries stdin and stdout in one attached stream, which saves the exec round
trips, in a container started ahead of need (:class:`~deepgym.sandbox.ready.ReadyPool`;
``DEEPGYM_DOCKER_PREWARM=0`` starts each on demand); ``DEEPGYM_DOCKER_EXEC=1`` (or
``DockerProvider(attach=False)``) takes the generic create-and-exec path instead. Both pass the same
conformance and hostile suites. One difference remains: an attached main process killed from outside
(``docker kill``) cannot be told from one that died of SIGKILL itself, so it comes back as exit status 137,
which :func:`~deepgym.verdict.classify` turns into ``sandbox_lost`` when the runner had not reported; removed
from outside, it is SandboxLost on both paths.

Every container carries the labels ``deepgym`` (this provider's run id) and ``deepgym.owner``
(``host/pid-namespace/pid/start-time``, :mod:`~deepgym.sandbox.docker.owners`). On first contact the provider
removes containers whose owner process is gone, never those of a live process; ``deepgym cleanup`` sweeps
them all. On SIGTERM or SIGINT the provider removes its own (:mod:`deepgym.shutdown`).
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Mapping, Sequence

import docker.errors

from ...shutdown import register as on_shutdown
from ...admission import Admission, engine_key
from ..base import ExecOptions, ExecResult, Image, ImageMissing, Provider, SandboxError, SandboxSpec
from .engine import API_VERSION, NETWORK, Attached, Engine, Launch, container_settings, engine_options, \
    translate_errors
from ..ready import MAX_KINDS, REFILLERS, ReadyPool, prewarm_size
from .sandbox import DockerSandbox
from .scripts import INIT
from .warm import WarmPool

EXEC_PATH_VARIABLE = "DEEPGYM_DOCKER_EXEC"


class DockerProvider(Provider):
    """Containers on one Docker engine: ``docker_host`` (DOCKER_HOST's syntax: ``unix://``, ``tcp://``,
    ``ssh://``), else the one DOCKER_HOST names, else the local socket. A remote engine runs the same sandbox;
    its reaper removes only what dead processes of this host left (see
    :func:`~deepgym.sandbox.docker.owners.owner_alive`), never the containers of other hosts that share the
    engine. The provider owns its pools: strict mode's ready containers (``prewarm``) and warm mode's
    (:meth:`warm_pool`)."""

    name = "docker"
    attaches = True
    streams = True
    pulls = True
    mounts = True
    late_network = True
    process_isolation = True

    def __init__(self, *, max_parallel: int = 32, attach: bool | None = None, prewarm: int | None = None,
                 docker_host: str | None = None):
        self.max_parallel = max_parallel
        self.attach = attach if attach is not None else os.environ.get(EXEC_PATH_VARIABLE) != "1"
        size = prewarm_size(prewarm, max_parallel) if self.attach else 0
        self.engine = Engine(docker_host, pool_size=max_parallel + 4 + (2 * REFILLERS if size else 0))
        self.admission_key = engine_key(self.engine.url)
        self.prewarm: ReadyPool[Launch, Attached] | None = None
        if size:
            self.prewarm = ReadyPool(size, self._launch, Attached.usable, Attached.close, max_kinds=MAX_KINDS,
                                     name="deepgym-prewarm")
        self._warm: WarmPool | None = None
        self._lock = threading.Lock()
        on_shutdown(self.close)  # SIGTERM/SIGINT remove this provider's containers (deepgym.shutdown)

    @property
    def run_id(self) -> str:
        """The ``deepgym`` label of this provider's containers."""
        return self.engine.run_id

    @property
    def owner(self) -> str:
        """The ``deepgym.owner`` label of this provider's containers: this process."""
        return self.engine.owner

    def warm_pool(self) -> WarmPool:
        """Warm mode's containers (:mod:`deepgym.sandbox.docker.warm`), made on first use."""
        with self._lock:
            if self._warm is None:
                self._warm = WarmPool(self.engine, self.max_parallel)
            return self._warm

    def admit_ahead(self, admission: Admission) -> None:
        """Each prewarmed container is made under a slot of ``admission`` (:mod:`deepgym.sandbox.ready`)."""
        if self.prewarm is not None:
            self.prewarm.admission = admission

    def image(self, ref: str) -> Image:
        with self.engine.session("start") as api:
            try:
                info = api.inspect_image(ref)
            except docker.errors.ImageNotFound:
                raise ImageMissing(f"{ref} is not built") from None
        return Image(id=info["Id"], labels=dict((info.get("Config") or {}).get("Labels") or {}))

    def pull(self, ref: str, timeout_s: float) -> Image:
        """``ref`` pulled by its digest, within ``timeout_s`` in all: docker-py waits on a pull with no timeout,
        so it runs in a thread of its own, and a pull past the bound has its connection closed (a registry that
        never answers would otherwise hold the sample until the engine gives up on it)."""
        if "@sha256:" not in ref:
            raise ImageMissing(f"{ref} names no digest; only a digest-pinned reference is pulled "
                               f"(`deepgym images push` records them)")
        with translate_errors("start", self.engine.url):
            pulling = docker.APIClient(**engine_options(self.engine.docker_host), version=API_VERSION)
        failed: list[str] = []

        def fetch() -> None:
            try:
                with translate_errors("start", self.engine.url):
                    for event in pulling.pull(ref, stream=True, decode=True):
                        if "error" in event:
                            failed.append(str(event["error"]))
            except SandboxError as exc:
                failed.append(exc.reason)
            except Exception as exc:  # noqa: BLE001 - the connection closed under it past the bound: said below
                failed.append(repr(exc))

        worker = threading.Thread(target=fetch, name="deepgym-pull", daemon=True)
        worker.start()
        worker.join(timeout_s)
        late = worker.is_alive()
        pulling.close()  # ends a pull still waiting: its thread sees the closed connection and returns
        if late or failed:
            why = f"no end in {timeout_s:g} s" if late else failed[0]
            raise ImageMissing(f"{ref} could not be pulled: {why}")
        return self.image(ref)

    def create(self, spec: SandboxSpec) -> DockerSandbox:
        container: str | None = None
        with self.engine.session("start") as api:
            try:
                settings = container_settings(api, spec, self.engine.labels(spec), attached=False)
                container = api.create_container(spec.image, entrypoint=["python3", "-I", "-S", "-c", INIT],
                                                 command=[f"{spec.lifetime_s:g}"], **settings)["Id"]
                if spec.network_later:
                    api.disconnect_container_from_network(container, NETWORK)  # no interface but loopback
                api.start(container)
            except BaseException:
                if container is not None:
                    self.engine.remove(container)
                raise
        return DockerSandbox(self.engine, container, spec)

    def run(self, spec: SandboxSpec, argv: Sequence[str], options: ExecOptions) -> ExecResult:
        if not self.attach:
            return super().run(spec, argv, options)
        started = time.monotonic()
        box = self.prewarm.take(Launch(spec, tuple(argv), options)) if self.prewarm is not None else None
        if box is None:
            box = self.engine.start_attached(spec, argv, options)
        try:
            return self.engine.finish_attached(box, options, started)
        finally:
            if self.prewarm is not None:
                self.prewarm.discard(box)  # off the sample's path
            else:
                box.close()

    def start_attached(self, spec: SandboxSpec, argv: Sequence[str], options: ExecOptions) -> Attached:
        """A container whose main process is ``argv``, its stdio attached (:meth:`Engine.start_attached
        <deepgym.sandbox.docker.engine.Engine.start_attached>`); its ``close()`` closes the stream and removes it."""
        return self.engine.start_attached(spec, argv, options)

    def sweep(self, labels: Mapping[str, str]) -> int:
        """Remove every container of deepgym's (label ``deepgym``, any run) that carries all of ``labels``."""
        return self.engine.sweep(labels)

    def close(self) -> None:
        """Remove this run's containers still alive (prewarmed and warm ones too) and close the connection."""
        if self.prewarm is not None:
            self.prewarm.close()
        if self._warm is not None:
            self._warm.close()
        self.engine.close()

    def _launch(self, launch: Launch) -> Attached:
        return self.engine.start_attached(*launch.parts)
