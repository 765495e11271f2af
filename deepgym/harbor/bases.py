"""Base images of imported tasks: the ``--base-map FROM=TO`` option, and the check before a build.

A Harbor task starts from whatever image its author chose (``ubuntu:24.04``, ``python:3.12-slim``, an image
on a private registry). On a host without that registry the build would fail deep inside bake with a pull
error that names neither the task nor a way out. So:

- ``deepgym harbor import ... --base-map ubuntu:24.04=mirror.local/ubuntu:24.04`` rewrites the task's FROM
  lines at import (``=base``: deepgym's own base image, :data:`DEEPGYM_BASE`) (the mapping is recorded in the environment's ``harbor.json``, and the rewritten
  Dockerfile is part of the content hash, so a mapped image is a different image, as it should be);
- before ``deepgym images build`` runs bake for an imported environment, :func:`check_bases` looks for every
  base image locally and tries to pull each missing one; one that cannot be had stops the build with the
  environment, the image and both fixes (load it under that name, or import again with ``--base-map``).
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable, Iterable
from pathlib import Path

from ..errors import ConfigurationError, ImageBuildError

RECORD = "harbor.json"
DEEPGYM_BASE = "base"
"""A ``--base-map`` target of this name is deepgym's own base image (Debian with python3, pytest and git),
built in the same bake run through the named context ``base = "target:base"`` as deepgym's environments are:
the way to build tasks written for Debian on a host without any registry."""


def parse_base_map(items: Iterable[str]) -> dict[str, str]:
    """``["FROM=TO", ...]`` as a mapping. Raises ConfigurationError naming a malformed or repeated item."""
    mapping: dict[str, str] = {}
    for item in items:
        source, sep, target = item.partition("=")
        source, target = source.strip(), target.strip()
        if not sep or not source or not target or any(c.isspace() for c in source + target):
            raise ConfigurationError(f"--base-map {item!r}: expected FROM=TO, two image references without "
                                     "spaces. Fix: e.g. --base-map ubuntu:24.04=mirror.local/ubuntu:24.04")
        if mapping.get(source, target) != target:
            raise ConfigurationError(f"--base-map maps {source} twice ({mapping[source]} and {target}). "
                                     "Fix: give one mapping per image")
        mapping[source] = target
    return mapping


def recorded_bases(env_path: Path) -> list[str] | None:
    """The base images an imported environment's ``harbor.json`` lists, or None for any other environment."""
    record = env_path / RECORD
    if not record.is_file():
        return None
    bases = json.loads(record.read_text()).get("bases", [])
    return [b for b in bases if isinstance(b, str)]


def _has_image(ref: str) -> bool:
    return subprocess.run(["docker", "image", "inspect", ref], capture_output=True).returncode == 0


def _pull(ref: str) -> tuple[bool, str]:
    result = subprocess.run(["docker", "pull", ref], capture_output=True, text=True)
    return result.returncode == 0, result.stderr.strip()


def check_bases(name: str, env_path: Path, *, has_image: Callable[[str], bool] = _has_image,
                pull: Callable[[str], tuple[bool, str]] = _pull) -> list[str]:
    """Make sure every base image of the imported environment ``name`` is on this engine, pulling what is
    missing. Returns the images pulled. Raises ImageBuildError for one that cannot be had. Environments
    that were not imported from Harbor have nothing to check."""
    pulled = []
    for ref in recorded_bases(env_path) or []:
        if ref == DEEPGYM_BASE or has_image(ref):  # deepgym's base is built by the same bake run
            continue
        ok, said = pull(ref)
        if not ok:
            source = json.loads((env_path / RECORD).read_text()).get("source_dir", "TASK_DIR")
            raise ImageBuildError(
                f"{name}: the task's base image {ref} is not on this engine and cannot be pulled ({said[-200:]}). "
                f"Fix: load or tag a local image under that name (docker load, docker tag LOCAL {ref}), or map "
                f"it to one you have: deepgym harbor import {source} --into {env_path.parent} --force "
                f"--base-map {ref}=LOCAL_IMAGE (docs/harbor.md)")
        pulled.append(ref)
    return pulled
