"""Images: their names, the content hash that says whether one is current, and building them with bake.

Names follow docker-bake.hcl: ``<DEEPGYM_REGISTRY>deepgym-<name>:<DEEPGYM_TAG>`` (defaults: no registry,
``latest``). An image's content hash covers everything it is built from: the base image's folder, the runner
and, for an environment, its whole folder. ``deepgym images build`` passes the hashes to bake, which stores
them in the label ``org.deepgym.content-hash``; an image whose label differs from the files is stale.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from functools import lru_cache
from pathlib import Path
from typing import TextIO

from .bundle import bundle_root
from .environments import list_environments, load_environment
from .errors import ImageBuildError

HASH_LABEL = "org.deepgym.content-hash"
# The base image's own key: an environment image built without deepgym's labels must not inherit the base's
# hash through FROM and look stale; it is "unverified" instead.
BASE_HASH_LABEL = "org.deepgym.base.content-hash"
DEFAULT_DEBIAN_IMAGE = "debian:bookworm-slim"
BOOTSTRAP_DEBIAN_IMAGE = "deepgym/debian-bootstrap:bookworm"
BASE = "base"
# The image desktop environments are built on (images/desktop, bake target "desktop"), itself on the base.
DESKTOP = "desktop"
# Images of the tests' own services, built from images/<name> on top of the base (docker-bake.hcl's targets
# outside group "default"); `build` takes their names like an environment's.
SERVICE_IMAGES = ("registry",)
# Generic images per language runtime, for tests that travel with a dataset's rows (deepgym/rows.py): each is
# built from images/<name>/ on top of the base image and holds no hidden tests of its own.
RUNTIME_IMAGES = ("row_python",)


def image_name(name: str) -> str:
    """The image of ``name`` (an environment id, or ``base``), as docker-bake.hcl tags it."""
    return f"{os.environ.get('DEEPGYM_REGISTRY', '')}deepgym-{name}:{os.environ.get('DEEPGYM_TAG') or 'latest'}"


def bake_target(name: str, context: str, kind: str = "function") -> str:
    """The docker-bake.hcl target block of an environment (a desktop one builds on the desktop image)."""
    inherits = "_desktop" if kind == "desktop" else "_environment"
    return (f'\ntarget "{name}" {{\n  inherits = ["{inherits}"]\n  context  = "{context}"\n'
            f'  tags     = [image("{name}")]\n  labels   = environment_labels("{name}")\n}}\n')


def folder_digest(digest: hashlib._Hash, root: Path, folder: Path) -> None:
    for path in sorted(folder.rglob("*")):
        if path.is_file() and "__pycache__" not in path.parts and path.suffix != ".pyc":
            digest.update(str(path.relative_to(root)).encode() + b"\0" + path.read_bytes() + b"\0")


@lru_cache(maxsize=None)
def content_hash(name: str) -> str:
    """sha256 (first 16 hex digits) of the files the image ``name`` (an environment, ``base`` or a service image)
    is built from (a desktop environment's include images/desktop). Cached per process. It is also the tag ``deepgym images push`` gives the image."""
    root = bundle_root()
    digest = hashlib.sha256()
    folder_digest(digest, root, root / "images" / "base")
    folder_digest(digest, root, root / "deepgym" / "runner")
    if name in SERVICE_IMAGES or name in RUNTIME_IMAGES:
        folder_digest(digest, root, root / "images" / name)
    elif name != BASE:
        env = load_environment(name)
        if env.kind == "desktop":
            folder_digest(digest, root, root / "images" / DESKTOP)
        folder_digest(digest, env.path.parent, env.path)
    return digest.hexdigest()[:16]


@lru_cache(maxsize=None)
def runner_hash() -> str:
    """sha256 (first 16 hex digits) of the runner's files (deepgym/runner): every image carries a copy, and a
    verdict's provenance names the one this host would build in. Cached per process."""
    root = bundle_root()
    digest = hashlib.sha256()
    folder_digest(digest, root, root / "deepgym" / "runner")
    return digest.hexdigest()[:16]


def image_status(name: str) -> str:
    """``missing``, ``stale`` (built from other files), ``unverified`` (built without a hash) or ``current``."""
    result = subprocess.run(["docker", "image", "inspect", "--format", "{{json .Config.Labels}}", image_name(name)],
                            capture_output=True, text=True)
    if result.returncode != 0:
        if "No such image" in result.stderr or "No such object" in result.stderr:
            return "missing"
        raise ImageBuildError(f"cannot inspect {image_name(name)}: {result.stderr.strip()}")
    built_from = (json.loads(result.stdout) or {}).get(BASE_HASH_LABEL if name == BASE else HASH_LABEL)
    return hash_status(built_from, content_hash(name))


def hash_status(built_from: str | None, expected: str) -> str:
    """``current``, ``stale`` or ``unverified`` for an image whose hash label is ``built_from`` (None when it
    has none), against the hash of the files on this host. The one rule, for building and for judging."""
    if built_from in (None, "unknown"):
        return "unverified"
    return "current" if built_from == expected else "stale"


def _has_image(ref: str) -> bool:
    return subprocess.run(["docker", "image", "inspect", ref], capture_output=True).returncode == 0


def resolve_debian_image(requested: str | None, log: TextIO) -> str:
    """The Debian image to build the base from. An explicit choice wins; else the default if present or
    pullable; else a debootstrapped one, built now if need be (hosts without a registry)."""
    if requested:
        return requested
    if _has_image(DEFAULT_DEBIAN_IMAGE):
        return DEFAULT_DEBIAN_IMAGE
    if _has_image(BOOTSTRAP_DEBIAN_IMAGE):
        print(f"deepgym: using {BOOTSTRAP_DEBIAN_IMAGE} (built by images/bootstrap-debian.sh)", file=log)
        return BOOTSTRAP_DEBIAN_IMAGE
    print(f"deepgym: pulling {DEFAULT_DEBIAN_IMAGE}", file=log)
    pulled = subprocess.run(["docker", "pull", DEFAULT_DEBIAN_IMAGE], capture_output=True, text=True)
    if pulled.returncode == 0:
        return DEFAULT_DEBIAN_IMAGE
    script = bundle_root() / "images" / "bootstrap-debian.sh"
    print(f"deepgym: cannot pull {DEFAULT_DEBIAN_IMAGE} ({pulled.stderr.strip()[-200:]}); building Debian from "
          f"its archive instead with {script} (about a minute)", file=log)
    if os.geteuid() != 0 or shutil.which("debootstrap") is None:
        raise ImageBuildError(f"{DEFAULT_DEBIAN_IMAGE} cannot be pulled and this host cannot debootstrap one "
                              f"(needs root and debootstrap). Fix: pull it from a registry you can reach and tag it "
                              f"{DEFAULT_DEBIAN_IMAGE}, or run `sudo {script}` after `apt-get install debootstrap`")
    if subprocess.run(["bash", str(script)], stdout=log, stderr=log).returncode != 0:
        raise ImageBuildError(f"{script} failed; see its output above")
    return BOOTSTRAP_DEBIAN_IMAGE


def _extra_target(root: Path, name: str, log: TextIO) -> str:
    """The bake target of an environment outside docker-bake.hcl. One imported from Harbor (docs/harbor.md)
    builds from its task's own base image, which is looked for (and pulled) first, so that one that cannot be
    had stops the build with the image's name and the fix, not deep in bake's output."""
    env = load_environment(name)
    if not (env.path / "harbor.json").is_file():
        return bake_target(name, str(env.path), env.kind)
    from .harbor.bake import harbor_target
    from .harbor.bases import check_bases

    for pulled in check_bases(name, env.path):
        print(f"deepgym: pulled {pulled}, the base image of {name}", file=log)
    return harbor_target(name, env.path, root / "deepgym" / "runner")


def build(names: list[str] | None = None, *, rebuild: bool = False, debian_image: str | None = None,
          log: TextIO = sys.stderr) -> list[str]:
    """Build the images of ``names`` (every environment when None) through ``docker buildx bake``, with bake's
    own progress on ``log``. Only missing, stale or unverified images are built unless ``rebuild``. Returns the
    environments (and runtime images) built."""
    names = [*list_environments(), *RUNTIME_IMAGES] if names is None else names
    if shutil.which("docker") is None:
        raise ImageBuildError("the docker CLI is not installed. Fix: install Docker Engine with buildx "
                              "(scripts/install-docker-engine.sh does it on Debian)")
    if subprocess.run(["docker", "buildx", "version"], capture_output=True).returncode != 0:
        raise ImageBuildError("docker buildx is not installed. Fix: install the buildx plugin (docker-buildx)")
    todo = [n for n in names if rebuild or image_status(n) != "current"]
    if not todo:
        print(f"deepgym: all {len(names)} images are current", file=log)
        return []
    root = bundle_root()
    hashes = {name: content_hash(name) for name in [BASE, *todo]}
    env = {**os.environ, "CONTENT_HASHES": json.dumps(hashes), "DEBIAN_IMAGE": resolve_debian_image(debian_image, log),
           "REGISTRY": os.environ.get("DEEPGYM_REGISTRY", ""), "TAG": os.environ.get("DEEPGYM_TAG") or "latest"}
    print(f"deepgym: building {len(todo)} image(s) with docker buildx bake: {', '.join(todo)}", file=log)
    command = ["docker", "buildx", "bake", "--file", str(root / "docker-bake.hcl")]
    with tempfile.TemporaryDirectory(prefix="deepgym-bake-") as scratch:
        # Environments outside the repository (DEEPGYM_ENVIRONMENTS) get their targets from a second file.
        known = set(re.findall(r'^target "([a-z0-9_]+)"', (root / "docker-bake.hcl").read_text(), re.M))
        extra = [name for name in todo if name not in known]
        if extra:
            extra_file = Path(scratch, "environments.hcl")
            extra_file.write_text("".join(_extra_target(root, name, log) for name in extra))
            command += ["--file", str(extra_file)]
        log.flush()
        if subprocess.run([*command, BASE, *todo], cwd=root, env=env, stdout=log, stderr=log).returncode != 0:
            raise ImageBuildError(f"docker buildx bake failed for {', '.join(todo)}; its output is above")
    return todo
