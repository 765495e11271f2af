"""Chaos, for real, on an engine of this module's own (conftest.py): dockerd restarted and containerd killed
mid-batch, the engine's data root full, a registry that never answers, the admission folder deleted and the
wall clock stepped back under a running client. Each ends with no wrong 0 (every verdict is the one its
answer deserves, every other sample has no verdict), no hang (pyproject.toml's per-test timeout), and a log
line that names what happened; and the same client judges the next samples right, without being rebuilt."""

from __future__ import annotations

import contextlib
import shutil
import subprocess
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

import pytest

from deepgym import DeepGym
from deepgym.pushed import PushedImage, write_manifest
from support import HangingRegistry, fenced, solution

from .conftest import BreakableEngine

pytestmark = pytest.mark.docker
REFERENCE = solution("coin_change", "reference")
WRONG = "def coin_change(coins, amount):\n    return -1\n"
# A right and a wrong answer that take seconds, so the engine can break while some are in play.
SLOW_RIGHT = (REFERENCE + "\nimport time\n_fast = coin_change\ndef coin_change(coins, amount):\n"
              "    time.sleep(0.05)\n    return _fast(coins, amount)\n")
SLOW_WRONG = "import time\ndef coin_change(coins, amount):\n    time.sleep(2)\n    return -1\n"
INFRA = {"daemon_unavailable", "sandbox_lost", "sandbox_start_failure", "verifier_timeout"}


def slow_mix(count: int) -> list[tuple[str, float]]:
    return [(SLOW_RIGHT, 1.0) if i % 2 == 0 else (SLOW_WRONG, 0.0) for i in range(count)]


def truthful(outcomes: Sequence, expected: Sequence[float]) -> tuple[int, set[str]]:
    """Check that no outcome lies: a verdict scores what its answer deserves, and every other outcome is a
    no-verdict of the infrastructure's. Returns how many had a verdict, and the no-verdict causes."""
    causes = set()
    for outcome, score in zip(outcomes, expected, strict=True):
        if outcome.has_verdict:
            assert outcome.score == score, f"a wrong verdict: {outcome.to_dict()}"
        else:
            causes.add(outcome.error_type)
    assert causes <= INFRA, causes
    return sum(o.has_verdict for o in outcomes), causes


def right_again(gym: DeepGym) -> None:
    """The same client judges a right and a wrong answer right."""
    batch = gym.run_batch("coin_change", [fenced(REFERENCE), fenced(WRONG)])
    assert [o.score for o in batch] == [1.0, 0.0], [o.to_dict() for o in batch]


def logged(log: pytest.LogCaptureFixture, *parts: str) -> str:
    """The first deepgym log line holding every one of ``parts`` (case-insensitive); fails if none does."""
    for record in log.records:
        line = record.getMessage()
        if all(part.lower() in line.lower() for part in parts):
            return line
    raise AssertionError(f"no log line holds {parts}: {[r.getMessage()[:200] for r in log.records]}")


def in_play(gym: DeepGym, samples: list[tuple[str, float]], pool: ThreadPoolExecutor) -> list[Future]:
    """Submit ``samples`` and wait until the first ones are judged, so that others are running."""
    futures = [pool.submit(gym.judge, "coin_change", fenced(code)) for code, _ in samples]
    deadline = time.monotonic() + 240
    while sum(f.done() for f in futures) < 2:
        assert time.monotonic() < deadline, "no sample was judged on the chaos engine"
        time.sleep(0.05)
    return futures


def broken_mid_batch(gym: DeepGym, samples: list[tuple[str, float]], breaking: Callable[[], object],
                     log: pytest.LogCaptureFixture) -> tuple[int, set[str]]:
    """Judge ``samples``, two at a time, calling ``breaking()`` once the first are judged; check that no outcome
    lies and that each cause of a lost sample was logged. Returns how many were judged, and the causes."""
    with ThreadPoolExecutor(max_workers=2) as pool:
        futures = in_play(gym, samples, pool)
        breaking()
        outcomes = [f.result() for f in futures]
    judged, causes = truthful(outcomes, [score for _, score in samples])
    assert gym.monitor.snapshot()["no_verdict"] == len(samples) - judged
    for cause in causes:
        logged(log, f"no verdict ({cause}) for coin_change")
    return judged, causes


def test_dockerd_restarted_mid_batch(chaos_engine: BreakableEngine, deepgym_log):
    with DeepGym(mode="docker", docker_host=chaos_engine.host, max_parallel=2) as gym:
        judged, causes = broken_mid_batch(gym, slow_mix(8), chaos_engine.stop, deepgym_log)
        assert judged < 8 and causes, "the restart cost no sample: nothing was in play"
        chaos_engine.start()
        right_again(gym)


def test_containerd_killed_mid_batch(chaos_engine: BreakableEngine, deepgym_log):
    with DeepGym(mode="docker", docker_host=chaos_engine.host, max_parallel=2) as gym:
        broken_mid_batch(gym, slow_mix(6), chaos_engine.kill_containerd, deepgym_log)
        deadline = time.monotonic() + 120
        while not chaos_engine.answers():  # dockerd restarts its containerd by itself
            assert time.monotonic() < deadline, "dockerd did not bring containerd back"
            time.sleep(0.5)
        right_again(gym)
    assert "containerd" in (chaos_engine.folder / "dockerd.log").read_text().lower()


def test_data_root_full(chaos_engine: BreakableEngine, deepgym_log):
    filler = chaos_engine.data / "filler"
    with DeepGym(mode="docker", docker_host=chaos_engine.host, max_parallel=2) as gym:
        right_again(gym)
        try:
            subprocess.run(["fallocate", "-l", str(chaos_engine.free_bytes() - (16 << 20)), str(filler)], check=True)
            with contextlib.suppress(OSError), open(filler, "ab", buffering=0) as topped:
                while True:  # whatever fallocate's rounding left, until ENOSPC
                    topped.write(b"\0" * 4096)
            assert chaos_engine.free_bytes() < 64 * 1024
            batch = gym.run_batch("coin_change", [fenced(REFERENCE), fenced(WRONG)] * 2)
            judged, causes = truthful(batch, [1.0, 0.0] * 2)
            assert causes, "a full data root judged everything: the test did not fill it"
            for cause in causes:  # the engine's own words vary with the step that met the full disk: "no space
                # left on device", or a chown of an overlay folder whose mkdir had failed ("no such file")
                logged(deepgym_log, f"no verdict ({cause}) for coin_change")
        finally:
            filler.unlink(missing_ok=True)
        right_again(gym)


@pytest.fixture
def hanging_registry() -> Iterator[HangingRegistry]:
    registry = HangingRegistry()
    try:
        yield registry
    finally:
        registry.close()


def test_registry_that_hangs_on_pull(chaos_engine: BreakableEngine, hanging_registry: HangingRegistry,
                                     tmp_path: Path, deepgym_log):
    repository = f"127.0.0.1:{hanging_registry.port}/deepgym-coin_change"
    pinned = PushedImage(repository, "0" * 16, "sha256:" + "0" * 64)
    manifest = tmp_path / "images.json"
    write_manifest(manifest, {"coin_change": pinned})
    # Someone pulls from the registry on the same engine meanwhile: the pull hangs, the engine goes on.
    pulling = subprocess.Popen(["docker", "--host", chaos_engine.host, "pull", pinned.ref],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 60
        while not hanging_registry.held:
            assert time.monotonic() < deadline, "the engine never reached the registry"
            time.sleep(0.05)
        with DeepGym(mode="docker", docker_host=chaos_engine.host, image_manifest=manifest) as pinned_gym:
            outcome = pinned_gym.judge("coin_change", fenced(REFERENCE))  # never pulls: no verdict at once
            assert not outcome.has_verdict and outcome.error_type == "image_missing", outcome.to_dict()
            line = logged(deepgym_log, "no verdict (image_missing)", pinned.ref, "docker pull")
            assert "coin_change" in line
        with DeepGym(mode="docker", docker_host=chaos_engine.host) as gym:
            right_again(gym)
        assert pulling.poll() is None, "the pull from a registry that never answers ended"
    finally:
        pulling.kill()
        pulling.wait()


def test_admission_folder_deleted_under_a_running_client(chaos_engine: BreakableEngine, tmp_path: Path,
                                                         monkeypatch: pytest.MonkeyPatch, deepgym_log):
    folder = tmp_path / "admission"
    monkeypatch.setenv("DEEPGYM_ADMISSION_DIR", str(folder))
    with DeepGym(mode="docker", docker_host=chaos_engine.host, max_parallel=2) as gym:
        right_again(gym)
        shutil.rmtree(folder)
        batch = gym.run_batch("coin_change", [fenced(REFERENCE), fenced(WRONG)] * 2)
        assert [o.score for o in batch] == [1.0, 0.0] * 2, [o.to_dict() for o in batch]
        logged(deepgym_log, "admission folder", str(folder), "vanished", "made it again")
        assert (folder / gym.admission.key).is_dir()


def test_wall_clock_stepped_back(chaos_engine: BreakableEngine, monkeypatch: pytest.MonkeyPatch, deepgym_log):
    """The machine's clock is shared: this steps the wall clock of this process only (``time.time``, which the
    client's monitor reads through its ``wall`` attribute), an hour back, mid-batch. It proves that nothing of
    deepgym's on the host side times a sample by the wall clock; it does not prove the same of the engine,
    containerd or the runner in the container, which read the kernel's clock (they time by their monotonic
    clocks too, which no step of the wall clock moves)."""
    offset = [0.0]
    real = time.time
    monkeypatch.setattr(time, "time", lambda: real() + offset[0])
    with DeepGym(mode="docker", docker_host=chaos_engine.host, max_parallel=2) as gym:
        judged, _ = broken_mid_batch(gym, slow_mix(6), lambda: offset.__setitem__(0, -3600.0), deepgym_log)
        assert judged == 6
        assert gym.monitor.clock_steps == 1
        logged(deepgym_log, "wall clock stepped back by 3600 s", "monotonic")
        right_again(gym)
