"""The daytona provider: sandboxes on Daytona, through its own Python SDK (the ``daytona`` package, or the same
code under its deprecated name ``daytona-sdk``; ``pip install 'deepgym[daytona]'``).

An environment's image runs as a Daytona snapshot that ``deepgym images register daytona ENV`` made from the
pushed, digest-pinned image, named by the content hash (:mod:`deepgym.registration`); its resources are the
snapshot's (whole CPUs and GiB, the environment's limits plus the runner's margin). Each sandbox maps the
spec to Daytona's terms: ``network_block_all`` unless the spec allows a network, ``ephemeral`` (deleted when it
stops), ``auto_stop_interval`` and ``ttl_minutes`` from ``lifetime_s`` (so a crashed trainer leaks nothing
for long), and the spec's labels plus ``deepgym`` (this provider's run id) and ``deepgym.owner`` for the sweep.
Commands run through :mod:`deepgym.sandbox.remote`'s exec helper, which keeps stdout and stderr apart (Daytona
merges them) and keeps the output of a command past its deadline (Daytona's 408 discards it).

Settings (constructor arguments, else the environment): ``DAYTONA_API_KEY``, ``DAYTONA_API_URL``,
``DAYTONA_TARGET``; ``max_sandboxes`` alive at once (``DEEPGYM_DAYTONA_MAX_SANDBOXES``, default 16) and
``creates_per_s`` (``DEEPGYM_DAYTONA_CREATES_PER_S``, default 4): the account's limits, the first shared by every
deepgym process of the host or Ray cluster, the second per process (:mod:`deepgym.sandbox.quota`).

Every SDK exception is translated once, in :func:`translate_errors`; the table is in docs/providers.md.
"""

from __future__ import annotations

import contextlib
import importlib
import math
import os
import socket
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

LABEL = "deepgym"
OWNER_LABEL = "deepgym.owner"
CREATE_TIMEOUT_S = 120.0
DELETE_TIMEOUT_S = 30.0
SNAPSHOT_TIMEOUT_S = 1800.0
REMOVE_TIMEOUT_S = 120.0
REMOVE_POLL_S = 0.5
# Snapshot states (Daytona's SnapshotState): a failed pull or build, and one still being made.
FAILED_STATES = ("error", "build_failed")
PENDING_STATES = ("pending", "pulling", "building", "snapshotting")
# A snapshot's main process: the image's own entry point is the runner, which must not start by itself.
SNAPSHOT_ENTRYPOINT = ["sleep", "infinity"]


def sdk() -> ModuleType:
    """The Daytona SDK: ``daytona``, else the same code under the deprecated name ``daytona_sdk``."""
    for name in ("daytona", "daytona_sdk"):
        try:
            return importlib.import_module(name)
        except ImportError:
            continue
    raise ConfigurationError("mode 'daytona' needs Daytona's SDK: pip install 'deepgym[daytona]' (the daytona "
                             "package; daytona-sdk, its deprecated name, works too)")


def _errors(module: ModuleType) -> ModuleType:
    return importlib.import_module(f"{module.__name__}.common.errors")


@contextlib.contextmanager
def translate_errors(module: ModuleType, phase: str) -> Iterator[None]:
    """Daytona's exceptions as the typed sandbox errors, once. ``phase``: ``image`` (resolving a snapshot),
    ``start`` (creating a sandbox) or ``run`` (a sandbox that started). Subclasses come before their bases:
    a connection timeout is a DaytonaTimeoutError too."""
    e = _errors(module)
    try:
        yield
    except SandboxError:
        raise
    except (e.DaytonaAuthenticationError, e.DaytonaForbiddenError) as exc:
        raise ProviderUnavailable(f"Daytona refused the credentials ({exc}); check DAYTONA_API_KEY and the "
                                  "account's permissions") from None
    except e.DaytonaConnectionError as exc:  # DaytonaConnectionTimeoutError included
        raise ProviderUnavailable(f"Daytona's API cannot be reached: {exc}") from None
    except e.DaytonaRateLimitError as exc:
        raise ProviderUnavailable(f"Daytona rate-limited the account ({exc}); lower creates_per_s or "
                                  "max_sandboxes") from None
    except (e.DaytonaNotFoundError, e.DaytonaGoneError) as exc:
        if phase == "run":
            raise SandboxLost(f"the Daytona sandbox is gone: {exc}") from None
        raise ImageMissing(f"Daytona has no such snapshot: {exc}") from None
    except e.DaytonaTimeoutError as exc:  # 408/504, the daemon's exec deadline, a queue timeout
        if phase == "run":
            raise SandboxLost(f"Daytona's own deadline passed before the command reported: {exc}") from None
        raise StartFailure(f"Daytona did not start the sandbox in time: {exc}") from None
    except e.DaytonaError as exc:  # 5xx, spot eviction, a failed snapshot, anything else of Daytona's
        if _transport_failure(exc):
            raise ProviderUnavailable(f"Daytona's API cannot be reached: {exc}") from None
        # File transfers raise a plain DaytonaError that carries only the HTTP status.
        if exc.status_code in (404, 410) and phase == "run":
            raise SandboxLost(f"the Daytona sandbox is gone: {exc}") from None
        if exc.status_code in (401, 403):
            raise ProviderUnavailable(f"Daytona refused the credentials ({exc}); check DAYTONA_API_KEY") from None
        error = SandboxLost if phase == "run" else StartFailure
        raise error(f"Daytona failed: {exc}") from None


def _transport_failure(exc: BaseException) -> bool:
    """Whether a plain DaytonaError is a connection that failed: the SDK's generated sync client wraps urllib3's
    retries-exhausted error (a refused or reset connection) in a plain DaytonaError, not DaytonaConnectionError."""
    import urllib3.exceptions

    seen = exc.__cause__ or exc.__context__
    while seen is not None:
        if isinstance(seen, (urllib3.exceptions.MaxRetryError, urllib3.exceptions.NewConnectionError,
                             urllib3.exceptions.ProtocolError, ConnectionError)):
            return True
        seen = seen.__cause__ or seen.__context__
    return False


def _state(snapshot: Any) -> str:
    """A snapshot's state in lower case, as Daytona's SnapshotState values are spelled."""
    return str(getattr(snapshot.state, "value", snapshot.state)).lower()


class DaytonaProvider(Provider):
    """Sandboxes from registered snapshots on the Daytona account the settings name."""

    name = "daytona"
    writable_root = True  # an episode makes its own folders (deepgym.session.mounts)
    registers_images = True
    admission_key = None  # the account's bound is self.limits, host-wide

    def __init__(self, *, max_parallel: int = 32, api_key: str | None = None, api_url: str | None = None,
                 target: str | None = None, max_sandboxes: int | None = None, creates_per_s: float | None = None,
                 create_timeout_s: float = CREATE_TIMEOUT_S):
        from .docker import owner_label

        self.sdk = sdk()
        self.api_key = api_key or os.environ.get("DAYTONA_API_KEY")
        self.api_url = api_url or os.environ.get("DAYTONA_API_URL")
        self.target = target or os.environ.get("DAYTONA_TARGET")
        self.create_timeout_s = create_timeout_s
        self.limits = AccountLimits.configured("daytona", f"{self.api_url or ''} {self.api_key or ''}",
                                               max_sandboxes, creates_per_s)
        self.run_id = os.urandom(6).hex()
        self.owner = owner_label(os.getpid())
        self.host = socket.gethostname()
        self.max_parallel = max_parallel
        self._client: Any = None
        self._lock = threading.Lock()

    def client(self) -> Any:
        """The SDK's client, made on first use: a missing key is every sample's ``daemon_unavailable``."""
        with self._lock:
            if self._client is None:
                if not self.api_key:
                    raise ProviderUnavailable("DAYTONA_API_KEY is not set: mode 'daytona' needs the account's API key "
                                              "(and DAYTONA_API_URL for a self-hosted Daytona)")
                # Every setting explicit: the SDK would otherwise read a stray .env in the working directory.
                config = self.sdk.DaytonaConfig(api_key=self.api_key, api_url=self.api_url, target=self.target,
                                                connection_pool_maxsize=self.max_parallel + 8)
                with translate_errors(self.sdk, "start"):
                    self._client = self.sdk.Daytona(config)
            return self._client

    def image(self, ref: str) -> Image:
        """The registered snapshot named ``ref`` (:attr:`registers_images`), when it is active."""
        client = self.client()
        try:
            with translate_errors(self.sdk, "image"):
                snapshot = client.snapshot.get(ref)
        except ImageMissing:
            raise ImageMissing(f"Daytona has no snapshot {ref}") from None
        state = _state(snapshot)
        if state in FAILED_STATES:
            reason = snapshot.error_reason or "no reason given"
            raise ImageMissing(f"Daytona snapshot {ref} is in state {state} ({reason}); fix the cause, then "
                               "registering it again makes it again")
        if state != "active":
            raise ImageMissing(f"Daytona snapshot {ref} is {state}, not active; activate it in Daytona, or wait "
                               "until it is made")
        return Image(id=ref)

    def create(self, spec: SandboxSpec) -> RemoteSandbox:
        client = self.client()
        minutes = max(1, math.ceil(spec.lifetime_s / 60))
        params = self.sdk.CreateSandboxFromSnapshotParams(
            snapshot=spec.image, labels={**spec.labels, LABEL: self.run_id, OWNER_LABEL: self.owner},
            network_block_all=not spec.network, ephemeral=True, auto_stop_interval=minutes, ttl_minutes=minutes,
            os_user="root")

        def make() -> DaytonaRemote:
            with translate_errors(self.sdk, "start"):
                try:
                    return DaytonaRemote(self, client.create(params, timeout=self.create_timeout_s))
                except _errors(self.sdk).DaytonaError as exc:
                    self._delete_half_made(client, getattr(exc, "sandbox_id", None))
                    raise

        return create_sandbox(self.limits, make, spec)

    def _delete_half_made(self, client: Any, sandbox_id: str | None) -> None:
        """A create that timed out may have made the sandbox already; the SDK's error names it."""
        if sandbox_id:
            with contextlib.suppress(Exception):
                client.get(sandbox_id).delete(timeout=DELETE_TIMEOUT_S)

    def sweep(self, labels: Mapping[str, str]) -> int:
        """Delete every sandbox of deepgym's (label ``deepgym``, any run) that carries all of ``labels``."""
        client = self.client()
        removed = 0
        with translate_errors(self.sdk, "run"):
            found = list(client.list(self.sdk.ListSandboxesQuery(labels=dict(labels) or None)))
        for box in found:
            if LABEL in (box.labels or {}):
                with contextlib.suppress(Exception):
                    box.delete(timeout=DELETE_TIMEOUT_S)
                    removed += 1
        return removed

    def register_image(self, name: str, ref: str, resources) -> Registered:
        """Make snapshot ``name`` from the pushed image ``ref``, unless a usable one is there already. One whose
        pull or build failed keeps its name (state ``error`` or ``build_failed``) and could never start a
        sandbox: it is deleted and made again, so that registering again after fixing the cause repairs it."""
        client = self.client()
        with translate_errors(self.sdk, "start"):
            found = self._snapshot(client, name)
            state = None if found is None else _state(found)
            replaced = ""
            if state in FAILED_STATES:
                replaced = f"was in state {state}: {getattr(found, 'error_reason', None) or 'no reason given'}"
                client.snapshot.delete(found)
            elif state in PENDING_STATES:
                raise StartFailure(f"Daytona snapshot {name} is still being made (state {state}); run `deepgym "
                                   "images register daytona` again once it is active or has failed")
            elif state not in (None, "removing"):  # active, or inactive (sandboxes then say to activate it)
                return Registered(created=False)
            if state is not None:
                self._wait_removed(client, name)
            client.snapshot.create(
                self.sdk.CreateSnapshotParams(name=name, image=ref, entrypoint=SNAPSHOT_ENTRYPOINT,
                                              resources=self.sdk.Resources(cpu=resources.cpus,
                                                                           memory=resources.memory_gib,
                                                                           disk=resources.disk_gib)),
                timeout=SNAPSHOT_TIMEOUT_S)
        return Registered(created=True, replaced=replaced)

    def _snapshot(self, client: Any, name: str) -> Any:
        """Snapshot ``name``, or None when there is none."""
        try:
            return client.snapshot.get(name)
        except _errors(self.sdk).DaytonaNotFoundError:
            return None

    def _wait_removed(self, client: Any, name: str) -> None:
        """Wait until Daytona has removed snapshot ``name`` (a deleted one is ``removing`` for a while, and its
        name is taken until it is gone)."""
        deadline = time.monotonic() + REMOVE_TIMEOUT_S
        while self._snapshot(client, name) is not None:
            if time.monotonic() > deadline:
                raise StartFailure(f"Daytona did not remove snapshot {name} within {REMOVE_TIMEOUT_S:g} s; delete "
                                   "it in Daytona's dashboard, then run `deepgym images register daytona` again")
            time.sleep(REMOVE_POLL_S)

    def close(self) -> None:
        """Delete this run's sandboxes still alive."""
        if self._client is not None:
            with contextlib.suppress(SandboxError):
                self.sweep({LABEL: self.run_id})


class DaytonaRemote(Remote):
    """One Daytona sandbox, as :mod:`deepgym.sandbox.remote` uses it."""

    def __init__(self, provider: DaytonaProvider, box: Any):
        self.provider = provider
        self.box = box
        self.id = box.id

    def upload(self, path: str, data: bytes) -> None:
        with translate_errors(self.provider.sdk, "run"):
            self.box.fs.upload_file(data, path)

    def shell(self, script: str, timeout_s: float) -> str:
        import shlex

        # The daemon may split a command on spaces and quotes without a shell: one quoted sh -c is right both ways.
        with translate_errors(self.provider.sdk, "run"):
            response = self.box.process.exec(f"sh -c {shlex.quote(script)}", timeout=math.ceil(timeout_s))
        return response.result or ""

    def delete(self) -> None:
        with contextlib.suppress(Exception):
            self.box.delete(timeout=DELETE_TIMEOUT_S)
