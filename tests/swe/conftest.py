"""The SWE-style instances of these tests: three instance images built once per session from small repositories
the tests create (tests/swe/instances.py), on deepgym's base image."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from instances import instance_rows  # noqa: E402
from support import ensure_images  # noqa: E402


@pytest.fixture(scope="session")
def swe_rows(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, Any]]:
    """Each instance's SWE-bench row, by name, its instance image built."""
    ensure_images("row_python")  # builds the base image too
    return instance_rows(tmp_path_factory.mktemp("swe-instances"))
