"""The async half of :class:`deepgym.DeepGym`: ``arun``, ``ajudge``, ``arun_batch`` and ``asession``, for callers
that live on an event loop (verl's agent loops and reward workers, an async trainer or server).

They take the same arguments as their sync twins (keyword options are forwarded unchanged) and give the same
outcomes, because they run the same code: a sample is prepared once (:func:`deepgym.sample.prepare`) and decided
by the same path as :meth:`DeepGym.judge`; this module only decides *where* each part runs. How a sample spends
its time:

1. **Nothing to run.** A response without a submission (no code block, no diff) is judged at once on the
   event loop: nothing runs, so it takes no slot and no thread.
2. **Waiting for admission** (:mod:`deepgym.admission`): a coroutine, never a thread. The waiters of one event
   loop queue behind a lock; only the first polls the host-wide slot files, with asyncio sleeps, and a slot
   freed in this process wakes it at once. Cancelling a waiting task takes nothing away from anyone.
3. **Admitted**: the sample is decided (the blocking docker-py calls) in a worker thread of the client's
   bounded executor, which has as many threads as the client's admission bound, so at most that many threads
   judge at once however many samples wait. The slot goes with the sample into the thread as an argument
   (:class:`~deepgym.admission.HeldSlot`), and the judging path uses it instead of waiting for another.
   Cancelling an admitted sample's task stops the wait for its outcome; its sandbox finishes within its
   deadline in the background, and its slot is freed then.

An episode's calls that do work on the host (start, each step, score) wait for their admission slot the same
way, as a coroutine, and then run in a second bounded executor of the client (:data:`SESSION_WORKERS` threads
at least, or ``max_parallel``, or the admission bound), with how the wait ended passed to the call as its
``wait`` argument; the episode decides what it means, as the sync path does. A step holds a thread only while
its command runs; on a provider that awaits, a shell episode's step holds none (it awaits its sandbox's refs).

A remote provider's account (no admission key) bounds its own sandboxes: its samples go straight to the
executor (``max_parallel`` threads), where the adapter waits for the account's slot. A provider that
:attr:`~deepgym.sandbox.base.Provider.awaits` (Ray, whose nodes take their own slots) is awaited on the event loop
itself: a sample is a coroutine from start to end, waiting on the provider's own refs, and holds no thread; the
sync :meth:`run_batch` runs its batch the same way, on an event loop of its own.

On deepgym's shutdown (:mod:`deepgym.shutdown`) every sample, waiting or running, ends as no verdict,
``cancelled``.
"""

from __future__ import annotations

import asyncio
import threading
import weakref
from collections.abc import Awaitable, Callable, Iterable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, TypeVar

from .admission import Admission, AdmissionCancelled, AdmissionTimeout, HeldSlot, Slot
from .canary import Canaries
from .environments import Environment
from .outcome import BatchResult, NoVerdictError, Outcome, Verdict
from .rows import RowTask
from .sample import Sample, batch_tasks
from .sandbox import Provider
from .sandbox.base import awaited
from .session.episode import Episode, Wait
from .session.results import Observation, StepResult
from .shutdown import requested

SESSION_WORKERS = 32
T = TypeVar("T")


class AsyncFaces:
    """The async methods of :class:`deepgym.DeepGym` and the executors they run in, which belong to the client
    (made on first use, let go by :meth:`_close_executors`)."""

    admission: Admission | None
    max_parallel: int
    _prepare: Callable[..., Sample | Verdict]
    _decide: Callable[[Sample | Verdict, Any], Outcome]
    _adecide: Callable[[Sample], Awaitable[Outcome]]
    provider: Provider
    canaries: Canaries | None
    _gate: Callable[[Environment, Any], NoVerdictError | None]
    session: Callable[..., Episode]

    def __init__(self) -> None:
        self._executors: dict[str, ThreadPoolExecutor] = {}
        self._canary_locks: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, asyncio.Lock] = \
            weakref.WeakKeyDictionary()
        self._executors_lock = threading.Lock()

    async def ajudge(self, env: str | Environment | RowTask, response: str, **options: Any) -> Outcome:
        """:meth:`judge` for a coroutine, with the same arguments: it blocks no event loop, and a sample waiting
        for its admission slot holds no thread (see the module's docstring)."""
        prepared = self._prepare(env, response, **options)
        if not isinstance(prepared, Sample):  # nothing will run: no slot, no thread
            return prepared
        if self.canaries is not None and self.canaries.due(prepared.env):
            await self._check_canaries(prepared.env)
        if self.awaited:  # awaited on the provider's own refs: no thread at all
            return await self._adecide(prepared)
        if self.admission is None:  # a remote account: its adapter waits for the account's own slot, in the thread
            return await asyncio.wrap_future(self._executor().submit(self._decide, prepared, None))
        try:
            slot = await self.admission.aacquire(cancelled=requested)
        except AdmissionCancelled:
            return self._decide(prepared, self.admission)  # shutting down: judged at once as cancelled
        future = self._executor().submit(self._decide_held, prepared, slot)
        try:
            return await asyncio.wrap_future(future)
        except asyncio.CancelledError:
            if future.cancel():  # it never started, so its slot is still ours to free
                slot.release()
            raise

    @property
    def awaited(self) -> bool:
        """Whether samples and steps are awaited on the provider's own refs (:attr:`Provider.awaits`, Ray), whose
        nodes take their own slots: no thread of the client waits for them."""
        return awaited(self.provider)

    async def arun(self, env: str | Environment | RowTask, response: str, **options: Any) -> Verdict:
        """:meth:`run` for a coroutine, with the same arguments (see :meth:`ajudge`). Raises NoVerdictError."""
        outcome = await self.ajudge(env, response, **options)
        if isinstance(outcome, NoVerdictError):
            raise outcome
        return outcome

    async def arun_batch(self, env: str | Environment | RowTask | Sequence[RowTask], responses: Iterable[str], *,
                         max_parallel: int | None = None, **options: Any) -> BatchResult:
        """:meth:`run_batch` for a coroutine, with the same arguments: every sample is a coroutine until it is
        admitted. ``max_parallel`` caps how many of this batch's samples run at once (default: as many as
        admission lets run)."""
        responses = list(responses)
        tasks = batch_tasks(env, responses)
        limit = asyncio.Semaphore(max_parallel) if max_parallel else None

        async def one(task: Environment | RowTask, response: str) -> Outcome:
            if limit is None:
                return await self.ajudge(task, response, **options)
            async with limit:
                return await self.ajudge(task, response, **options)

        running = [asyncio.ensure_future(one(task, response)) for task, response in zip(tasks, responses)]
        try:
            return BatchResult(await asyncio.gather(*running))
        except BaseException:
            for job in running:
                job.cancel()
            raise

    def asession(self, env: str | Environment | RowTask, variant: int = 0) -> AsyncSession:
        """:meth:`session` for a coroutine: an async context manager returning an :class:`AsyncSession`, whose
        ``start``, ``step``, ``score`` and ``close`` are awaited."""
        return AsyncSession(self.session(env, variant), self.admission, lambda: self._executor("sessions"))

    def _executor(self, kind: str = "samples") -> ThreadPoolExecutor:
        """The client's bounded executor for admitted samples (``samples``: its admission bound of threads, or
        ``max_parallel`` on a remote account) or for episode calls (``sessions``), made on first use."""
        with self._executors_lock:
            pool = self._executors.get(kind)
            if pool is None:
                bound = self.admission.bound if self.admission is not None else self.max_parallel
                workers = bound if kind == "samples" else max(SESSION_WORKERS, self.max_parallel, bound)
                pool = self._executors[kind] = ThreadPoolExecutor(max_workers=workers,
                                                                  thread_name_prefix=f"deepgym-async-{kind}")
            return pool

    def _close_executors(self) -> None:
        """Let the client's executors go (their threads end once their work is done)."""
        with self._executors_lock:
            pools, self._executors = list(self._executors.values()), {}
        for pool in pools:
            pool.shutdown(wait=False)

    async def _check_canaries(self, env: Environment) -> None:
        """Run a due canary check (:mod:`deepgym.canary`) before a sample holds a slot, since the check needs
        slots of its own: one coroutine at a time runs it in one of the client's threads, the others wait for
        it holding no thread."""
        loop = asyncio.get_running_loop()
        with self._executors_lock:
            lock = self._canary_locks.setdefault(loop, asyncio.Lock())
        async with lock:
            if self.canaries is not None and self.canaries.due(env):
                await asyncio.wrap_future(self._executor().submit(self._gate, env, self.admission))

    def _decide_held(self, prepared: Sample, slot: Slot) -> Outcome:
        """Decide an admitted sample with the slot it was admitted with, then free the slot."""
        try:
            return self._decide(prepared, HeldSlot(slot))
        finally:
            slot.release()


class AsyncSession:
    """An episode (:class:`deepgym.session.Session`, or a desktop one) for a coroutine: the same methods, awaited,
    each run in the client's session executor once its admission slot is taken on the event loop; the same rules
    and outcomes (it is the same episode underneath, :attr:`session`).

    ::

        async with gym.asession("shell_repair_script", variant=1) as session:
            first = await session.start()
            step = await session.step("cat calc.py")
            verdict = await session.score()           # raises NoVerdictError
    """

    def __init__(self, session: Episode, admission: Admission | None, executor: Callable[[], ThreadPoolExecutor]):
        self.session = session
        self._admission = admission
        self._executor = executor

    @property
    def done(self) -> bool:
        return self.session.done

    @property
    def steps(self) -> int:
        return self.session.steps

    @property
    def outcome(self) -> Outcome | None:
        """The episode's fixed outcome once it has one, else None (:attr:`Episode.outcome`)."""
        return self.session.outcome

    async def start(self) -> Observation:
        await self._in_thread(self.session.pass_gate)  # the canaries' check takes slots: before this one is held
        return await self._with_slot(self.session.start)

    async def step(self, action: Any, *args: Any, **kwargs: Any) -> StepResult:
        if self.session.done:  # over: it answers at once (it raises), without a slot
            return await self._in_thread(self.session.step, action, *args, **kwargs)
        if self.session.awaits:  # awaited on the provider's refs (Ray): no thread, and no slot here
            return await self.session.astep(action, *args, **kwargs)
        return await self._with_slot(self.session.step, action, *args, **kwargs)

    async def score(self) -> Verdict:
        return await self._with_slot(self.session.score)

    async def close(self) -> None:
        await self._in_thread(self.session.close)

    async def _in_thread(self, call: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """``call(*args, **kwargs)`` in the client's session executor, awaited."""
        future: Future[T] = self._executor().submit(call, *args, **kwargs)
        return await asyncio.wrap_future(future)

    async def _with_slot(self, call: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """``call`` in the session executor, after waiting for its slot here as a coroutine (no thread waits).
        How the wait ended is the call's ``wait`` argument; the episode decides what it means."""
        if self._admission is None or self.session.outcome is not None:  # no slot to take, or nothing left to do
            return await self._in_thread(call, *args, **kwargs)
        try:
            wait: Wait = await self._admission.aacquire(timeout_s=self.session.wait_left_s(), cancelled=requested)
        except (AdmissionCancelled, AdmissionTimeout) as exc:
            wait = exc
        future = self._executor().submit(_call_with_wait, wait, call, args, kwargs)
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


def in_event_loop() -> bool:
    """Whether this thread runs an event loop, where a sync call must not start one of its own."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True


def _call_with_wait(wait: Wait, call: Callable[..., T], args: tuple, kwargs: dict[str, Any]) -> T:
    """The episode's call with how its caller's wait ended; the slot, if one was taken, is freed after it."""
    try:
        return call(*args, wait=wait, **kwargs)
    finally:
        if isinstance(wait, Slot):
            wait.release()
