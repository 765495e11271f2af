"""The node's side of ``mode="ray"``: what a Ray worker runs on a node that offers sandbox capacity.

A node judges with a provider of its own (:data:`NODE_MODE_VARIABLE`, docker by default, on the engine the
node's ``DOCKER_HOST`` names), one per worker process, since a worker judges one sample at a time. It judges
only in the image the caller resolved: the reference the caller named, carrying the labels the caller requires
(the content hash of the caller's environment files). Anything else is ``image_missing`` naming the node and the
image, never a verdict from another image; a digest-pinned reference it lacks (the caller's pushed-images
manifest) it pulls from the registry first. It takes a slot of the node's own host-wide admission
(:mod:`deepgym.admission`) before anything starts, so that Ray's scheduling and every other deepgym process of
that host share one bound.

:func:`judge_here` is a generator because the caller must know whether the sample reached a sandbox: it
yields :class:`Started` just before the sandbox is made, then the result. A worker or node that dies before
``Started`` cost the sample nothing and it may be sent again; after it, the submission may have been in play,
and the sample has no verdict (:mod:`deepgym.sandbox.ray.provider`). An infrastructure failure the node itself
saw comes back as :class:`Failed`, never as an exception, so that its type and reason cross Ray unchanged.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import threading
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, replace

from ...admission import Admission
from ..base import ExecOptions, ExecResult, Image, ImageMissing, Provider, SandboxError, SandboxSpec, StartFailure
from ..direct import host_admission, make_direct

NODE_MODE_VARIABLE = "DEEPGYM_RAY_NODE_MODE"
"""The provider a node judges with (set where ``ray start`` runs): ``docker`` (the default) or ``apple``, the
modes whose sandboxes start from an image reference."""

PULL_TIMEOUT_VARIABLE = "DEEPGYM_RAY_PULL_TIMEOUT_S"
DEFAULT_PULL_TIMEOUT_S = 300.0
"""How long a node's pull of a missing image may take in all before the sample is ``image_missing``."""


@dataclass(frozen=True)
class Started:
    """The sample is about to enter a sandbox on ``node``, in the image ``image_id`` of that node."""

    node: str
    image_id: str


@dataclass(frozen=True)
class Failed:
    """The node's provider failed: a no-verdict ``error_type`` of :class:`~deepgym.sandbox.base.SandboxError`."""

    node: str
    error_type: str
    reason: str


_provider: Provider | None = None
_admission: Admission | None = None
_lock = threading.Lock()


def node_id() -> str:
    """The Ray node id of the node this worker runs on."""
    import ray

    return ray.get_runtime_context().get_node_id()


def local_provider() -> tuple[Provider, Admission | None]:
    """This worker's provider and the admission its samples take, made on first use. A worker judges one sample at
    a time, so it keeps one container ready per kind (docker's prewarm): more would idle."""
    global _provider, _admission
    with _lock:
        if _provider is None:
            mode = os.environ.get(NODE_MODE_VARIABLE, "docker")
            provider = make_direct(mode, max_parallel=1)
            if provider.host_image is not None or provider.registers_images:
                provider.close()
                raise StartFailure(f"{NODE_MODE_VARIABLE}={mode!r} cannot judge for Ray: its sandboxes do not start "
                                   f"from the image reference the caller resolved; use docker or apple")
            _admission = host_admission(provider)
            _provider = provider
            atexit.register(provider.close)  # a worker that exits cleanly takes its ready containers along
        return _provider, _admission


def checked_image(provider: Provider, spec: SandboxSpec, node: str) -> Image:
    """The node's image of ``spec.image``, when it carries every label of ``spec.image_labels``; else
    ImageMissing naming the node and what it lacks. A digest-pinned reference (the caller gave a pushed-images
    manifest) that the node lacks is pulled from its registry first."""
    try:
        image = provider.image(spec.image)
    except ImageMissing:
        image = None
    if image is None and provider.pulls and "@sha256:" in spec.image:
        timeout_s = float(os.environ.get(PULL_TIMEOUT_VARIABLE, DEFAULT_PULL_TIMEOUT_S))
        try:
            image = provider.pull(spec.image, timeout_s)
        except ImageMissing as exc:
            raise ImageMissing(f"Ray node {node} lacks {spec.image} and could not pull it: {exc.reason}; push it "
                               f"again (`deepgym images push`), or check that the node reaches the registry"
                               ) from None
    if image is None:
        raise ImageMissing(f"Ray node {node} has no image {spec.image}; build it on that node (`deepgym images "
                           f"build` with the caller's DEEPGYM_TAG), load it there, or push it to a registry the "
                           f"nodes reach and give the caller its manifest (`deepgym images push`), which the "
                           f"nodes then pull by digest")
    wrong = [f"{label} is {image.labels.get(label)!r} there, the caller's files give {wanted!r}"
             for label, wanted in spec.image_labels.items() if image.labels.get(label) != wanted]
    if wrong:
        raise ImageMissing(f"Ray node {node} has {spec.image} ({image.id}), but not the image the caller resolved: "
                           f"{'; '.join(wrong)}; build it on that node from the caller's files")
    return image


def judge_here(spec: SandboxSpec, argv: Sequence[str], options: ExecOptions) -> Iterator[Started | Failed | ExecResult]:
    """Run ``argv`` in a fresh sandbox of ``spec`` on this node: yields :class:`Started` then the result (its
    ``node`` and ``image_id`` this node's), or a :class:`Failed` at any point."""
    node = node_id()
    try:
        provider, admission = local_provider()
        image = checked_image(provider, spec, node)
        with admission.slot() if admission is not None else contextlib.nullcontext():
            yield Started(node, image.id)
            result = provider.run(replace(spec, image=image.id, image_labels={}), argv, options)
    except SandboxError as exc:
        yield Failed(node, exc.error_type, f"on Ray node {node}: {exc.reason}")
        return
    yield replace(result, node=node, image_id=image.id)


def sweep_here(labels: Mapping[str, str]) -> int:
    """Remove this node's sandboxes that carry all of ``labels`` (the provider's own sweep)."""
    provider, _ = local_provider()
    return provider.sweep(labels)
