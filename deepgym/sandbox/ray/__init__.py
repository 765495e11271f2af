"""``mode="ray"``: samples placed by the user's own Ray cluster onto nodes that offer sandbox capacity, and judged
there by the node's own provider (docs/ray.md). :mod:`~deepgym.sandbox.ray.provider` is the caller's side,
:mod:`~deepgym.sandbox.ray.node` the node's, :mod:`~deepgym.sandbox.ray.errors` what Ray's failures mean for a
sample. Ray itself is imported only when a sample is judged (the ``ray`` extra)."""

from .provider import RayProvider

__all__ = ["RayProvider"]
