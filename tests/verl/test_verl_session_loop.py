"""DeepGymAgentLoop (deepgym_agent) built by hydra from the packaged YAML with the packaged session tool, as
verl's AgentLoopWorker builds them, run on rows from verl's RLHFDataset with a scripted model that emits hermes
tool calls, against real containers."""

from __future__ import annotations

import asyncio
import contextlib
import importlib.util
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytestmark = [pytest.mark.verl, pytest.mark.docker]

from verl.experimental.agent_loop.tool_agent_loop import ToolAgentLoop  # noqa: E402
from verl.tools.tool_registry import initialize_tools_from_config  # noqa: E402
from verl_fakes import without_provenance  # noqa: E402
from verl_fakes import LineTokenizer, ScriptedServer, instantiate_loop, loop_config  # noqa: E402

from deepgym import NoVerdictError  # noqa: E402
from deepgym.environments import load_environment  # noqa: E402
from deepgym.integrations import verl as dgverl  # noqa: E402
from deepgym.integrations.verl_tool import DeepGymAgentLoop, DeepGymSessionTool, episode_count  # noqa: E402
from deepgym.authoring.replay import action_sequences  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
DEAD_ENGINE = "unix:///nonexistent/deepgym-test-docker.sock"


def call(command) -> str:
    """A model turn that calls the shell tool, in the hermes format."""
    payload = json.dumps({"name": "shell", "arguments": {"command": command}})
    return f"Let me look.\n<tool_call>{payload}</tool_call>"


def session_config(*, use_v1: bool, max_tool_response_length: int = 4000):
    from omegaconf import OmegaConf

    config = loop_config(use_v1=use_v1)
    multi_turn = {"max_user_turns": None, "max_assistant_turns": None, "max_parallel_calls": 1,
                  "max_tool_response_length": max_tool_response_length, "tool_response_truncate_side": "middle",
                  "format": "hermes", "tool_config_path": dgverl.session_tool_config_path()}
    return OmegaConf.merge(config, {"actor_rollout_ref": {"rollout": {"response_length": 2048, "full_determinism": True,
                                                                       "multi_turn": multi_turn}}})


def dataset_row(tmp_path: Path, name: str, variant: int = 0) -> dict:
    """A session row written by verl_rows and read back by verl's RLHFDataset."""
    import pandas as pd
    from omegaconf import OmegaConf
    from verl.utils.dataset.rl_dataset import RLHFDataset

    path = tmp_path / f"{name}-{variant}.parquet"
    pd.DataFrame(dgverl.verl_rows([name], variant=[variant])).to_parquet(path)
    config = OmegaConf.create({"max_prompt_length": 1024, "cache_dir": str(tmp_path / "cache")})
    return dict(RLHFDataset(str(path), LineTokenizer(), config)[0])


class Server(ScriptedServer):
    """The scripted model; ``before`` maps a turn number (0 first) to something to do before it answers."""

    def __init__(self, *responses: str, before: dict | None = None):
        super().__init__(LineTokenizer(), *responses)
        self.before = before or {}

    async def generate(self, request_id, **kwargs):
        hook = self.before.get(len(self.requests))
        if hook is not None:
            hook()
        return await super().generate(request_id, **kwargs)


def run_episode(config, row: dict, server: Server, tool_config: str | None = None):
    tools = initialize_tools_from_config(tool_config or dgverl.session_tool_config_path())

    async def main():
        loop = instantiate_loop(config, server, "deepgym_agent", tools=tools)
        return await loop.run({"temperature": 1.0}, **row)

    return asyncio.run(main())


def our_containers(environment: str) -> list[str]:
    from deepgym.sandbox.docker import owner_label

    result = subprocess.run(["docker", "ps", "-aq", "--filter", f"label=deepgym.environment={environment}",
                             "--filter", f"label=deepgym.owner={owner_label(os.getpid())}"],
                            capture_output=True, text=True, check=True)
    return result.stdout.split()


def none_left(environment: str) -> bool:
    """No container of ours for ``environment`` remains (one the engine is still removing gets 60 s: a busy
    engine is slow)."""
    for _ in range(600):
        if not our_containers(environment):
            return True
        time.sleep(0.1)
    return False


def seen_by_model(server: Server) -> str:
    return server.tokenizer.decode(server.requests[-1]["prompt_ids"])


@pytest.fixture(scope="module", autouse=True)
def images():
    from deepgym.images import build

    build(["shell_organise_files"])


def test_the_packaged_yaml_builds_deepgyms_tool_loop():
    async def build():
        tools = initialize_tools_from_config(dgverl.session_tool_config_path())
        return instantiate_loop(session_config(use_v1=True), Server("x"), "deepgym_agent", tools=tools)

    loop = asyncio.run(build())
    assert type(loop) is DeepGymAgentLoop and isinstance(loop, ToolAgentLoop)
    assert isinstance(loop.tools["shell"], DeepGymSessionTool) and loop.episode.mode == "docker"


@pytest.mark.parametrize("use_v1", [True, False])
def test_the_reference_episode_earns_1_and_its_container_is_removed(use_v1, tmp_path):
    row = dataset_row(tmp_path, "shell_organise_files", variant=1)
    assert row["agent_name"] == "deepgym_agent"
    actions = action_sequences(load_environment("shell_organise_files"), "reference")[1]
    server = Server(*map(call, actions), "All files are sorted.")
    output = run_episode(session_config(use_v1=use_v1), row, server)
    assert output.reward_score == 1.0
    assert without_provenance(output.extra_fields["reward_extra_info"]) == {"score": 1.0, "passed": 1.0, "error": 0.0, "error_type": ""}
    assert output.num_turns == 2 * len(actions) + 2 and 0 in output.response_mask and 1 in output.response_mask
    shown = seen_by_model(server)
    assert "Read `RULES.md`" in shown and "./private/secret_keys.csv" in shown  # the start, the last output
    assert len(server.requests) == len(actions) + 1
    assert episode_count() == 0 and none_left("shell_organise_files")


def test_a_policy_that_kills_its_own_sandbox_earns_0(tmp_path):
    """The container dies between two actions, as when the policy brought it down (the engine cannot tell who
    did): the next action finds it gone, the episode ends and scores 0."""
    row = dataset_row(tmp_path, "shell_organise_files")
    kill = lambda: subprocess.run(["docker", "kill", *our_containers("shell_organise_files")],  # noqa: E731
                                  capture_output=True, check=False)
    server = Server(call("ls"), call("ls inbox"), "Done.", before={1: kill})
    output = run_episode(session_config(use_v1=True), row, server)
    assert output.reward_score == 0.0
    assert output.extra_fields["reward_extra_info"]["error_type"] == "policy_sandbox_failure"
    assert output.extra_fields["reward_extra_info"]["error"] == 0.0  # scored and trained on
    assert none_left("shell_organise_files")


def test_a_policy_that_never_calls_the_tool_earns_0(tmp_path):
    row = dataset_row(tmp_path, "shell_organise_files")
    output = run_episode(session_config(use_v1=True), row, Server("I would sort the files by hand."))
    assert output.reward_score == 0.0
    assert without_provenance(output.extra_fields["reward_extra_info"]) == {"score": 0.0, "passed": 0.0, "error": 0.0,
                                                        "error_type": "no_action"}
    assert set(output.response_mask) == {1} and none_left("shell_organise_files")


def test_an_invalid_action_comes_back_as_text_and_the_episode_goes_on(tmp_path):
    row = dataset_row(tmp_path, "shell_organise_files", variant=1)
    actions = action_sequences(load_environment("shell_organise_files"), "reference")[1]
    server = Server(call(12345), *map(call, actions), "Done.")
    output = run_episode(session_config(use_v1=True), row, server)
    assert "invalid action: an action is a shell command (a string), not int" in seen_by_model(server)
    assert output.reward_score == 1.0


@pytest.mark.parametrize("use_v1", [True, False])
def test_an_engine_lost_mid_episode_gives_no_verdict(use_v1, tmp_path, caplog):
    import docker

    row = dataset_row(tmp_path, "shell_organise_files")
    provider = dgverl.get_client("docker").provider
    real = {}

    def lose_engine():
        real["api"] = provider.engine.api()
        provider.engine._api = docker.APIClient(base_url=DEAD_ENGINE, version="1.41")

    server = Server(call("ls"), call("ls inbox"), "Done.", before={1: lose_engine})
    try:
        if use_v1:
            with pytest.raises(NoVerdictError) as failure:
                run_episode(session_config(use_v1=True), row, server)
            assert failure.value.error_type == "daemon_unavailable" and "v1" in str(failure.value)
        else:
            output = run_episode(session_config(use_v1=False), row, server)
            assert output.response_mask == [0] * len(output.response_mask)
            assert without_provenance(output.extra_fields["reward_extra_info"]) == {"score": 0.0, "passed": 0.0, "error": 1.0,
                                                                "error_type": "daemon_unavailable"}
            tool_said = server.tokenizer.decode(output.response_ids)
            assert "The environment stopped" in tool_said and "engine" not in tool_said
        assert len(server.requests) == 2  # the rollout stopped at the fault: no turn after it
    finally:
        leftovers = our_containers("shell_organise_files")  # the engine could not be told to remove it
        subprocess.run(["docker", "rm", "-f", *leftovers], capture_output=True, check=False)
    assert episode_count() == 0 and len(leftovers) <= 1


def test_a_hung_action_is_bounded_by_the_step_timeout(tmp_path):
    from deepgym.images import build

    # Set and removed by hand: after verl's RLHFDataset has run, monkeypatch's undo leaves the variable set.
    os.environ["DEEPGYM_ENVIRONMENTS"] = str(ROOT / "tests" / "session_envs")
    try:
        build(["session_faults"])
        row = dataset_row(tmp_path, "session_faults")
        server = Server(call("sleep 1000"), call("echo yes > done.txt"), "Done.")
        output = run_episode(session_config(use_v1=True), row, server)
    finally:
        del os.environ["DEEPGYM_ENVIRONMENTS"]
    assert "[timed out after 2 s]" in seen_by_model(server)
    assert output.reward_score == 1.0 and none_left("session_faults")


def test_output_is_cut_by_deepgym_to_verls_tool_response_length(tmp_path):
    row = dataset_row(tmp_path, "shell_organise_files")
    server = Server(call("seq 1 5000"), "Done.")
    run_episode(session_config(use_v1=True, max_tool_response_length=600), row, server)
    shown = seen_by_model(server)
    assert "characters cut ...]" in shown and "...(truncated)..." not in shown and "\n5000\n" in shown


def local_tool_config(tmp_path, **extra) -> str:
    text = Path(dgverl.session_tool_config_path()).read_text().replace("mode: docker", "mode: local")
    path = tmp_path / "local_tool.yaml"
    path.write_text(text + "".join(f"      {key}: {json.dumps(value)}\n" for key, value in extra.items()))
    return str(path)


def test_mode_local_is_refused_without_the_explicit_opt_in(tmp_path):
    for config in (local_tool_config(tmp_path), local_tool_config(tmp_path, allow_unsafe_local="yes")):
        with pytest.raises(ValueError, match="allow_unsafe_local: true"):
            initialize_tools_from_config(config)


@pytest.mark.filterwarnings("ignore:deepgym local mode:RuntimeWarning")
def test_mode_local_with_the_opt_in_runs_the_episode_on_the_host(tmp_path, monkeypatch):
    monkeypatch.delenv("DEEPGYM_ALLOW_LOCAL", raising=False)
    row = dataset_row(tmp_path, "shell_organise_files", variant=1)
    actions = action_sequences(load_environment("shell_organise_files"), "reference")[1]
    server = Server(call("pwd"), *map(call, actions), "All files are sorted.")
    output = run_episode(session_config(use_v1=True), row, server,
                         tool_config=local_tool_config(tmp_path, allow_unsafe_local=True))
    assert output.reward_score == 1.0 and output.extra_fields["reward_extra_info"]["error_type"] == ""
    assert "/deepgym-local-" in seen_by_model(server) and episode_count() == 0


@contextlib.contextmanager
def sandboxes_of(mode: str, scratch: Path):
    """Mode ``mode``'s test double for as long as the block runs: Apple's fake CLI, or the Modal stand-in with
    shell_organise_files registered; the settings DeepGym(mode) reads are in os.environ meanwhile. Yields how
    many sandboxes the double has made so far."""
    if str(ROOT / "tests" / "providers") not in sys.path:
        sys.path.append(str(ROOT / "tests" / "providers"))  # the stand-ins
    from support import environment, unavailable

    if mode == "apple":
        from standins.apple import AppleFake

        fake = AppleFake(scratch / "calls.jsonl")
        try:
            with environment(FAKE_CONTAINER_LOG=str(fake.log), DEEPGYM_APPLE_CONTAINER=fake.cli):
                yield lambda: sum(1 for call in fake.calls() if call[0] == "run")
        finally:
            fake.stop()
        return
    if importlib.util.find_spec("modal") is None:
        unavailable("modal is not installed (pip install 'deepgym[modal]')")
    from standins import publish
    from standins.modal import ModalStandIn

    from deepgym.registration import register
    from deepgym.sandbox.modal import ModalProvider

    standin = ModalStandIn().start()
    try:
        with environment(MODAL_SERVER_URL=standin.url, MODAL_TOKEN_ID=standin.token_id,
                         MODAL_TOKEN_SECRET=standin.token_secret):
            registrar = ModalProvider()
            try:
                register("modal", ["shell_organise_files"],
                         publish(standin, ["base", "shell_organise_files"], scratch / "pushed.json"), provider=registrar)
            finally:
                registrar.close()
            yield lambda: sum(1 for name, _ in standin.requests if name == "SandboxCreateV2")
    finally:
        standin.stop()


@pytest.mark.parametrize("mode", ["apple", "modal"])
def test_the_tools_mode_runs_the_episode_in_that_modes_sandboxes(mode, tmp_path):
    """``mode:`` in the tool config is any mode with a sandbox: here Apple's (a fake CLI that delegates to
    docker) and Modal's (the stand-in of its API); the reference episode earns 1 there."""
    row = dataset_row(tmp_path, "shell_organise_files", variant=1)
    actions = action_sequences(load_environment("shell_organise_files"), "reference")[1]
    server = Server(*map(call, actions), "All files are sorted.")
    config = tmp_path / "tool.yaml"
    config.write_text(Path(dgverl.session_tool_config_path()).read_text().replace("mode: docker", f"mode: {mode}"))
    with sandboxes_of(mode, tmp_path) as made:
        before = made()
        try:
            output = run_episode(session_config(use_v1=True), row, server, tool_config=str(config))
        finally:
            dgverl.reset_clients()
        assert made() == before + 1, f"the episode ran in one sandbox of {mode}'s"
    assert output.reward_score == 1.0, output.extra_fields["reward_extra_info"]
    assert episode_count() == 0
