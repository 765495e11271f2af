"""mode="ray" on a real two-node Ray cluster on this machine (tests/ray_cluster.py): node a on this machine's
engine, node b on the second engine, and a caller whose DOCKER_HOST points nowhere. Right answers 1.0 and wrong
ones 0 from both nodes, each verdict naming its node; a node without the caller's image says so, and pulls a
pushed digest it lacks; the whole hostile suite gets its verdicts; a node killed mid-batch costs only no-verdicts,
and the samples it had not started are judged on the other node. The node kill comes last (tests/ray_cluster.py
orders it so): the cluster has one node after it."""

from __future__ import annotations

import asyncio
import io
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from deepgym import DeepGym, NoVerdictError
from deepgym.images import content_hash, image_name
from deepgym.push import push
from deepgym.pushed import PushedImage, write_manifest
from support import ROOT, ensure_images, escaped_processes, fenced, solution

from ray_cluster import FIRST_ENGINE

pytestmark = [pytest.mark.ray, pytest.mark.docker, pytest.mark.timeout(900)]

RIGHT = fenced(solution("coin_change", "reference"))
WRONG = fenced(solution("coin_change", "wrong_greedy"))
# Right, and about 17 s in play (57 cases, 0.3 s asleep in each, well inside every limit).
SLOW = fenced("import time\n\n" + solution("coin_change", "reference").replace(
    "    best = ", "    time.sleep(0.3)\n    best = ", 1))


def test_right_and_wrong_answers_are_judged_on_both_nodes_and_name_their_node(caller):
    """run_batch awaits the samples on an event loop of its own: no thread of the client waits for one."""
    with DeepGym(mode="ray") as gym:
        batch = gym.run_batch("coin_change", [RIGHT, WRONG] * 4, max_parallel=4)
        assert not gym._executors and not [t for t in threading.enumerate() if t.name.startswith("deepgym")]
    assert [entry.score for entry in batch] == [1.0, 0.0] * 4, batch.summary()
    assert {entry.node for entry in batch} == {caller.nodes["a"].id, caller.nodes["b"].id}
    assert all(entry.image_id.startswith("sha256:") and entry.image_status == "current" for entry in batch)
    assert all(entry.runtime == "ray" and entry.to_dict()["node"] == entry.node for entry in batch)


def test_the_async_face_awaits_rays_refs_and_verls_compute_score_judges_through_ray(caller):
    """arun and arun_batch are coroutines from start to end: every verdict right, and the client never made the
    executor whose threads would wait for samples."""
    from deepgym.integrations.verl import compute_score, reset_clients

    async def main(gym):
        one = await gym.arun("coin_change", RIGHT)
        return one, await gym.arun_batch("coin_change", [RIGHT, WRONG] * 3)

    with DeepGym(mode="ray") as gym:
        verdict, batch = asyncio.run(main(gym))
        assert not gym._executors, gym._executors
    assert verdict.score == 1.0 and verdict.node in {node.id for node in caller.nodes.values()}
    assert [entry.score for entry in batch] == [1.0, 0.0] * 3, batch.summary()
    try:
        scored = compute_score("coin_change", WRONG, extra_info={"environment": "coin_change"}, mode="ray")
    finally:
        reset_clients()
    assert scored["score"] == 0.0 and scored["error_type"] == "wrong_answer"


def test_a_node_without_the_callers_image_gives_image_missing_naming_itself(caller, monkeypatch, second_engine):
    monkeypatch.setenv("DEEPGYM_RAY_RESOURCE", "deepgym_b")
    answer = fenced(solution("two_sum", "reference"))
    with DeepGym(mode="ray") as gym:
        missing = gym.judge("two_sum", answer)
        assert isinstance(missing, NoVerdictError) and missing.error_type == "image_missing", missing
        assert f"Ray node {caller.nodes['b'].id} has no image {image_name('two_sum')}" in missing.reason
        # The name there, on another image: still not the image the caller resolved.
        assert second_engine.docker("tag", image_name("coin_change"), image_name("two_sum")).returncode == 0
        try:
            other = gym.judge("two_sum", answer)
        finally:
            second_engine.docker("rmi", image_name("two_sum"))
        assert isinstance(other, NoVerdictError) and other.error_type == "image_missing", other
        assert caller.nodes["b"].id in other.reason and repr(content_hash("two_sum")) in other.reason
        assert repr(content_hash("coin_change")) in other.reason
    monkeypatch.setenv("DEEPGYM_RAY_RESOURCE", "deepgym_a")
    with DeepGym(mode="ray") as gym:
        judged = gym.run("two_sum", answer)
    assert judged.score == 1.0 and judged.node == caller.nodes["a"].id


@pytest.fixture
def pushed_two_sum(docker_services, tmp_path) -> tuple[Path, PushedImage]:
    """two_sum's image pushed to tests/registry's open registry (before the caller's DOCKER_HOST points nowhere):
    the manifest and the pushed image."""
    address = f"127.0.0.1:{docker_services.port_for('open', 5000)}"
    manifest = tmp_path / "deepgym-images.json"
    return manifest, push(address, ["two_sum"], manifest=manifest, log=io.StringIO())["two_sum"]


def test_a_node_pulls_the_manifests_digest_it_lacks_and_judges_with_it(pushed_two_sum, caller, monkeypatch,
                                                                        second_engine):
    """Node b never had two_sum's image: given the caller's pushed-images manifest, it pulls the digest from the
    registry and judges with those bytes; a digest the registry does not hold is image_missing naming the node."""
    monkeypatch.setenv("DEEPGYM_RAY_RESOURCE", "deepgym_b")
    manifest, pushed = pushed_two_sum
    assert second_engine.docker("image", "inspect", pushed.ref).returncode != 0
    answer = fenced(solution("two_sum", "reference"))
    try:
        with DeepGym(mode="ray", image_manifest=manifest) as gym:
            judged = gym.run("two_sum", answer)
        assert judged.score == 1.0 and judged.node == caller.nodes["b"].id, judged
        assert judged.provenance["image_digest"] == pushed.digest and judged.provenance["image_ref"] == pushed.ref
        assert second_engine.docker("image", "inspect", pushed.ref).returncode == 0, "pulled by its digest"
        unknown = PushedImage(pushed.repository, pushed.tag, "sha256:" + "0" * 64)
        write_manifest(manifest, {"two_sum": unknown})
        with DeepGym(mode="ray", image_manifest=manifest) as gym:
            missing = gym.judge("two_sum", answer)
        assert isinstance(missing, NoVerdictError) and missing.error_type == "image_missing", missing
        assert f"Ray node {caller.nodes['b'].id} lacks {unknown.ref} and could not pull it" in missing.reason
    finally:
        second_engine.docker("image", "rm", "-f", pushed.ref)
        subprocess.run(["docker", "--host", FIRST_ENGINE, "image", "rm", "-f", pushed.ref], capture_output=True)


@pytest.fixture
def hostile_images() -> list:
    """The hostile suite's attacks, their images built on node a's engine before the caller's DOCKER_HOST points
    nowhere."""
    sys.path.insert(0, str(ROOT / "tests" / "hostile"))
    from attacks import ATTACKS

    ensure_images(*sorted({attack.env for attack in ATTACKS}))
    return ATTACKS


def test_the_whole_hostile_suite_gets_its_verdicts_through_ray(hostile_images, caller, monkeypatch):
    """Every attack of tests/hostile/attacks.py through Ray, each scored 0 with its expected error type wherever
    Ray placed it, and nothing of the submissions' uid left on the host. coin_change's are spread over both nodes;
    the other environments' images are on node a's engine only, so their attacks go there."""
    nodes = {node.id for node in caller.nodes.values()}
    for resource, attacks in (("deepgym_sandbox", [a for a in hostile_images if a.env == "coin_change"]),
                              ("deepgym_a", [a for a in hostile_images if a.env != "coin_change"])):
        monkeypatch.setenv("DEEPGYM_RAY_RESOURCE", resource)
        with DeepGym(mode="ray") as gym, ThreadPoolExecutor(4) as pool:
            outcomes = list(zip(attacks, pool.map(lambda attack: gym.judge(attack.env, attack.response), attacks)))
        for attack, outcome in outcomes:
            assert outcome.has_verdict, (attack.id, outcome.error_type, outcome.reason[:2000])
            assert not outcome.passed and outcome.score == 0.0 and outcome.error_type in attack.expected, \
                (attack.id, outcome.to_dict())
            assert outcome.node in nodes
        if resource == "deepgym_sandbox":
            assert {outcome.node for _, outcome in outcomes} == nodes, "coin_change's attacks ran on both nodes"
    assert escaped_processes() == []


def in_play_on(engine, timeout_s: float = 120.0) -> str:
    """The container of the second engine in which a submission's process (uid 10000) runs, once there is one."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        for container in engine.docker("ps", "-q", "--filter", "label=deepgym").stdout.split():
            listed = engine.docker("top", container, "-eo", "uid,pid").stdout.splitlines()[1:]
            if "10000" in [line.split()[0] for line in listed if line.split()]:
                return container
        time.sleep(0.1)
    raise AssertionError("no submission came into play on node b")


def test_a_node_killed_mid_batch_costs_only_no_verdicts(caller, second_engine):
    outcomes = []
    with DeepGym(mode="ray") as gym:
        batch = threading.Thread(target=lambda: outcomes.extend(gym.run_batch("coin_change", [SLOW] * 6,
                                                                              max_parallel=6)))
        batch.start()
        in_play_on(second_engine)
        killed = caller.kill(caller.nodes["b"])
        batch.join(timeout=600)
    assert killed and not batch.is_alive() and len(outcomes) == 6
    lost = [entry for entry in outcomes if not entry.has_verdict]
    judged = [entry for entry in outcomes if entry.has_verdict]
    assert lost and all(entry.error_type == "sandbox_lost" for entry in lost), [e.to_dict() for e in lost]
    assert all(caller.nodes["b"].id in entry.reason for entry in lost)
    assert judged and all(entry.score == 1.0 for entry in judged), [e.to_dict() for e in judged]
    assert {entry.node for entry in judged} == {caller.nodes["a"].id}  # b's took 17 s: none ended before the kill


test_a_node_killed_mid_batch_costs_only_no_verdicts.kills_a_node = True  # type: ignore[attr-defined]
