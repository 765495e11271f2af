"""Fixtures for the verl tests; the stand-ins for the model are in verl_fakes.py.

Without verl these tests are not collected on a developer's machine (the header says so) and the run FAILS
under ``CI=true``, as the docker tests do without an engine. verl is looked up by a submodule: ``import verl``
alone would find this test folder (on sys.path as ``tests/``) as a namespace package."""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path
from typing import Any

import pytest

HAVE_VERL = importlib.util.find_spec("verl.trainer") is not None
if not HAVE_VERL and os.environ.get("CI", "").lower() in ("1", "true", "yes"):
    raise pytest.UsageError("CI=true but verl 0.9.1 is not installed: the verl tests must run in CI. Install it "
                            "with `source scripts/dev-env.sh --verl` and run again.")


def pytest_ignore_collect(collection_path: Path) -> bool | None:
    return True if not HAVE_VERL and collection_path.name.startswith("test_") else None


def pytest_report_header() -> str | None:
    return None if HAVE_VERL else "verl tests NOT collected: verl 0.9.1 is not installed (they fail under CI=true)"


if HAVE_VERL:
    from verl_fakes import LineTokenizer


@pytest.fixture(scope="session")
def coin_change_image() -> None:
    """coin_change's image, built if missing or stale."""
    from deepgym.images import build

    build(["coin_change"])


@pytest.fixture(scope="session")
def dataset_row(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """One coin_change row as verl's RLHFDataset hands it to an agent loop (written by verl_rows)."""
    import pandas as pd
    from omegaconf import OmegaConf
    from verl.utils.dataset.rl_dataset import RLHFDataset

    from deepgym.integrations.verl import verl_rows

    tmp_path = tmp_path_factory.mktemp("rows")
    path = tmp_path / "rows.parquet"
    pd.DataFrame(verl_rows(["coin_change"])).to_parquet(path)
    config = OmegaConf.create({"max_prompt_length": 512, "cache_dir": str(tmp_path / "cache")})
    return dict(RLHFDataset(str(path), LineTokenizer(), config)[0])
