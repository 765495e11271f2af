"""Where deepgym's bundle is: ``docker-bake.hcl``, ``images/`` and ``environments/`` (the repository in a
checkout, or the copy the wheel carries), and the folders environments are found in. Environments, images
and ``deepgym new`` all start here; it knows nothing of any of them."""

from __future__ import annotations

import os
from functools import lru_cache
from pathlib import Path


@lru_cache(maxsize=1)
def bundle_root() -> Path:
    """The folder holding ``docker-bake.hcl``, ``images/`` and ``environments/``: the repository in a
    checkout, or the copy the wheel carries. Found once per process (the package does not move), since every
    environment lookup needs it and an event loop may look up hundreds in one pass."""
    package = Path(__file__).resolve().parent
    for candidate in (package / "_bundle", package.parent):
        if (candidate / "docker-bake.hcl").is_file():
            return candidate
    raise FileNotFoundError(f"deepgym's bundle (docker-bake.hcl, images/, environments/) is missing next to {package}")


def environment_roots() -> list[Path]:
    roots = [bundle_root() / "environments"]
    roots += [Path(p) for p in os.environ.get("DEEPGYM_ENVIRONMENTS", "").split(os.pathsep) if p]
    return roots
