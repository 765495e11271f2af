"""SWE-bench instances through TRL's reward-function interface: the same rows `deepgym datasets swe` writes."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parents[1] / "swe"))

from instances import instance_rows  # noqa: E402
from support import ensure_images  # noqa: E402

pytestmark = [pytest.mark.trl, pytest.mark.docker]


def test_swe_rows_with_trls_reward_function(tmp_path_factory):
    from deepgym.integrations.trl import make_trl_reward_fn
    from deepgym.swe import verl_row

    ensure_images("row_python")
    instance = instance_rows(tmp_path_factory.mktemp("swe-instances"))["calc"]
    row = verl_row(instance, 0)
    reward_fn = make_trl_reward_fn(mode="docker")
    logged: dict = {}
    rewards = reward_fn([f"```diff\n{instance['patch']}```", "no diff here"], data_source=[row["data_source"]] * 2,
                        reward_model=[row["reward_model"]] * 2, log_extra=logged.__setitem__)
    assert rewards == [1.0, 0.0], logged
    assert list(logged.values()) == [["", "invalid_patch"]]
