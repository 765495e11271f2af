"""deepgym's runner layered onto SWE-style instance images: one bake target per instance image, built on demand.

The layer (images/swe/Dockerfile) is ``FROM`` the instance image plus the runner. Its content hash covers the
runner, images/swe, the instance image's name and the instance image's id, so a rebuilt instance image or a new
runner makes the layer stale, and the next sample that needs it builds it again (``docker buildx bake`` with a
target written for that image). An instance image that is not on the engine is pulled once; one that cannot be
pulled is ``image_missing`` (no verdict), never a 0.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import tempfile
import threading
from pathlib import Path
from typing import TextIO

from .bundle import bundle_root
from .environments import Environment
from .errors import ImageBuildError
from .images import HASH_LABEL, folder_digest, image_name
from .sandbox import ImageMissing

INSTANCE_LABEL = "org.deepgym.instance-image"
PULL_TIMEOUT_S = 600
_locks: dict[str, threading.Lock] = {}
_locks_guard = threading.Lock()


def _inspect(ref: str) -> dict | None:
    """``docker image inspect`` of ``ref``, or None when the engine has no such image."""
    result = subprocess.run(["docker", "image", "inspect", ref], capture_output=True, text=True)
    if result.returncode != 0:
        if "No such image" in result.stderr or "No such object" in result.stderr:
            return None
        raise ImageBuildError(f"cannot inspect {ref}: {result.stderr.strip()}")
    return json.loads(result.stdout)[0]


def instance_image_id(image: str) -> str:
    """The id of the instance image ``image``, pulled if the engine lacks it. Raises ImageMissing."""
    found = _inspect(image)
    if found is None:
        try:
            pulled = subprocess.run(["docker", "pull", "--quiet", image], capture_output=True, text=True,
                                    timeout=PULL_TIMEOUT_S)
            why = pulled.stderr.strip()[-300:]
        except subprocess.TimeoutExpired:
            pulled, why = None, f"the pull took over {PULL_TIMEOUT_S} s"
        found = _inspect(image) if pulled is not None and pulled.returncode == 0 else None
        if found is None:
            raise ImageMissing(f"the instance image {image} is not on the engine and cannot be pulled ({why}); "
                               f"Fix: build or load it (`docker load`), or pull it from a registry you can reach")
    return found["Id"]


def layer_hash(image: str, image_id: str) -> str:
    """The content hash of the layer on ``image`` (whose id is ``image_id``)."""
    root = bundle_root()
    digest = hashlib.sha256()
    folder_digest(digest, root, root / "images" / "swe")
    folder_digest(digest, root, root / "deepgym" / "runner")
    digest.update(f"{image}\0{image_id}".encode())
    return digest.hexdigest()[:16]


def bake_target(name: str, image: str, content_hash: str) -> str:
    """The docker-bake.hcl target that layers the runner onto ``image`` under deepgym's name ``name``."""
    root = bundle_root()
    return (f'target "{name}" {{\n  context  = {json.dumps(str(root / "images" / "swe"))}\n'
            f'  contexts = {{ runner = {json.dumps(str(root / "deepgym" / "runner"))} }}\n'
            f'  args     = {{ INSTANCE_IMAGE = {json.dumps(image)} }}\n'
            f'  tags     = [{json.dumps(image_name(name))}]\n'
            f'  labels   = {{ {json.dumps(HASH_LABEL)} = {json.dumps(content_hash)}, '
            f'{json.dumps(INSTANCE_LABEL)} = {json.dumps(image)} }}\n}}\n')


def build_layer(name: str, image: str, content_hash: str, log: TextIO | None = None) -> None:
    """Build the layer ``name`` on ``image`` with ``docker buildx bake``. Raises ImageBuildError."""
    with tempfile.TemporaryDirectory(prefix="deepgym-swe-bake-") as scratch:
        bake_file = Path(scratch, "swe.hcl")
        bake_file.write_text(bake_target(name, image, content_hash))
        result = subprocess.run(["docker", "buildx", "bake", "--file", str(bake_file), name], cwd=bundle_root(),
                                stdout=subprocess.PIPE if log is None else log, stderr=subprocess.STDOUT,
                                text=True, env=os.environ.copy())
    if result.returncode != 0:
        output = result.stdout[-2000:] if log is None else "its output is above"
        raise ImageBuildError(f"layering deepgym's runner onto {image} failed: {output}")


def _lock(name: str) -> threading.Lock:
    with _locks_guard:
        return _locks.setdefault(name, threading.Lock())


def ensure(env: Environment, log: TextIO | None = None) -> str:
    """Make ``env``'s layer current, building it if it is missing or stale; returns its content hash. Raises
    ImageMissing when the instance image is missing and cannot be pulled, ImageBuildError when the build fails."""
    if env.instance_image is None:
        raise ValueError(f"{env.id} is not an SWE-style environment (it names no instance image)")
    with _lock(env.id):
        expected = layer_hash(env.instance_image, instance_image_id(env.instance_image))
        layer = _inspect(image_name(env.id))
        if layer is None or (layer["Config"].get("Labels") or {}).get(HASH_LABEL) != expected:
            if log is not None:
                print(f"deepgym: layering the runner onto {env.instance_image} as {image_name(env.id)}", file=log)
            build_layer(env.id, env.instance_image, expected, log)
        return expected


def build(images: list[str], log: TextIO = sys.stderr) -> list[str]:
    """Layer the runner onto each instance image in ``images`` now (``deepgym images build-swe``), rather than
    on first use. Returns deepgym's names of the layers."""
    from .swe import layer_id

    names = []
    for image in images:
        env = Environment(id=layer_id(image), kind="swe", prompt="", path=bundle_root() / "images" / "swe",
                          instance_image=image)
        ensure(env, log)
        names.append(image_name(env.id))
    return names
