"""The pushed-images manifest: which registry reference, pinned by digest, holds each environment's image.

``deepgym images push`` writes it; runtimes, ``deepgym images register`` and verl rows read it, so that every
consumer of a pushed image names the same bytes. Tags come from the content hash (never ``latest``); the
digest is what pins. The file is JSON::

    {"version": 1,
     "images": {"coin_change": {"repository": "127.0.0.1:5000/deepgym-coin_change",
                                "tag": "3f2a9c0d1e4b5a67",
                                "digest": "sha256:..."}}}
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import asdict, dataclass
from pathlib import Path

from .errors import ConfigurationError

VERSION = 1
DEFAULT_MANIFEST = "deepgym-images.json"
# A manifest that every client judges from when none is given (verl's reward workers construct their own).
MANIFEST_VARIABLE = "DEEPGYM_IMAGE_MANIFEST"
_DIGEST = re.compile(r"sha256:[0-9a-f]{64}")


@dataclass(frozen=True)
class PushedImage:
    """One environment's image in a registry."""

    repository: str
    tag: str
    digest: str

    @property
    def ref(self) -> str:
        """The digest-pinned reference, the only one a runtime should run."""
        return f"{self.repository}@{self.digest}"

    @property
    def tagged(self) -> str:
        return f"{self.repository}:{self.tag}"


def write_manifest(path: str | Path, images: dict[str, PushedImage]) -> None:
    """Write ``images`` (environment id -> pushed image) to ``path``, sorted, replacing it atomically."""
    path = Path(path)
    text = json.dumps({"version": VERSION, "images": {name: asdict(image) for name, image in sorted(images.items())}},
                      indent=2) + "\n"
    scratch = path.with_name(path.name + ".tmp")
    scratch.write_text(text)
    scratch.replace(path)


def read_manifest(path: str | Path) -> dict[str, PushedImage]:
    """Environment id -> pushed image, from a manifest ``deepgym images push`` wrote.

    Raises ConfigurationError naming the file and the bad field, so a hand-edited manifest fails before any
    sample is judged.
    """
    path = Path(path)
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError:
        raise ConfigurationError(f"no pushed-images manifest at {path}: run `deepgym images push --registry R` "
                                 "first, or pass the manifest it wrote") from None
    except (OSError, ValueError) as error:
        raise ConfigurationError(f"cannot read the pushed-images manifest {path}: {error}") from None
    if not isinstance(data, dict) or data.get("version") != VERSION or not isinstance(data.get("images"), dict):
        raise ConfigurationError(f"{path} is not a version-{VERSION} pushed-images manifest "
                                 '({"version": 1, "images": {...}}); write it again with `deepgym images push`')
    images = {}
    for name, entry in data["images"].items():
        fields = entry if isinstance(entry, dict) else {}
        missing = [key for key in ("repository", "tag", "digest") if not isinstance(fields.get(key), str)]
        if missing:
            raise ConfigurationError(f"{path}: images.{name} lacks {', '.join(missing)} (strings)")
        if not _DIGEST.fullmatch(fields["digest"]):
            raise ConfigurationError(f"{path}: images.{name}.digest is {fields['digest']!r}, not sha256:<64 hex>")
        images[name] = PushedImage(fields["repository"], fields["tag"], fields["digest"])
    return images


def pinned_refs(path: str | Path | None = None) -> dict[str, str]:
    """Environment id -> digest-pinned reference, from the manifest at ``path`` or else at
    ``$DEEPGYM_IMAGE_MANIFEST``; empty when neither is given (judging then uses the local image names)."""
    path = path or os.environ.get(MANIFEST_VARIABLE)
    return {name: image.ref for name, image in read_manifest(path).items()} if path else {}
