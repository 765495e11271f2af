"""Episodes over Ray on the two-node cluster (tests/ray_cluster.py), for a caller whose DOCKER_HOST points nowhere:
each episode lives on one node, in an actor holding its container; every step goes there (an async episode's step
awaited on the actor's ref, holding no thread); the verdict names the node; the container is removed when the
episode ends, and when the caller dies mid-episode (the actor ends with its owner, and the node's reaper removes
its container)."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time

import pytest

from deepgym import DeepGym, NoVerdictError
from deepgym.authoring.replay import action_sequences
from deepgym.environments import load_environment
from deepgym.sandbox.ray.session import RaySandbox
from support import ROOT

from ray_cluster import FIRST_ENGINE, SHELL_ENV

pytestmark = [pytest.mark.ray, pytest.mark.docker, pytest.mark.timeout(900)]


def exists(cluster, second_engine, node: str, container: str) -> bool:
    """Whether ``container`` still exists on the engine of ``node`` (a Ray node id)."""
    argv = ("inspect", "--type", "container", container)
    if node == cluster.nodes["b"].id:
        return second_engine.docker(*argv).returncode == 0
    return subprocess.run(["docker", "--host", FIRST_ENGINE, *argv], capture_output=True).returncode == 0


def gone(cluster, second_engine, node: str, container: str, timeout_s: float = 120.0) -> bool:
    deadline = time.monotonic() + timeout_s
    while exists(cluster, second_engine, node, container):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.5)
    return True


def test_an_episode_lives_on_one_node_scores_right_and_leaves_no_container(caller, second_engine):
    actions = action_sequences(load_environment(SHELL_ENV), "reference")[0]
    nodes = {node.id for node in caller.nodes.values()}
    seen = []
    with DeepGym(mode="ray") as gym:
        for steps in (actions, ["ls"]):  # the reference, then an agent that fixes nothing
            with gym.session(SHELL_ENV) as session:
                assert "Your working directory is /tmp/work" in session.start().text
                box = session._sandbox
                assert box.node in nodes and box.id and exists(caller, second_engine, box.node, box.id)
                for action in steps:
                    session.step(action)
                seen.append((session.score(), box.node, box.id))
    (right, right_node, right_box), (wrong, wrong_node, wrong_box) = seen
    assert right.score == 1.0 and right.passed and right.node == right_node, right.to_dict()
    assert right.image_id.startswith("sha256:") and right.runtime == "ray"
    assert wrong.score == 0.0 and not wrong.passed and wrong.node == wrong_node, wrong.to_dict()
    assert gone(caller, second_engine, right_node, right_box) and gone(caller, second_engine, wrong_node, wrong_box)


def test_an_episode_whose_actor_is_lost_mid_episode_has_no_verdict(caller, second_engine):
    """The actor dies as its node would under it (its worker is killed): the next step ends the episode with no
    verdict, never a 0, and the node's reaper removes the container."""
    import ray

    with DeepGym(mode="ray") as gym, gym.session(SHELL_ENV) as session:
        session.start()
        session.step("ls")
        box = session._sandbox
        ray.kill(box._actor, no_restart=True)
        ended = session.step("ls")
        assert ended.done and "the sandbox failed" in ended.observation.text
        with pytest.raises(NoVerdictError) as lost:
            session.score()
    assert lost.value.error_type == "sandbox_lost" and box.node in lost.value.reason, lost.value
    assert gone(caller, second_engine, box.node, box.id)


def agent_commands(monkeypatch) -> list[tuple[str, str]]:
    """Each agent command sent to an episode's actor, as (how it was sent, the thread that sent it): ``exec``
    holds the thread until the node answers, ``aexec`` awaits the actor's ref on the event loop."""
    sent: list[tuple[str, str]] = []
    exec_, aexec = RaySandbox.exec, RaySandbox.aexec

    def is_agents(argv) -> bool:
        return list(argv[:2]) == ["bash", "-c"] and argv[2].startswith("exec 2>&1\n")

    def recorded_exec(self, argv, options):
        if is_agents(argv):
            sent.append(("exec", threading.current_thread().name))
        return exec_(self, argv, options)

    async def recorded_aexec(self, argv, options):
        if is_agents(argv):
            sent.append(("aexec", threading.current_thread().name))
        return await aexec(self, argv, options)

    monkeypatch.setattr(RaySandbox, "exec", recorded_exec)
    monkeypatch.setattr(RaySandbox, "aexec", recorded_aexec)
    return sent


def test_an_async_episodes_steps_are_awaited_on_the_actors_refs_with_the_sync_rules(caller, monkeypatch):
    """Every step of an episode on asession is awaited on the event loop's own thread: none waits in a thread of
    the client. The rules are step()'s: an invalid action is a step that ran nothing, the verdicts are right."""
    actions = action_sequences(load_environment(SHELL_ENV), "reference")[0]
    sent = agent_commands(monkeypatch)

    async def episode(gym, steps):
        async with gym.asession(SHELL_ENV) as session:
            await session.start()
            invalid = await session.step(["not", "a", "string"])
            for action in steps:
                await session.step(action)
            return invalid, await session.score(), session.session.steps

    with DeepGym(mode="ray") as gym:
        (invalid, right, taken), (_, wrong, _) = [asyncio.run(episode(gym, steps)) for steps in (actions, ["ls"])]
    assert "invalid action" in invalid.observation.text and not invalid.done and taken == len(actions) + 1
    assert right.score == 1.0 and right.passed and right.node, right.to_dict()
    assert wrong.score == 0.0 and not wrong.passed, wrong.to_dict()
    assert sent and set(sent) == {("aexec", threading.main_thread().name)}, sent
    assert len(sent) == len(actions) + 1


def test_an_async_episode_whose_actor_is_lost_mid_step_has_no_verdict(caller, second_engine):
    """The actor dies while an awaited step runs on it (its worker killed, as its node would die under it): the
    step ends the episode, and its outcome is no verdict, never a 0."""
    import ray

    async def episode(gym):
        async with gym.asession(SHELL_ENV) as session:
            await session.start()
            box = session.session._sandbox
            stepping = asyncio.ensure_future(session.step("sleep 60"))
            await asyncio.sleep(3)
            ray.kill(box._actor, no_restart=True)
            ended = await stepping
            try:
                await session.score()
            except NoVerdictError as lost:
                return box, ended, lost
            raise AssertionError("a lost actor's episode was scored")

    with DeepGym(mode="ray") as gym:
        box, ended, lost = asyncio.run(episode(gym))
    assert ended.done and "the sandbox failed" in ended.observation.text, ended
    assert lost.error_type == "sandbox_lost" and box.node in lost.reason, lost
    assert gone(caller, second_engine, box.node, box.id)


CALLER = textwrap.dedent(f"""
    import sys
    from deepgym import DeepGym

    session = DeepGym(mode="ray").session({SHELL_ENV!r})
    session.start()
    session.step("echo started > note.txt")
    print(session._sandbox.node, session._sandbox.id, flush=True)
    sys.stdin.read()
""")


def test_a_caller_killed_mid_episode_leaves_no_container(caller, second_engine):
    environment = {**os.environ, "PYTHONPATH": f"{ROOT}:{ROOT / 'tests'}"}
    with subprocess.Popen([sys.executable, "-c", CALLER], env=environment, stdin=subprocess.PIPE,
                          stdout=subprocess.PIPE, text=True) as process:
        try:
            line = process.stdout.readline().split()
            assert len(line) == 2, f"the caller gave no episode (exit status {process.poll()})"
            node, container = line
            assert exists(caller, second_engine, node, container)
        finally:
            process.send_signal(signal.SIGKILL)
    assert gone(caller, second_engine, node, container), f"{container} outlived its caller on node {node}"
