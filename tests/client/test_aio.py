"""The async API (deepgym.aio): the same verdicts as the sync one, an event loop that never blocks, and no
thread for a sample that waits for admission.

The admission tests need no Docker: real file locks, real threads and coroutines. The others judge in real
containers of coin_change and a session environment.
"""

from __future__ import annotations

import asyncio
import threading
import time

import pytest

from support import ensure_images, fenced, solution
from deepgym import DeepGym, NoVerdictError
from deepgym import admission as admission_module
from deepgym.admission import Admission, AdmissionTimeout, HeldSlot
from deepgym.authoring.replay import action_sequences
from deepgym.sandbox.ready import REFILLERS
from deepgym.environments import load_environment

RIGHT = fenced(solution("coin_change", "reference"))
WRONG = fenced(solution("coin_change", "wrong_impossible_is_zero"))


def test_async_waiters_share_the_bound_with_threads_and_hold_no_thread(tmp_path):
    """50 coroutines and 4 threads take 2 slots in turns: never more than 2 held at once, every one served,
    and the coroutines' waits add no thread."""
    admission = Admission(bound=2, directory=tmp_path)
    held, peak, threads_peak = [0], [0], [0]
    count = threading.Lock()

    def hold(seconds: float) -> None:
        with count:
            held[0] += 1
            peak[0] = max(peak[0], held[0])
        time.sleep(seconds)
        with count:
            held[0] -= 1

    def thread_worker() -> None:
        for _ in range(3):
            with admission.slot():
                hold(0.01)

    async def coroutine_worker() -> None:
        slot = await admission.aacquire()
        try:
            hold(0.002)
            await asyncio.sleep(0.005)
        finally:
            slot.release()

    async def main() -> None:
        before = threading.active_count()
        threads = [threading.Thread(target=thread_worker) for _ in range(4)]
        for thread in threads:
            thread.start()
        jobs = [asyncio.ensure_future(coroutine_worker()) for _ in range(50)]
        while not all(job.done() for job in jobs):
            threads_peak[0] = max(threads_peak[0], threading.active_count() - before)
            await asyncio.sleep(0.001)
        await asyncio.gather(*jobs)
        for thread in threads:
            thread.join()

    asyncio.run(main())
    assert peak[0] <= 2
    assert threads_peak[0] <= 4, "only the 4 threads of the test itself"
    assert admission.acquire(timeout_s=1).index in (0, 1)


def test_a_cancelled_or_timed_out_async_wait_takes_nothing(tmp_path, monkeypatch):
    admission = Admission(bound=1, directory=tmp_path)
    taken = admission.acquire()

    async def main() -> None:
        waiter = asyncio.ensure_future(admission.aacquire())
        await asyncio.sleep(0.05)
        waiter.cancel()
        with pytest.raises(asyncio.CancelledError):
            await waiter
        with pytest.raises(AdmissionTimeout):
            await admission.aacquire(timeout_s=0.05)
        # A release in this process wakes the async head: with its polls an hour apart, only the wake can hand
        # it the slot before its own deadline (then it would raise AdmissionTimeout).
        monkeypatch.setattr(admission_module, "CANCEL_POLL_S", 3600.0)
        releaser = threading.Timer(0.05, taken.release)
        releaser.start()
        slot = await admission.aacquire(timeout_s=60)
        slot.release()

    asyncio.run(main())
    with admission.slot(timeout_s=1):  # nothing kept the one slot
        pass


def test_a_slot_handed_to_the_judging_path_is_the_samples_own(tmp_path):
    """The async path hands its slot to the worker thread as an argument: the judging path's slot() is then that
    slot, not a second one (with a bound of 1 a second wait would never end)."""
    admission = Admission(bound=1, directory=tmp_path)
    slot = admission.acquire()
    try:
        with HeldSlot(slot).slot(timeout_s=0.2) as inner:
            assert inner is slot
        with pytest.raises(AdmissionTimeout):
            admission.acquire(timeout_s=0.1)
    finally:
        slot.release()


@pytest.mark.docker
def test_200_concurrent_aruns_at_bound_2_keep_threads_few_and_the_loop_responsive():
    """200 samples offered at once at an admission bound of 2: every verdict is right, at most 2 threads judge
    (plus the prewarm refillers), and nothing blocking runs on the event loop's thread.

    "Nothing blocking" is checked by thread identity, not by the clock: neither the judging path nor a blocking
    admission wait is ever entered on the loop's thread. A heartbeat coroutine on the same loop also keeps
    beating; its bound only catches a loop stalled for whole samples, far above what a loaded 2-core machine
    delays a 10 ms sleep by (0.7 s was seen in CI)."""
    ensure_images("coin_change")
    responses = [RIGHT if index % 2 == 0 else WRONG for index in range(200)]
    gaps: list[float] = []
    threads: list[list[str]] = []  # the names of the threads that were not there before, at each beat
    blocking_on_loop: list[str] = []

    async def heartbeat(stop: asyncio.Event) -> None:
        last = time.monotonic()
        while not stop.is_set():
            await asyncio.sleep(0.01)
            now = time.monotonic()
            gaps.append(now - last)
            last = now
            threads.append(sorted(t.name for t in threading.enumerate() if t.ident not in before))

    def watched(name: str, call):
        def wrapper(*args, **kwargs):
            if threading.get_ident() == loop_thread:
                blocking_on_loop.append(name)
            return call(*args, **kwargs)
        return wrapper

    async def main() -> list:
        stop = asyncio.Event()
        beat = asyncio.ensure_future(heartbeat(stop))
        try:
            return await asyncio.gather(*(gym.arun("coin_change", response) for response in responses),
                                        return_exceptions=True)
        finally:
            stop.set()
            await beat

    loop_thread = threading.get_ident()  # asyncio.run runs its loop on the calling thread
    before = {t.ident for t in threading.enumerate()}
    with DeepGym(mode="docker", max_sandboxes=2, max_parallel=2) as gym:
        gym.judge = watched("DeepGym.judge", gym.judge)
        gym.admission.acquire = watched("Admission.acquire", gym.admission.acquire)
        gym.admission.slot = watched("Admission.slot", gym.admission.slot)
        outcomes = asyncio.run(main())
    assert [getattr(o, "score", o) for o in outcomes] == [1.0 if r is RIGHT else 0.0 for r in responses]
    assert {o.error_type for o in outcomes[1::2]} == {"wrong_answer"}
    assert blocking_on_loop == [], f"blocking calls on the event loop's thread: {sorted(set(blocking_on_loop))}"
    # This client's threads: its bounded executor's and the prewarm pool's makers and removers. Any other new thread
    # (a library's, a finalizer's of an earlier test in the same process) is not this client's, but it too must not
    # grow with the 200 samples.
    most = max(threads, key=len)
    assert sum(name.startswith("deepgym-async-samples") for name in most) <= 2, most
    assert sum(name.startswith("deepgym-prewarm") for name in most) <= 2 * REFILLERS, most
    assert len(most) <= 2 + 2 * REFILLERS + 2, f"threads that were not there before: {most}"
    assert len(gaps) > 100, "the heartbeat kept beating while the samples ran"
    assert max(gaps) < 5.0, f"the event loop was held up for {max(gaps):.3f} s"


@pytest.mark.docker
def test_the_async_twins_give_the_sync_outcomes():
    ensure_images("coin_change")

    async def main(gym: DeepGym):
        batch = await gym.arun_batch("coin_change", [RIGHT, WRONG, "no code here"], max_parallel=2)
        verdict = await gym.arun("coin_change", RIGHT, variant=0, reasoning="auto")
        return batch, verdict

    with DeepGym(mode="docker", max_sandboxes=2) as gym:
        batch, verdict = asyncio.run(main(gym))
        assert [e.error_type for e in batch] == [e.error_type for e in gym.run_batch("coin_change",
                                                                                     [RIGHT, WRONG, "no code here"])]
    assert [e.score for e in batch] == [1.0, 0.0, 0.0] and batch[2].error_type == "no_code_block"
    assert verdict.passed
    with pytest.raises(ValueError, match="variant 999 is out of range"):
        asyncio.run(gym.arun("coin_change", RIGHT, variant=999))

    async def dead_engine():
        with DeepGym(mode="docker", docker_host="unix:///nonexistent/deepgym-aio.sock") as dead:
            return await dead.arun("coin_change", RIGHT)

    with pytest.raises(NoVerdictError) as failure:
        asyncio.run(dead_engine())
    assert failure.value.error_type == "daemon_unavailable"


@pytest.mark.docker
def test_an_async_session_scores_an_episode():
    ensure_images("shell_find_largest")
    env = load_environment("shell_find_largest")
    actions = action_sequences(env, "reference")[0]

    async def episode(gym: DeepGym):
        async with gym.asession(env, variant=0) as session:
            first = await session.start()
            for action in actions:
                if (await session.step(action)).done:
                    break
            return first, await session.score(), session.done

    with DeepGym(mode="docker") as gym:
        first, verdict, done = asyncio.run(episode(gym))
    assert "working directory" in first.text
    assert verdict.score == 1.0 and done
