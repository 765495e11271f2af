"""An imported Harbor task through verl, unchanged: verl_rows writes its row, verl's RLHFDataset reads it, and
deepgym's agent loop with the packaged session tool plays solution/solve.sh into its persistent terminal; the
task's own test.sh, run by the script verifier, gives the reward."""

from __future__ import annotations

import pytest

pytestmark = [pytest.mark.verl, pytest.mark.docker]

from support import harbor_environments  # noqa: E402
from test_verl_session_loop import Server, call, dataset_row, none_left, run_episode, session_config  # noqa: E402

from deepgym.authoring.replay import action_sequences  # noqa: E402
from deepgym.environments import load_environment  # noqa: E402
from deepgym.integrations.verl_tool import episode_count  # noqa: E402


def test_an_imported_tasks_reference_earns_1_through_the_agent_loop(tmp_path):
    with harbor_environments(tmp_path / "envs", "hello-world"):
        row = dataset_row(tmp_path, "hello_world")
        assert row["agent_name"] == "deepgym_agent"
        actions = action_sequences(load_environment("hello_world"), "reference")[0]
        output = run_episode(session_config(use_v1=True), row, Server(*map(call, actions), "Done."))
        assert output.reward_score == 1.0
        assert output.extra_fields["reward_extra_info"]["error_type"] == ""
        assert episode_count() == 0 and none_left("hello_world")
        idle = run_episode(session_config(use_v1=True), row, Server(call("ls"), "Done."))
        assert idle.reward_score == 0.0
