"""Fixtures for the verl tests; the stand-ins for the model are in verl_fakes.py."""

from __future__ import annotations

from typing import Any

import pytest
from verl_fakes import LineTokenizer


@pytest.fixture(scope="session")
def coin_change_image() -> None:
    """coin_change's image, built if missing or stale."""
    from deepgym.images import build

    build(["coin_change"])


@pytest.fixture(autouse=True)
def fresh_deepgym_clients():
    """Each test starts and ends with no cached client, so an environment variable set for one test (a dead
    DOCKER_HOST) cannot leak into a client another test reuses; closing them removes their containers."""
    from deepgym.integrations.verl import reset_clients

    reset_clients()
    yield
    reset_clients()


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
