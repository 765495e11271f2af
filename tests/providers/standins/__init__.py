"""Test doubles of the providers' APIs (see each module's docstring), and how a test gives one our images.

A stand-in's "registry" maps digest-pinned references to local images: :func:`publish` writes a pushed-images
manifest (deepgym.pushed, as ``deepgym images push`` would) whose references stand for the local images, so
that ``deepgym images register`` runs its real path against the stand-in.
"""

from __future__ import annotations

from pathlib import Path

import docker

from deepgym.images import build, content_hash, image_name
from deepgym.pushed import PushedImage, write_manifest

STANDIN_REGISTRY = "registry.standin.invalid"


def publish(standin, envs: list[str], manifest: Path) -> Path:
    """Build ``envs`` (and base), and stand each local image in for a pushed one: the manifest names
    ``registry.standin.invalid/deepgym-<env>@sha256:<the local image id>`` and the stand-in resolves it."""
    build([env for env in envs if env != "base"])
    client = docker.from_env()
    pushed = {}
    try:
        for env in envs:
            image_id = client.images.get(image_name(env)).id
            pushed[env] = PushedImage(f"{STANDIN_REGISTRY}/deepgym-{env}", content_hash(env), image_id)
            standin.registry[pushed[env].ref] = image_id
    finally:
        client.close()
    write_manifest(manifest, pushed)
    return manifest
