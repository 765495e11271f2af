"""The e2b provider: sandboxes on E2B, through its own Python SDK (``pip install 'deepgym[e2b]'``).

An environment's image runs as an E2B template named by the content hash (``deepgym-<env>-<hash>``,
:mod:`deepgym.registration`), which ``deepgym images register e2b ENV`` builds from the pushed, digest-pinned
image with E2B's own ``Template.build``; its CPUs and memory are the template's. Each sandbox maps the spec to E2B's terms: ``allow_internet_access=False`` unless the
spec allows a network, ``timeout`` (E2B's own lifetime, after which it kills the sandbox) from ``lifetime_s``,
and the spec's labels plus ``deepgym`` (the run id) and ``deepgym.owner`` as ``metadata``, which the sweep
lists by. CPUs and memory are the template's. Commands run through :mod:`deepgym.sandbox.remote`'s exec
helper, as root.

Settings: ``E2B_API_KEY`` (and, for a self-hosted or test API, ``E2B_API_URL`` and ``E2B_SANDBOX_URL``);
``max_sandboxes`` (``DEEPGYM_E2B_MAX_SANDBOXES``, default 16) and ``creates_per_s``
(``DEEPGYM_E2B_CREATES_PER_S``, default 4) per account: the first shared by every deepgym process of the host or Ray
cluster, the second per process (:mod:`deepgym.sandbox.quota`).

Every SDK exception is translated once, in :func:`translate_errors`. The trap: a non-zero exit raises
``CommandExitException``, which is an exit status, not an error (its ``stdout`` holds the helper's report).
"""

from __future__ import annotations

import contextlib
import importlib
import os
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
REQUEST_TIMEOUT_S = 60.0
READY = "ready"  # a template build's status once it succeeded (TemplateBuildStatus.READY)


def sdk() -> ModuleType:
    try:
        return importlib.import_module("e2b")
    except ImportError:
        raise ConfigurationError("mode 'e2b' needs E2B's SDK: pip install 'deepgym[e2b]'") from None


@contextlib.contextmanager
def translate_errors(e2b: ModuleType, phase: str) -> Iterator[None]:
    """E2B's exceptions as the typed sandbox errors, once. ``phase``: ``start`` or ``run``. Subclasses come
    before their bases: SandboxNotRunningException is a TimeoutException too, and means the sandbox is gone."""
    try:
        yield
    except SandboxError:
        raise
    except e2b.AuthenticationException as exc:
        raise ProviderUnavailable(f"E2B refused the credentials ({exc}); check E2B_API_KEY") from None
    except e2b.RateLimitException as exc:
        raise ProviderUnavailable(f"E2B rate-limited the account ({exc}); lower creates_per_s or "
                                  "max_sandboxes") from None
    except e2b.ServiceBusyException as exc:  # every 503, after the SDK's own retries
        error = SandboxLost if phase == "run" else StartFailure
        raise error(f"E2B is busy: {exc}") from None
    except (e2b.SandboxNotRunningException, e2b.SandboxNotFoundException) as exc:
        raise SandboxLost(f"the E2B sandbox is gone: {exc}") from None
    except e2b.SandboxUnreachableException as exc:
        raise SandboxLost(f"the E2B sandbox cannot be reached: {exc}") from None
    except e2b.TimeoutException as exc:  # a plain one: E2B's own deadline on the call
        if phase == "run":
            raise SandboxLost(f"E2B's own deadline passed before the command reported: {exc}") from None
        raise StartFailure(f"E2B did not start the sandbox in time: {exc}") from None
    except e2b.BuildException as exc:  # a template build (registration) that failed: its image is the problem
        raise ImageMissing(f"E2B cannot build the template from the pushed image: {exc}") from None
    except e2b.NotFoundException as exc:
        if phase == "run":
            raise SandboxLost(f"the E2B sandbox is gone: {exc}") from None
        raise ImageMissing(f"E2B has no such template: {exc}") from None
    except (e2b.SandboxException, e2b.TemplateException) as exc:  # 5xx and the rest of E2B's
        if phase == "start" and getattr(exc, "status_code", None) == 404:  # create names an unknown template
            raise ImageMissing(f"E2B has no such template: {exc}") from None
        transport = _transport_failure(exc)
        if transport == "timeout" and phase == "start":
            raise StartFailure(f"E2B did not start the sandbox in time: {exc}") from None
        if transport == "timeout":
            raise SandboxLost(f"E2B went silent under a running command: {exc}") from None
        if transport == "connection":
            raise ProviderUnavailable(f"E2B's API cannot be reached: {exc}") from None
        error = SandboxLost if phase == "run" else StartFailure
        raise error(f"E2B failed: {exc}") from None
    except Exception as exc:  # a transport error the SDK did not wrap
        transport = _transport_failure(exc)
        if transport is None:
            raise
        if transport == "timeout" and phase == "start":
            raise StartFailure(f"E2B did not start the sandbox in time: {exc}") from None
        raise ProviderUnavailable(f"E2B's API cannot be reached: {exc}") from None


def _transport_failure(exc: BaseException) -> str | None:
    """``timeout`` or ``connection`` when ``exc`` (or what caused it) is a transport failure that the SDK
    passed through (httpx's errors, raised as they are) or wrapped in a plain SandboxException."""
    import httpx

    seen: BaseException | None = exc
    while seen is not None:
        if isinstance(seen, (httpx.TimeoutException, TimeoutError)):
            return "timeout"
        if isinstance(seen, (httpx.TransportError, ConnectionError)):
            return "connection"
        seen = seen.__cause__ or seen.__context__
    return None


class E2BProvider(Provider):
    """Sandboxes from templates on the E2B account the settings name."""

    name = "e2b"
    writable_root = True  # an episode makes its own folders (deepgym.session.mounts)
    registers_images = True
    admission_key = None  # the account's bound is self.limits, host-wide

    def __init__(self, *, max_parallel: int = 32, api_key: str | None = None, api_url: str | None = None,
                 sandbox_url: str | None = None, max_sandboxes: int | None = None,
                 creates_per_s: float | None = None, request_timeout_s: float = REQUEST_TIMEOUT_S):
        from .docker import owner_label

        self.sdk = sdk()
        self.api_key = api_key or os.environ.get("E2B_API_KEY")
        self.connection = {key: value for key, value in (("api_url", api_url), ("sandbox_url", sandbox_url))
                           if value}
        self.limits = AccountLimits.configured("e2b", self.api_key, max_sandboxes, creates_per_s)
        self.run_id = os.urandom(6).hex()
        self.owner = owner_label(os.getpid())
        self.max_parallel = max_parallel
        self.request_timeout_s = request_timeout_s

    def options(self) -> dict[str, Any]:
        """The SDK's per-call connection options. A missing key is every sample's ``daemon_unavailable``."""
        if not self.api_key:
            raise ProviderUnavailable("E2B_API_KEY is not set: mode 'e2b' needs the account's API key")
        return {"api_key": self.api_key, "request_timeout": self.request_timeout_s, **self.connection}

    def image(self, ref: str) -> Image:
        """The template named ``ref`` (:attr:`registers_images`). Whether E2B has it shows at create
        (``image_missing``): the SDK has no cheap lookup of a template by name."""
        return Image(id=ref)

    def create(self, spec: SandboxSpec) -> RemoteSandbox:
        options = self.options()

        def make() -> E2BRemote:
            try:
                with translate_errors(self.sdk, "start"):
                    return E2BRemote(self, self.sdk.Sandbox.create(
                        template=spec.image, timeout=max(1, int(spec.lifetime_s)),
                        metadata={**spec.labels, LABEL: self.run_id, OWNER_LABEL: self.owner},
                        allow_internet_access=spec.network, **options))
            except ImageMissing:
                raise ImageMissing(f"E2B has no template {spec.image}; build it from the pushed image of its "
                                   "environment (docs/providers.md)") from None

        return create_sandbox(self.limits, make, spec)

    def register_image(self, name: str, ref: str, resources) -> Registered:
        """Build template ``name`` from the pushed image ``ref`` with E2B's own ``Template.build`` (the image
        as it is, no steps; its entry point, the runner, is not a start command), unless one of its builds
        succeeded already. E2B binds the name when a build is requested, whatever the build's outcome, so a
        template whose builds all failed exists and cannot start a sandbox: it is built again (a new build of
        the same name, as E2B updates a template)."""
        options = self.options()
        with translate_errors(self.sdk, "start"):
            builds = self._builds(name, options)
            if builds is not None and READY in builds:
                return Registered(created=False)
            self.sdk.Template.build(self.sdk.Template().from_image(ref), name, cpu_count=resources.cpus,
                                    memory_mb=resources.memory_gib * 1024, **options)
        if builds is None:
            return Registered(created=True)
        return Registered(True, f"had no successful build (its builds: {', '.join(builds) or 'none'})")

    def _builds(self, name: str, options: dict[str, Any]) -> list[str] | None:
        """The statuses of template ``name``'s builds (``waiting``, ``building``, ``ready``, ``error``), or None
        when no template has that name. The SDK's ``Template.exists`` says only whether the name is bound."""
        from e2b.api import handle_api_exception
        from e2b.api.client.api.templates import get_templates_aliases_alias, get_templates_template_id
        from e2b.api.client_sync import get_api_client
        from e2b.connection_config import ConnectionConfig

        client = get_api_client(ConnectionConfig(**options))
        alias = get_templates_aliases_alias.sync_detailed(alias=name, client=client)
        if alias.status_code == 404:
            return None
        if alias.status_code >= 300:
            raise handle_api_exception(alias, self.sdk.TemplateException)
        template = get_templates_template_id.sync_detailed(template_id=alias.parsed.template_id, client=client)
        if template.status_code >= 300:
            raise handle_api_exception(template, self.sdk.TemplateException)
        return [str(build.status) for build in template.parsed.builds]

    def sweep(self, labels: Mapping[str, str]) -> int:
        """Kill every sandbox of deepgym's (metadata ``deepgym``, any run) that carries all of ``labels``."""
        options = self.options()
        removed = 0
        with translate_errors(self.sdk, "start"):
            pages = self.sdk.Sandbox.list(query=self.sdk.SandboxQuery(metadata=dict(labels) or None), **options)
            found = []
            while pages.has_next:
                found += pages.next_items()
        for info in found:
            if LABEL in (info.metadata or {}):
                with contextlib.suppress(Exception):
                    removed += bool(self.sdk.Sandbox.kill(info.sandbox_id, **options))
        return removed

    def close(self) -> None:
        """Kill this run's sandboxes still alive."""
        if self.api_key:
            with contextlib.suppress(SandboxError):
                self.sweep({LABEL: self.run_id})


class E2BRemote(Remote):
    """One E2B sandbox, as :mod:`deepgym.sandbox.remote` uses it."""

    def __init__(self, provider: E2BProvider, box: Any):
        self.provider = provider
        self.box = box
        self.id = box.sandbox_id

    def upload(self, path: str, data: bytes) -> None:
        with translate_errors(self.provider.sdk, "run"):
            self.box.files.write(path, data, user="root")

    def shell(self, script: str, timeout_s: float) -> str:
        e2b = self.provider.sdk
        with translate_errors(e2b, "run"):
            try:
                return self.box.commands.run(script, user="root", timeout=timeout_s).stdout
            except e2b.CommandExitException as exc:  # a non-zero exit: data, not an error
                return exc.stdout or ""

    def delete(self) -> None:
        with contextlib.suppress(Exception):
            self.box.kill()
