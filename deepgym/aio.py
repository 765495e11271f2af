"""The async API: :meth:`DeepGym.arun`, ``ajudge``, ``arun_batch`` and ``asession``, for callers that live on
an event loop (verl's agent loops and reward workers, an async trainer or server).

They take the same arguments as their sync twins (keyword options are forwarded unchanged) and give the same
outcomes, because they run the same code: the sync :meth:`DeepGym.judge` decides every verdict, and this
module only decides *where* it runs. How a sample spends its time:

1. **Nothing to run.** A response without a submission (no code block, no diff) is judged at once on the
   event loop: nothing runs, so it takes no slot and no thread.
2. **Waiting for admission** (:mod:`deepgym.admission`): a coroutine, never a thread. The waiters of one event
   loop queue behind a lock; only the first polls the host-wide slot files, with asyncio sleeps, and a slot
   freed in this process wakes it at once. Cancelling a waiting task takes nothing away from anyone.
3. **Admitted**: the sample runs :meth:`DeepGym.judge` (the blocking docker-py calls) in a worker thread of
   the client's bounded executor, which has as many threads as the client's admission bound, so at most
   that many threads judge at once however many samples wait. The slot travels with the sample into the
   thread (:meth:`~deepgym.admission.Admission.holding`), and the judging path uses it instead of waiting
   for another. Cancelling an admitted sample's task stops the wait for its outcome; its sandbox finishes
   within its deadline in the background, and its slot is freed then.

A session's calls that do work on the host (start, each step, score) wait for their admission slot the same
way, as a coroutine, and then run in a second bounded executor of the client (:data:`SESSION_WORKERS` threads
at least, or ``max_parallel``, or the admission bound), with the slot and how long it took handed to the
session (:func:`deepgym.session.handed`), which decides what the wait means for the episode as the sync path
does. A step holds a thread only while its command runs.

A remote provider's account (no admission key) bounds its own sandboxes: its samples go straight to the
executor (``max_parallel`` threads), where the adapter waits for the account's slot.

On deepgym's shutdown (:mod:`deepgym.shutdown`) every sample, waiting or running, ends as no verdict,
``cancelled``.
"""

from __future__ import annotations

import asyncio
import threading
import weakref
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from typing import TYPE_CHECKING, Any, TypeVar

from . import shutdown
from .admission import AdmissionCancelled, AdmissionTimeout, Slot
from .environments import Environment, load_environment
from .rows import RowTask
from .session import handed

if TYPE_CHECKING:
    from .client import BatchResult, DeepGym, Outcome
    from .session import BaseSession, Observation, StepResult, Wait
    from .verdict import NoVerdictError, Verdict

SESSION_WORKERS = 32
T = TypeVar("T")

_lock = threading.Lock()
_executors: weakref.WeakKeyDictionary[DeepGym, dict[str, ThreadPoolExecutor]] = weakref.WeakKeyDictionary()


def executor(gym: DeepGym, kind: str = "samples") -> ThreadPoolExecutor:
    """The client's bounded executor for admitted samples (``samples``: its admission bound of threads, or
    ``max_parallel`` on a remote account) or for session calls (``sessions``), made on first use."""
    with _lock:
        pools = _executors.setdefault(gym, {})
        pool = pools.get(kind)
        if pool is None:
            bound = gym.admission.bound if gym.admission is not None else gym.max_parallel
            workers = bound if kind == "samples" else max(SESSION_WORKERS, gym.max_parallel, bound)
            pool = pools[kind] = ThreadPoolExecutor(max_workers=workers, thread_name_prefix=f"deepgym-async-{kind}")
        return pool


def close(gym: DeepGym) -> None:
    """Let the client's executors go (their threads end once their work is done)."""
    with _lock:
        pools = _executors.pop(gym, {})
    for pool in pools.values():
        pool.shutdown(wait=False)


async def judge(gym: DeepGym, env: str | Environment | RowTask, response: str, options: dict[str, Any]) -> Outcome:
    """:meth:`DeepGym.judge` without blocking the event loop (see the module's docstring)."""
    from .client import submission

    environment = env.environment if isinstance(env, RowTask) else load_environment(env)
    if submission(environment, response, options.get("reasoning", "auto")) is None:
        return gym.judge(env, response, **options)  # nothing will run: no slot, no thread
    if gym.admission is None:  # a remote account: its adapter waits for the account's own slot, in the thread
        return await asyncio.wrap_future(executor(gym).submit(gym.judge, env, response, **options))
    try:
        slot = await gym.admission.aacquire(cancelled=shutdown.requested)
    except AdmissionCancelled:
        return gym.judge(env, response, **options)  # shutting down: judged at once as cancelled
    future = executor(gym).submit(_admitted, gym, slot, env, response, options)
    try:
        return await asyncio.wrap_future(future)
    except asyncio.CancelledError:
        if future.cancel():  # it never started, so its slot is still ours to free
            slot.release()
        raise


def _admitted(gym: DeepGym, slot: Slot, env: str | Environment | RowTask, response: str,
              options: dict[str, Any]) -> Outcome:
    try:
        with gym.admission.holding(slot):
            return gym.judge(env, response, **options)
    finally:
        slot.release()


async def run_batch(gym: DeepGym, env: str | Environment | RowTask | Sequence[RowTask], responses: Iterable[str],
                    max_parallel: int | None, options: dict[str, Any]) -> BatchResult:
    """:meth:`DeepGym.run_batch` on the event loop: every sample a coroutine, at most ``max_parallel`` of them
    past the start at once (None: as many as admission lets run)."""
    from .client import BatchResult, batch_tasks

    responses = list(responses)
    tasks = batch_tasks(env, responses)
    limit = asyncio.Semaphore(max_parallel) if max_parallel else None

    async def one(task: str | Environment | RowTask, response: str) -> Outcome:
        if limit is None:
            return await judge(gym, task, response, options)
        async with limit:
            return await judge(gym, task, response, options)

    running = [asyncio.ensure_future(one(task, response)) for task, response in zip(tasks, responses)]
    try:
        return BatchResult(await asyncio.gather(*running))
    except BaseException:
        for job in running:
            job.cancel()
        raise


async def in_session_thread(gym: DeepGym, call: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    """``call(*args, **kwargs)`` in the client's session executor, awaited."""
    future: Future[T] = executor(gym, "sessions").submit(call, *args, **kwargs)
    return await asyncio.wrap_future(future)


class AsyncSession:
    """A :class:`deepgym.session.Session` for a coroutine: the same methods, awaited, each run in the client's
    session executor once its admission slot is taken on the event loop; the same rules and outcomes (it is
    the same Session underneath, :attr:`session`).

    ::

        async with gym.asession("shell_repair_script", variant=1) as session:
            first = await session.start()
            step = await session.step("cat calc.py")
            verdict = await session.score()           # raises NoVerdictError
    """

    def __init__(self, gym: DeepGym, session: BaseSession):
        self.gym = gym
        self.session = session

    @property
    def done(self) -> bool:
        return self.session.done

    @property
    def steps(self) -> int:
        return self.session.steps

    @property
    def outcome(self) -> Verdict | NoVerdictError | None:
        """The episode's fixed outcome once it has one, else None (:attr:`Session.outcome`)."""
        return self.session.outcome

    async def start(self) -> Observation:
        return await self._admitted(self.session.start)

    async def step(self, action: Any, *args: Any, **kwargs: Any) -> StepResult:
        if self.session.done:  # over: it answers at once (it raises), without a slot
            return await in_session_thread(self.gym, self.session.step, action, *args, **kwargs)
        return await self._admitted(self.session.step, action, *args, **kwargs)

    async def score(self) -> Verdict:
        return await self._admitted(self.session.score)

    async def close(self) -> None:
        await in_session_thread(self.gym, self.session.close)

    async def _admitted(self, call: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """``call`` in the session executor, after waiting for its slot here as a coroutine (no thread waits).
        How the wait ended goes to the call, which decides what it means for the episode."""
        admission = self.gym.admission
        if admission is None or self.session.outcome is not None:  # no slot to take, or nothing left to do
            return await in_session_thread(self.gym, call, *args, **kwargs)
        try:
            wait: Wait = await admission.aacquire(timeout_s=self.session.wait_left_s(), cancelled=shutdown.requested)
        except (AdmissionCancelled, AdmissionTimeout) as exc:
            wait = exc
        future = executor(self.gym, "sessions").submit(_handed_call, self.gym, wait, call, args, kwargs)
        try:
            return await asyncio.wrap_future(future)
        except asyncio.CancelledError:
            if future.cancel() and isinstance(wait, Slot):  # it never started, so its slot is still ours to free
                wait.release()
            raise

    async def __aenter__(self) -> AsyncSession:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()


def _handed_call(gym: DeepGym, wait: Wait, call: Callable[..., T], args: tuple, kwargs: dict[str, Any]) -> T:
    try:
        with handed(gym.admission, wait):
            return call(*args, **kwargs)
    finally:
        if isinstance(wait, Slot):
            wait.release()
