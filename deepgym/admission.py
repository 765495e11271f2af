"""Host-wide admission control: at most N sandboxes of one kind run at once, across every deepgym process and
thread on the host.

The runner's fair-timeout rule gives no verdict (``host_overloaded``) when the host starves a sample of CPU,
which is right for load that is not deepgym's: nobody could judge fairly. But 40 reward threads that each start
a sandbox on a 2-core host are such load too, made by deepgym itself, and a busy loop then escapes its
``solution_timeout``. So a sandbox is admitted only when one of N slots is free, and a sample waits for its
slot *before* any of its clocks start (the host's deadline, the runner's budgets): waiting is never charged
to it.

**Slots are file locks.** A bound of N is N slot files in ``<directory>/<key>/``, each held by an exclusive
``flock(2)`` while its sandbox runs. The kernel drops a lock when its holder's process ends, however it ends,
so a killed or crashed deepgym never keeps a slot, and nothing needs cleaning up. Threads of one process
first pass a semaphore of the same bound, so at most N of them compete for the files. Waiters of all
processes take turns at the head of a queue (another lock file): the head polls the slots every
:data:`HEAD_POLL_S`, the others poll the queue, backing off to :data:`QUEUE_POLL_MAX_S`, so a freed slot is
taken within milliseconds while waiting costs next to no CPU. Every wait can be cancelled or given a timeout.
A coroutine waits with :meth:`Admission.aacquire`, which blocks neither its event loop nor a thread.

**What holds a slot.** A single-turn sample, from its sandbox's start to its verdict. A multi-turn episode
(:mod:`deepgym.session`, desktops too) only while it works on the host (its start, each action, the final
verification), never while its container idles between turns: slots bound running work, not living containers.
Its waits are charged to none of its budgets either. A slot taken on an event loop travels with its sample as
an argument (:class:`HeldSlot`), so nothing of one sample or one step waits for a second.

**Keys.** ``host`` is for sandboxes that use this host's CPUs: docker on the local engine, local mode. Other
places take slots under their own key and bound, e.g. a remote provider per account: ``with Admission("e2b-acme",
bound=20).slot(): ...`` around creating, using and closing the sandbox.

**Configuration.** The bound is the argument, else ``DEEPGYM_MAX_SANDBOXES`` (key ``host``) or
``DEEPGYM_MAX_SANDBOXES_<KEY>`` (upper case, ``-`` and ``.`` as ``_``), else the caller's default (the CPU
count for ``host``). The directory is ``DEEPGYM_ADMISSION_DIR``, else ``/tmp/deepgym-admission``; it and its key
folders are world-writable and sticky, so every user's deepgym shares them. Processes given different bounds
share the same slot files, each using the first of them up to its own bound: the host then runs at most the
largest bound any of them has. A holder must not wait for a second slot of the same key (with every slot held
that way, nobody proceeds). A deleted folder is made again.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import fcntl
import logging
import os
import random
import re
import stat
import threading
import time
import weakref
from collections.abc import Callable, Generator, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from .errors import ConfigurationError, DeepGymError

HOST = "host"
DIR_VARIABLE = "DEEPGYM_ADMISSION_DIR"
BOUND_VARIABLE = "DEEPGYM_MAX_SANDBOXES"
DEFAULT_DIR = "/tmp/deepgym-admission"
KEY_PATTERN = re.compile(r"[a-z0-9][a-z0-9._-]{0,63}")
# The waiter at the head of the queue tries every slot this often; the others try to become the head, backing
# off from 1 ms to QUEUE_POLL_MAX_S. A semaphore wait (this process's own threads) wakes this often to check
# for a cancellation.
HEAD_POLL_S = 0.002
QUEUE_POLL_MAX_S = 0.05
CANCEL_POLL_S = 0.1
log = logging.getLogger("deepgym")


class AdmissionTimeout(DeepGymError):
    """No slot came free within the wait's timeout."""


class AdmissionCancelled(DeepGymError):
    """The wait for a slot was cancelled (deepgym is shutting down)."""


def default_bound() -> int:
    """The CPU count: one sandbox per CPU keeps every sample's CPU share fair, and more adds no throughput."""
    return os.cpu_count() or 1


def bound_variable(key: str) -> str:
    """The environment variable that sets the bound of ``key``."""
    return BOUND_VARIABLE if key == HOST else f"{BOUND_VARIABLE}_{re.sub(r'[^A-Z0-9]', '_', key.upper())}"


def engine_key(docker_host: str | None) -> str:
    """The key of a Docker engine's sandboxes: ``host`` for this host's own engine (no ``DOCKER_HOST``, or a unix
    socket), else one key per remote engine, whose CPUs are not this host's."""
    if not docker_host or docker_host.startswith("unix://"):
        return HOST
    return ("docker-" + re.sub(r"[^a-z0-9.-]+", "-", docker_host.lower().split("://", 1)[-1]).strip("-"))[:64]


def resolve_bound(key: str, bound: int | None, default: Callable[[], int] = default_bound) -> int:
    """The bound of ``key``: ``bound``, else its environment variable, else ``default()``."""
    source = "the bound"
    if bound is None:
        variable = bound_variable(key)
        text = os.environ.get(variable)
        if text is None:
            return default()
        source = variable
        try:
            bound = int(text)
        except ValueError:
            raise ConfigurationError(f"{variable}={text!r} is not a whole number; set it to how many sandboxes "
                                     f"may run at once") from None
    if isinstance(bound, bool) or not isinstance(bound, int) or bound < 1:
        raise ConfigurationError(f"{source} of admission key {key!r} must be a whole number of at least 1, got "
                                 f"{bound!r}")
    return bound


@dataclass
class Slot:
    """One admitted sandbox's slot; :meth:`release` (or leaving :meth:`Admission.slot`) frees it."""

    key: str
    index: int
    waited_s: float
    _fd: int | None = field(repr=False, default=None)
    _local: threading.Semaphore | None = field(repr=False, default=None)
    _released: Callable[[], None] | None = field(repr=False, default=None)

    def release(self) -> None:
        """Free the slot. Idempotent. The lock is dropped explicitly, not only by closing: a child forked
        meanwhile shares the open file and would otherwise keep holding it."""
        fd, self._fd = self._fd, None
        if fd is None:
            return
        try:
            fcntl.flock(fd, fcntl.LOCK_UN)
        finally:
            os.close(fd)
            if self._local is not None:
                self._local.release()
            if self._released is not None:
                self._released()


class _SlotFileWait:
    """One wait's tries of the slot files (:meth:`Admission._file_slot_attempts`): the pauses between them, then
    the file and index it took (:attr:`taken`)."""

    def __init__(self, attempts: Generator[float, None, tuple[int, int]]):
        self.taken: tuple[int, int] | None = None
        self.pauses = self._pauses(attempts)

    def _pauses(self, attempts: Generator[float, None, tuple[int, int]]) -> Generator[float, None, None]:
        self.taken = yield from attempts

    def close(self) -> None:
        """Stop the tries (closing their files), wherever they are."""
        self.pauses.close()


class HeldSlot:
    """An admission whose slot is taken already: :meth:`slot` yields it at once, and its taker releases it. How
    a sample admitted on the event loop (:meth:`Admission.aacquire`, :mod:`deepgym.aio`) hands its slot to the
    judging path in a worker thread, as an argument: never a second wait for the same sample."""

    def __init__(self, held: Slot):
        self.held = held
        self.key = held.key

    @contextlib.contextmanager
    def slot(self, **_: object) -> Iterator[Slot]:
        yield self.held


class Admission:
    """At most ``bound`` sandboxes of ``key`` at once on this host (see the module's docstring). Thread-safe;
    one instance per key and process is enough, but any number share the same slots."""

    def __init__(self, key: str = HOST, bound: int | None = None, *, directory: str | os.PathLike[str] | None = None,
                 default: Callable[[], int] = default_bound):
        if not isinstance(key, str) or not KEY_PATTERN.fullmatch(key):
            raise ConfigurationError(f"admission key {key!r} must be 1 to 64 of a-z, 0-9, '.', '_', '-', starting "
                                     f"with a letter or digit")
        self.key = key
        self.bound = resolve_bound(key, bound, default)
        self.root = Path(directory or os.environ.get(DIR_VARIABLE) or DEFAULT_DIR)
        self.folder = self.root / key
        self._local = threading.BoundedSemaphore(self.bound)
        self._ready = False
        # Async waiters of one event loop take turns behind its lock; only the head polls, and a release in
        # this process wakes it at once (from whichever thread it happens in).
        self._heads: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, asyncio.Lock] = weakref.WeakKeyDictionary()
        self._wakers: set[Callable[[], None]] = set()
        self._wakers_lock = threading.Lock()

    @contextlib.contextmanager
    def slot(self, *, timeout_s: float | None = None,
             cancelled: Callable[[], bool] | None = None) -> Iterator[Slot]:
        """Hold a slot for the duration of the block; see :meth:`acquire`."""
        held = self.acquire(timeout_s=timeout_s, cancelled=cancelled)
        try:
            yield held
        finally:
            held.release()

    def acquire(self, *, timeout_s: float | None = None, cancelled: Callable[[], bool] | None = None) -> Slot:
        """Wait for a free slot and take it. Raises AdmissionTimeout after ``timeout_s`` (None: wait as long as
        it takes) and AdmissionCancelled as soon as ``cancelled()`` is true."""
        started = time.monotonic()
        deadline = None if timeout_s is None else started + timeout_s
        while not self._local.acquire(timeout=self._step(CANCEL_POLL_S, deadline)):
            self._check(deadline, cancelled)
        with self._slot_file(deadline, cancelled) as wait:
            for pause in wait.pauses:
                time.sleep(pause)
        return self._taken(started, wait)

    async def aacquire(self, *, timeout_s: float | None = None,
                       cancelled: Callable[[], bool] | None = None) -> Slot:
        """:meth:`acquire` for a coroutine: the wait blocks neither the event loop nor a thread. The waiters of
        one event loop queue behind its lock; the head waits for this process's next release (woken from the
        releasing thread) or polls the slot files of the other processes, with asyncio sleeps. Cancelling the
        waiting task takes nothing."""
        started = time.monotonic()
        deadline = None if timeout_s is None else started + timeout_s
        loop = asyncio.get_running_loop()
        head = self._heads.get(loop)
        if head is None:
            head = self._heads[loop] = asyncio.Lock()
        async with head:
            await self._await_local(loop, deadline, cancelled)
            with self._slot_file(deadline, cancelled) as wait:
                for pause in wait.pauses:
                    await asyncio.sleep(pause)
        return self._taken(started, wait)

    # ----------------------------------------------------------------------------------------------------

    @contextlib.contextmanager
    def _slot_file(self, deadline: float | None, cancelled: Callable[[], bool] | None) -> Iterator[_SlotFileWait]:
        """The wait for a slot file, once this process's permit is held: the caller sleeps each pause its own
        way (:meth:`acquire` blocks, :meth:`aacquire` awaits). The permit is given back if the wait fails or
        is cancelled, and the files it opened are closed on every outcome."""
        wait = _SlotFileWait(self._file_slot_attempts(deadline, cancelled))
        try:
            yield wait
        except BaseException:
            self._release_local()
            raise
        finally:
            wait.close()

    def _taken(self, started: float, wait: _SlotFileWait) -> Slot:
        fd, index = wait.taken
        return Slot(self.key, index, time.monotonic() - started, fd, self._local, self._wake)

    async def _await_local(self, loop: asyncio.AbstractEventLoop, deadline: float | None,
                           cancelled: Callable[[], bool] | None) -> None:
        """Take a permit of this process's semaphore without blocking the loop."""
        woken = asyncio.Event()

        def wake() -> None:
            with contextlib.suppress(RuntimeError):  # the loop closed meanwhile
                loop.call_soon_threadsafe(woken.set)

        with self._wakers_lock:
            self._wakers.add(wake)
        try:
            while True:
                woken.clear()
                if self._local.acquire(blocking=False):
                    return
                self._check(deadline, cancelled)
                with contextlib.suppress(asyncio.TimeoutError):
                    await asyncio.wait_for(woken.wait(), self._step(CANCEL_POLL_S, deadline))
        finally:
            with self._wakers_lock:
                self._wakers.discard(wake)

    def _release_local(self) -> None:
        self._local.release()
        self._wake()

    def _wake(self) -> None:
        with self._wakers_lock:
            wakers = list(self._wakers)
        for wake in wakers:
            wake()

    def _file_slot_attempts(self, deadline: float | None,
                            cancelled: Callable[[], bool] | None) -> Generator[float, None, tuple[int, int]]:
        """Try the slot files until one is taken (the generator's value: its fd and index), yielding how long
        to sleep between tries; the sync and the async wait drive it with their own sleep."""
        self._prepare()
        fds: dict[int, int] = {}  # slot index -> an open file of it, kept across the polls of one wait
        queue: int | None = None
        backoff = 0.001
        try:
            while True:
                taken = self._try_slots(fds)
                if taken is not None:
                    return taken
                self._check(deadline, cancelled)
                if queue is None:
                    queue = self._try_lock("queue")
                if queue is not None:
                    yield self._step(HEAD_POLL_S, deadline)
                else:
                    yield self._step(backoff, deadline)
                    backoff = min(2 * backoff, QUEUE_POLL_MAX_S)
        finally:
            for fd in fds.values():
                os.close(fd)
            if queue is not None:
                fcntl.flock(queue, fcntl.LOCK_UN)
                os.close(queue)

    def _try_slots(self, fds: dict[int, int]) -> tuple[int, int] | None:
        """Try every slot once, from a random one on (so that waiters spread); the slot taken, or None. The
        winning file leaves ``fds`` and becomes the slot's."""
        start = random.randrange(self.bound)
        for offset in range(self.bound):
            index = (start + offset) % self.bound
            fd = fds.get(index)
            if fd is None:
                fd = fds[index] = self._open(f"slot-{index}")
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                continue
            del fds[index]
            return fd, index
        return None

    def _try_lock(self, name: str) -> int | None:
        fd = self._open(name)
        with contextlib.suppress(BlockingIOError):
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return fd
        os.close(fd)
        return None

    def _open(self, name: str) -> int:
        """An open file of the lock file ``name``, made if missing. Only ever read (a lock needs no more), never
        followed through a symlink, and never a FIFO or device that could block or act on being opened."""
        path = self.folder / name
        flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
        try:
            fd = os.open(path, flags)
        except FileNotFoundError:
            try:
                fd = os.open(path, flags | os.O_CREAT | os.O_EXCL, 0o644)
            except FileExistsError:  # another process made it just now
                fd = os.open(path, flags)
            except FileNotFoundError:  # the folder itself is gone (a /tmp cleaner, someone's rm -rf)
                self._remake(path)
                return self._open(name)
        except OSError as exc:
            raise OSError(exc.errno, f"cannot open deepgym's admission lock {path}: {exc.strerror}. Fix: make "
                                     f"{self.root} writable for every user that runs deepgym, or point "
                                     f"{DIR_VARIABLE} at another folder") from None
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            os.close(fd)
            raise OSError(errno.EINVAL, f"deepgym's admission lock {path} is not a regular file; remove it")
        return fd

    def _remake(self, path: Path) -> None:
        """Make the folders again for ``path``: slots held in the vanished one stay held until their samples end."""
        log.warning("deepgym: the admission folder %s vanished under a running process; made it again (twice %d "
                    "sandboxes may run until the samples admitted before end). Fix: point %s at a folder no tmp "
                    "cleaner deletes", self.folder, self.bound, DIR_VARIABLE)
        self._ready = False
        self._prepare()

    def _prepare(self) -> None:
        """Make the lock folders, world-writable and sticky like /tmp (once per instance)."""
        if self._ready:
            return
        for folder in (self.root, self.folder):
            try:
                folder.mkdir(mode=0o1777, exist_ok=True)
            except OSError as exc:
                raise OSError(exc.errno, f"cannot make deepgym's admission folder {folder}: {exc.strerror}. Fix: "
                                         f"point {DIR_VARIABLE} at a writable folder") from None
            with contextlib.suppress(PermissionError):  # someone else's folder: theirs to set up
                if stat.S_IMODE(folder.stat().st_mode) != 0o1777:
                    os.chmod(folder, 0o1777)  # mkdir's mode passes through the umask
        self._ready = True

    @staticmethod
    def _step(step_s: float, deadline: float | None) -> float:
        return step_s if deadline is None else max(0.0, min(step_s, deadline - time.monotonic()))

    def _check(self, deadline: float | None, cancelled: Callable[[], bool] | None) -> None:
        if cancelled is not None and cancelled():
            raise AdmissionCancelled(f"the wait for a {self.key!r} sandbox slot was cancelled")
        if deadline is not None and time.monotonic() >= deadline:
            raise AdmissionTimeout(f"no {self.key!r} sandbox slot came free in time: all {self.bound} were held "
                                   f"(raise {bound_variable(self.key)} if the host has room for more)")
