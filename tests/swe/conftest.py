"""The SWE-style instances of these tests: three instance images built once per session from small repositories
the tests create (tests/swe/instances.py), on deepgym's base image."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from instances import SPECS, base_image, build_instance, fixture_tag  # noqa: E402
from support import ensure_images  # noqa: E402


@pytest.fixture(scope="session")
def swe_rows(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, Any]]:
    """Each instance's SWE-bench row, by name, its instance image built."""
    ensure_images("row_python")  # builds the base image too
    folder = tmp_path_factory.mktemp("swe-instances")
    rows = {spec.name: build_instance(spec, folder, fixture_tag(spec.name), base_image()) for spec in SPECS}
    yield rows
    tags = [fixture_tag(spec.name) for spec in SPECS]
    subprocess.run(["docker", "image", "rm", "-f", *tags], capture_output=True)
