"""The modal provider: sandboxes on Modal, through its own Python client (``pip install 'deepgym[modal]'``).

An environment's image is the Modal image that ``deepgym images register modal ENV`` built from the pushed,
digest-pinned reference (``modal.Image.from_registry``) with its ENTRYPOINT cleared, and recorded under the
content-hash name ``deepgym-<env>-<hash>`` in the Modal Dict ``deepgym-images`` (:mod:`deepgym.registration`;
Modal has no named images of its own). It is looked up once per client and environment. Why the entry point
is cleared: Modal appends a sandbox's command to the image's ENTRYPOINT, and every deepgym image's ENTRYPOINT
is the runner, which would then be every sandbox's main process and exit at once on the unknown argument. A
Dict entry of an older deepgym (the image id alone, the entry point kept) is never used: samples say to
register again, and registering replaces it. Each sandbox maps the spec to Modal's terms:
``block_network=True`` unless the spec allows a network, ``cpu`` and ``memory`` (MiB) from the spec,
``timeout`` (Modal's own lifetime, after which it terminates the sandbox) from ``lifetime_s``, the main
process ``sleep`` for as long (the runner runs only when an exec starts it), and the spec's labels plus
``deepgym`` (this provider's run id) and ``deepgym.owner`` as Modal ``tags``; every
sandbox belongs to the Modal App ``deepgym``, which the sweep lists. Commands run through
:mod:`deepgym.sandbox.remote`'s exec helper, as root.

Settings: ``MODAL_TOKEN_ID`` and ``MODAL_TOKEN_SECRET`` (``MODAL_SERVER_URL`` is Modal's own setting for
another API address); ``max_sandboxes`` (``DEEPGYM_MODAL_MAX_SANDBOXES``, default 16) and ``creates_per_s``
(``DEEPGYM_MODAL_CREATES_PER_S``, default 4) per account: the first shared by every deepgym process of the host or Ray
cluster, the second per process (:mod:`deepgym.sandbox.quota`).

Every client exception is translated once, in :func:`translate_errors`. The trap: ``ContainerProcess.wait()``
returns -1, raising nothing, when Modal's own exec deadline passes; :class:`ModalRemote` reads that -1 (and
its own clock) as the provider's deadline, never as an exit status.
"""

from __future__ import annotations

import contextlib
import importlib
import math
import os
import threading
import time
from collections.abc import Iterator, Mapping
from types import ModuleType
from typing import Any

from ..errors import ConfigurationError
from .base import (Image, ImageMissing, Provider, ProviderUnavailable, Registered, SandboxError, SandboxLost,
                   SandboxSpec, StartFailure)
from .quota import AccountLimits
from .remote import Remote, RemoteSandbox, create_sandbox

APP = "deepgym"
IMAGES = "deepgym-images"
# Modal's client retries its first connection for 63 s (``create_channel_with_fallbacks`` in
# modal/_utils/grpc_utils.py) and has no setting to shorten that. After a client could not be made, the samples
# that follow within this many seconds get the same ProviderUnavailable at once instead of 63 s each, one
# after another (making the client is serialised).
FAILED_CONNECT_REMEMBERED_S = 30.0
LABEL = "deepgym"
OWNER_LABEL = "deepgym.owner"
# The registered image's ENTRYPOINT: none, so that a sandbox's command is its main process as it is.
ENTRYPOINT: list[str] = []


def sdk() -> ModuleType:
    try:
        return importlib.import_module("modal")
    except ImportError:
        raise ConfigurationError("mode 'modal' needs Modal's client: pip install 'deepgym[modal]'") from None


@contextlib.contextmanager
def translate_errors(modal: ModuleType, phase: str) -> Iterator[None]:
    """Modal's exceptions as the typed sandbox errors, once. ``phase``: ``image`` (resolving an image),
    ``start`` (creating a sandbox) or ``run`` (a sandbox that started). Subclasses come before their bases:
    an ImageBuildError is a RemoteError, a SandboxTimeoutError a TimeoutError, every one an ``Error``."""
    e = modal.exception
    try:
        yield
    except SandboxError:
        raise
    except (e.AuthError, e.PermissionDeniedError) as exc:
        raise ProviderUnavailable(f"Modal refused the credentials ({exc}); check MODAL_TOKEN_ID and "
                                  "MODAL_TOKEN_SECRET") from None
    except e.ResourceExhaustedError as exc:
        raise ProviderUnavailable(f"Modal refused for the account's quota or rate limit ({exc}); lower "
                                  "creates_per_s or max_sandboxes") from None
    except (e.ConnectionError, e.ClientClosed) as exc:
        raise ProviderUnavailable(f"Modal's API cannot be reached: {exc}") from None
    except (e.SandboxTerminatedError, e.SandboxTimeoutError) as exc:
        raise SandboxLost(f"the Modal sandbox is gone (terminated, or past its lifetime): {exc}") from None
    except e.ImageBuildError as exc:
        raise ImageMissing(f"Modal cannot build the image from the pushed reference: {exc}") from None
    except e.NotFoundError as exc:
        if phase == "run":
            raise SandboxLost(f"the Modal sandbox is gone: {exc}") from None
        raise ImageMissing(f"Modal has no such image: {exc}") from None
    except e.Error as exc:  # ServiceError and InternalError (after the client's retries), TimeoutError, the rest
        error = SandboxLost if phase == "run" else StartFailure
        raise error(f"Modal failed: {type(exc).__name__}: {exc}") from None
    except OSError as exc:  # a transport error the client did not wrap
        raise ProviderUnavailable(f"Modal's API cannot be reached: {exc!r}") from None


class ModalProvider(Provider):
    """Sandboxes from pushed images on the Modal account the settings name."""

    name = "modal"
    writable_root = True  # an episode makes its own folders (deepgym.session.mounts)
    registers_images = True
    admission_key = None  # the account's bound is self.limits, host-wide

    def __init__(self, *, max_parallel: int = 32, token_id: str | None = None, token_secret: str | None = None,
                 max_sandboxes: int | None = None, creates_per_s: float | None = None):
        from .docker import owner_label

        self.sdk = sdk()
        self.token_id = token_id or os.environ.get("MODAL_TOKEN_ID")
        self.token_secret = token_secret or os.environ.get("MODAL_TOKEN_SECRET")
        self.limits = AccountLimits.configured("modal", self.token_id, max_sandboxes, creates_per_s)
        self.run_id = os.urandom(6).hex()
        self.owner = owner_label(os.getpid())
        self.max_parallel = max_parallel
        self._client: Any = None
        self._app: Any = None
        self._failed_connect: tuple[float, str] | None = None
        """When making the client last failed (time.monotonic()) and why."""
        self._images: dict[str, Any] = {}
        self._lock = threading.Lock()

    def client(self) -> tuple[Any, Any]:
        """Modal's client and the ``deepgym`` App, made on first use: missing tokens are every sample's
        ``daemon_unavailable``, and so is a failure to connect for FAILED_CONNECT_REMEMBERED_S after it."""
        with self._lock:
            if self._client is None:
                if not (self.token_id and self.token_secret):
                    raise ProviderUnavailable("MODAL_TOKEN_ID and MODAL_TOKEN_SECRET are not set: mode 'modal' "
                                              "needs the account's token (`modal token new` writes one)")
                if self._failed_connect is not None:
                    ago = time.monotonic() - self._failed_connect[0]
                    if ago < FAILED_CONNECT_REMEMBERED_S:
                        raise ProviderUnavailable(f"{self._failed_connect[1]} (the last try, {ago:.0f} s ago; "
                                                  f"the next in {FAILED_CONNECT_REMEMBERED_S - ago:.0f} s)")
                try:
                    with translate_errors(self.sdk, "start"):
                        client = self.sdk.Client.from_credentials(self.token_id, self.token_secret)
                        try:
                            self._app = self.sdk.App.lookup(APP, create_if_missing=True, client=client)
                        except BaseException:
                            client.close()
                            raise
                except ProviderUnavailable as failure:
                    self._failed_connect = (time.monotonic(), str(failure))
                    raise
                self._client, self._failed_connect = client, None
            return self._client, self._app

    def registry(self) -> Any:
        """The Modal Dict ``deepgym-images``: registered name -> Modal image id (:meth:`register_image`)."""
        client, _ = self.client()
        return self.sdk.Dict.from_name(IMAGES, create_if_missing=True, client=client)

    def image(self, ref: str) -> Image:
        """The registered Modal image named ``ref`` (:attr:`registers_images`), when it is usable."""
        name = ref
        client, _ = self.client()
        with self._lock:
            known = self._images.get(name)
        if known is None:
            with translate_errors(self.sdk, "image"):
                record = self.registry().get(name)
                if record is None:
                    raise ImageMissing(f"Modal has no image {name}")
                if _unusable(record):
                    raise ImageMissing(f"Modal image {name} {_unusable(record)}")
                known = self.sdk.Image.from_id(record["image_id"], client=client)
            with self._lock:
                self._images[name] = known
        return Image(id=name)

    def create(self, spec: SandboxSpec) -> RemoteSandbox:
        client, app = self.client()
        with self._lock:
            image = self._images.get(spec.image)
        if image is None:
            raise ImageMissing(f"{spec.image} is not a Modal image this provider resolved; pass what "
                               "ModalProvider.image returned")
        lifetime = max(1, math.ceil(spec.lifetime_s))

        def make() -> ModalRemote:
            with translate_errors(self.sdk, "start"):
                return ModalRemote(self, self.sdk.Sandbox.create(
                    "sleep", str(lifetime), app=app, image=image, client=client, timeout=lifetime,
                    cpu=spec.cpus, memory=spec.memory_mb, block_network=not spec.network,
                    tags={**spec.labels, LABEL: self.run_id, OWNER_LABEL: self.owner}))

        return create_sandbox(self.limits, make, spec)

    def register_image(self, name: str, ref: str, resources) -> Registered:
        """Build ``Image.from_registry(ref)`` with the ENTRYPOINT cleared in the ``deepgym`` App and record it
        as ``name``, unless a usable record is there already; an unusable one (an older deepgym's) is replaced.
        ``resources`` are unused: Modal sizes each sandbox itself."""
        _, app = self.client()
        with translate_errors(self.sdk, "image"):
            registry = self.registry()
            found = registry.get(name)
            if found is not None and not _unusable(found):
                return Registered(created=False)
            image = self.sdk.Image.from_registry(ref).entrypoint(ENTRYPOINT).build(app)
            registry.put(name, {"image_id": image.object_id, "entrypoint": ENTRYPOINT})
        return Registered(created=True, replaced=_unusable(found) if found is not None else "")

    def sweep(self, labels: Mapping[str, str]) -> int:
        """Terminate every sandbox of the ``deepgym`` App that carries all of ``labels``."""
        client, app = self.client()
        removed = 0
        with translate_errors(self.sdk, "start"):
            found = list(self.sdk.Sandbox.list(app_id=app.app_id, tags=dict(labels) or None, client=client))
        for box in found:
            with contextlib.suppress(Exception):
                box.terminate()
                removed += 1
        return removed

    def close(self) -> None:
        """Terminate this run's sandboxes still alive, and close the client."""
        if self._client is not None:
            with contextlib.suppress(SandboxError):
                self.sweep({LABEL: self.run_id})
            with contextlib.suppress(Exception):
                self._client.close()
            self._client = None


def _unusable(record: Any) -> str:
    """Why a record of the Dict ``deepgym-images`` cannot be used, or "" when it can. An older deepgym recorded
    the image id alone, of an image that kept the runner as its entry point."""
    if isinstance(record, dict) and record.get("entrypoint") == ENTRYPOINT and record.get("image_id"):
        return ""
    return ("was registered by an older deepgym with the image's own entry point (the runner), which Modal "
            "would make every sandbox's main process")


class ModalRemote(Remote):
    """One Modal sandbox, as :mod:`deepgym.sandbox.remote` uses it."""

    def __init__(self, provider: ModalProvider, box: Any):
        self.provider = provider
        self.box = box
        self.id = box.object_id

    def upload(self, path: str, data: bytes) -> None:
        with translate_errors(self.provider.sdk, "run"):
            self.box.filesystem.write_bytes(data, path)

    def shell(self, script: str, timeout_s: float) -> str:
        started = time.monotonic()
        with translate_errors(self.provider.sdk, "run"):
            process = self.box.exec("sh", "-c", script, timeout=math.ceil(timeout_s), text=False)
            output = process.stdout.read()
            code = process.wait()
        if code == -1:  # Modal's own exec deadline: wait() says -1 and raises nothing
            raise SandboxLost(f"Modal's own deadline ({timeout_s:g}s) passed before the command in sandbox "
                              f"{self.id} reported, {time.monotonic() - started:.1f}s after it started")
        return output.decode("utf-8", "replace")

    def delete(self) -> None:
        with contextlib.suppress(Exception):
            self.box.terminate()
