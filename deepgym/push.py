"""Pushing the images bake built to a registry, so that a remote engine or a provider runs the same bytes.

``deepgym images push --registry R [ENV ...]`` builds what is missing or stale, then tags each environment's
image ``R/deepgym-<env>:<content hash>`` (never ``latest``: the tag names the files the image was built from)
and pushes it with the docker CLI, so the CLI's own credentials apply (``docker login R`` first for a registry
that wants them). The digest the registry answers goes into the pushed-images manifest
(:mod:`deepgym.pushed`), merged with what the file already lists; runtimes pin that digest
(``DeepGym(image_manifest=...)``), and ``deepgym images register`` reads it.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path
from typing import TextIO

from .environments import list_environments
from .errors import ConfigurationError, ImagePushError
from .images import HASH_LABEL, build, content_hash, image_name
from .pushed import DEFAULT_MANIFEST, PushedImage, read_manifest, write_manifest

# host[:port] then optional path components, as a docker reference spells a repository's prefix.
_REGISTRY = re.compile(r"(?:[A-Za-z0-9](?:[A-Za-z0-9.-]*[A-Za-z0-9])?|\[[0-9a-fA-F:]+\])(?::[0-9]+)?"
                       r"(?:/[a-z0-9]+(?:(?:\.|_|__|-+)[a-z0-9]+)*)*")


def repository(registry: str, name: str) -> str:
    """The repository of environment ``name`` under ``registry`` (``host[:port][/path]``, a trailing ``/``
    allowed). Raises ConfigurationError for anything else (a scheme, a tag, upper case in the path)."""
    prefix = registry.rstrip("/")
    if not _REGISTRY.fullmatch(prefix) or ("." not in prefix.split("/")[0] and ":" not in prefix.split("/")[0]
                                           and prefix.split("/")[0] != "localhost"):
        raise ConfigurationError(f"--registry {registry!r} is not a registry: give host[:port][/path] such as "
                                 "127.0.0.1:5000 or ghcr.io/acme (no scheme, no tag; the first part must be a host "
                                 "name with a dot or a port, or localhost, or docker would read it as a Docker Hub user)")
    return f"{prefix}/deepgym-{name}"


def _docker(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["docker", *argv], capture_output=True, text=True)


def _fix(output: str, registry: str) -> str:
    """What to do about a refused push, from the docker CLI's message."""
    host = registry.split("/")[0]
    if re.search(r"unauthorized|authentication required|no basic auth credentials|denied", output, re.I):
        return f"log in first: `docker login {host}` (deepgym pushes with the docker CLI's credentials)"
    if re.search(r"connection refused|no such host|i/o timeout|dial tcp|server gave HTTP response", output, re.I):
        return (f"check that a registry answers at {host} (a plain-http registry must be one of the engine's "
                "insecure-registries; 127.0.0.0/8 is by default)")
    return "the docker CLI's message says why"


def push_image(registry: str, name: str, log: TextIO = sys.stderr) -> PushedImage:
    """Push environment ``name``'s current image; returns where it went and its digest."""
    local = image_name(name)
    expected = content_hash(name)
    inspected = _docker("image", "inspect", "--format", "{{json .Config.Labels}}", local)
    if inspected.returncode != 0:
        raise ImagePushError(f"{local} is not built: build it with `deepgym images build {name}`")
    built_from = (json.loads(inspected.stdout) or {}).get(HASH_LABEL)
    if built_from != expected:
        raise ImagePushError(f"{local} was built from other files (content hash {built_from}, these files give "
                             f"{expected}); it would be pushed under a tag that lies: rebuild it with "
                             f"`deepgym images build --rebuild {name}`")
    image = PushedImage(repository(registry, name), expected, "")
    print(f"deepgym: pushing {local} as {image.tagged}", file=log)
    tagged = _docker("tag", local, image.tagged)
    if tagged.returncode != 0:
        raise ImagePushError(f"cannot tag {local} as {image.tagged}: {tagged.stderr.strip()}")
    try:
        pushed = _docker("push", "--quiet", image.tagged)
        if pushed.returncode != 0:
            output = (pushed.stderr + pushed.stdout).strip()
            raise ImagePushError(f"{registry} refused {image.tagged}: {output[-500:]}. Fix: {_fix(output, registry)}")
        digests = _docker("image", "inspect", "--format", "{{json .RepoDigests}}", image.tagged)
        found = [ref.partition("@")[2] for ref in json.loads(digests.stdout or "null") or []
                 if ref.partition("@")[0] == image.repository]
        if digests.returncode != 0 or not found:
            raise ImagePushError(f"pushed {image.tagged} but the engine reports no digest for it "
                                 f"({digests.stderr.strip() or digests.stdout.strip()}); push it again")
    finally:
        # Only the registry's name for the image goes; the image stays under its local name.
        _docker("image", "rm", image.tagged)
    return PushedImage(image.repository, image.tag, found[0])


def push(registry: str, names: list[str] | None = None, *, manifest: str | Path = DEFAULT_MANIFEST,
         log: TextIO = sys.stderr) -> dict[str, PushedImage]:
    """Build what is missing or stale among ``names`` (every environment when None), push each to
    ``registry`` and record it in ``manifest`` (written after each image, so an interrupted push keeps what
    is done). Returns environment id -> pushed image."""
    names = list_environments() if names is None else names
    for name in names:
        repository(registry, name)
    recorded = read_manifest(manifest) if Path(manifest).exists() else {}
    build(names, log=log)
    pushed: dict[str, PushedImage] = {}
    for name in names:
        pushed[name] = push_image(registry, name, log)
        write_manifest(manifest, {**recorded, **pushed})
    return pushed
