"""The providers that make sandboxes themselves, where deepgym asks for them: every mode but ``ray``.

They live apart from :func:`deepgym.sandbox.make_provider` because a Ray node judges with one of them
(:mod:`deepgym.sandbox.ray.node`): the node needs this factory, and the factory that knows Ray must not be
needed by Ray. Each provider is imported only when its mode is asked for, so that ``import deepgym`` never loads
docker-py or a provider's SDK.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .base import Provider

if TYPE_CHECKING:
    from ..admission import Admission

DIRECT_MODES = ("auto", "docker", "local", "daytona", "e2b", "modal", "apple")


def make_direct(mode: str, **options: Any) -> Provider:
    """The provider for ``mode``, one of :data:`DIRECT_MODES` (see :func:`deepgym.sandbox.make_provider`)."""
    if mode == "auto":
        from .auto import choose_mode

        mode = "docker" if options.get("docker_host") else choose_mode()
    if mode == "docker":
        from .docker import DockerProvider

        return DockerProvider(**options)
    if mode == "local":
        from .local import LocalProvider

        return LocalProvider(**options)
    if mode == "daytona":
        from .daytona import DaytonaProvider

        return DaytonaProvider(**options)
    if mode == "e2b":
        from .e2b import E2BProvider

        return E2BProvider(**options)
    if mode == "modal":
        from .modal import ModalProvider

        return ModalProvider(**options)
    if mode == "apple":
        from .apple import AppleProvider

        return AppleProvider(**options)
    raise ValueError(f"unknown mode {mode!r}; known modes: {', '.join(DIRECT_MODES)}")


def host_admission(provider: Provider, bound: int | None = None) -> Admission | None:
    """The admission of the host ``provider``'s sandboxes run on (:attr:`~.base.Provider.admission_key`; None when
    they take no slot of it), bounding at ``bound`` samples (None: the key's variable, else the CPU count), with
    the provider's work ahead of need (:meth:`~.base.Provider.admit_ahead`) taken under it too. A client and a Ray
    node each make theirs here."""
    if provider.admission_key is None:
        return None
    from ..admission import Admission

    admission = Admission(provider.admission_key, bound)
    provider.admit_ahead(admission)
    return admission
