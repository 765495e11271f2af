"""The caller's side of ``mode="ray"``: every sample is a Ray task that asks for one unit of a custom resource
(``deepgym_sandbox`` by default) and is judged on the node that gave it (:mod:`deepgym.sandbox.ray.node`).

Placement, queueing and back-pressure are Ray's: a node offers as many units as it may run sandboxes at once
(``ray start --resources '{"deepgym_sandbox": 8}'``, docs/ray.md), so a sample waits in Ray's queue until a
node has one free. The caller needs no Docker engine and no image: it names the image by reference and by the
content hash of its own environment files (:attr:`~deepgym.sandbox.base.Provider.images_elsewhere`), and the
node judges only in an image that carries it.

What can go wrong, and what it costs the sample (translated in :mod:`deepgym.sandbox.ray.errors`):

- no node offers the resource at all, for :data:`CAPACITY_WAIT_VARIABLE` seconds (default 60) while the sample
  waits: ``daemon_unavailable``, naming the resource and the ``ray start`` that offers it; never a hang;
- the task is lost before the node said it started (its worker or node died, it was never placed): sent once
  more, Ray choosing the node (never a dead one); lost twice, ``sandbox_start_failure``;
- the task is lost after it started, or its node stays silent past the sample's deadline and
  :data:`ANSWER_MARGIN_S`: ``sandbox_lost``, never a 0;
- the node answers with a failure of its own (no such image, its engine down): that failure, naming the node.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
import tempfile
import threading
import time
from collections.abc import Awaitable, Mapping, Sequence
from pathlib import Path
from typing import Any

from ...shutdown import requested as shutdown_requested
from ..base import ExecOptions, ExecResult, Image, NodeLost, Provider, ProviderUnavailable, Sandbox, SandboxError, \
    SandboxLost, SandboxSpec
from .errors import NotReached, answered, translated
from .node import Failed, Started, judge_here, sweep_here

log = logging.getLogger("deepgym")
RESOURCE_VARIABLE = "DEEPGYM_RAY_RESOURCE"
DEFAULT_RESOURCE = "deepgym_sandbox"
CAPACITY_WAIT_VARIABLE = "DEEPGYM_RAY_CAPACITY_WAIT_S"
DEFAULT_CAPACITY_WAIT_S = 60.0
ANSWER_MARGIN_S = 60.0
"""How long past the sample's own deadline a started node may stay silent before the sample is lost: the node
removes the sandbox and sends the result back in that time."""
POLL_S = 1.0
"""How often a waiting sample checks that the cluster still offers the resource."""
CAPACITY_CACHE_S = 1.0
GCS_PROBE_S = 3.0


def gcs_answers(address: str) -> bool:
    """Whether the cluster ``address`` names accepts a connection, asked before ``ray.init``, which otherwise
    retries an address that does not answer for minutes. ``auto`` is the cluster this machine's ``ray start``
    recorded (none recorded: ``ray.init`` says so at once); a ``ray://`` client address is left to Ray."""
    if address == "auto":
        recorded = Path(tempfile.gettempdir()) / "ray" / "ray_current_cluster"
        try:
            address = recorded.read_text().strip()
        except OSError:
            return True
    if "://" in address:
        return True
    host, _, port = address.rpartition(":")
    try:
        with socket.create_connection((host or "127.0.0.1", int(port)), timeout=GCS_PROBE_S):
            return True
    except (OSError, ValueError):
        return False


class RayProvider(Provider):
    """Sandboxes placed by the caller's Ray cluster: ``address`` (default ``RAY_ADDRESS``, else the cluster this
    machine's ``ray start`` made; a process already in Ray, such as verl's reward workers, uses its own),
    ``resource`` the custom resource each sample asks one unit of (default :data:`RESOURCE_VARIABLE`, else
    ``deepgym_sandbox``), ``capacity_wait_s`` how long a sample waits for any node to offer it."""

    name = "ray"
    admission_key = None  # the caller's CPUs judge nothing; each node takes its own host's slots
    images_elsewhere = True
    awaits = True

    def __init__(self, *, max_parallel: int = 32, address: str | None = None, resource: str | None = None,
                 capacity_wait_s: float | None = None):
        self.max_parallel = max_parallel
        self.address = address
        self.resource = resource or os.environ.get(RESOURCE_VARIABLE) or DEFAULT_RESOURCE
        self.capacity_wait_s = capacity_wait_s if capacity_wait_s is not None else \
            float(os.environ.get(CAPACITY_WAIT_VARIABLE, DEFAULT_CAPACITY_WAIT_S))
        self._lock = threading.Lock()
        self._connected_here = False
        self._judge: Any = None
        self._capacity: tuple[float, float] = (-CAPACITY_CACHE_S, 0.0)  # (when, how many units)

    def image(self, ref: str) -> Image:
        """``ref`` itself: each node resolves it, and checks the caller's labels on it, where the sandbox runs."""
        return Image(id=ref)

    def create(self, spec: SandboxSpec) -> Sandbox:
        """An episode's sandbox, held for its whole life by an actor on a node that Ray chooses
        (:mod:`deepgym.sandbox.ray.session`); an actor lost before it made the sandbox is placed once more."""
        from .session import open_episode

        try:
            return open_episode(self, self._ray(), spec)
        except NotReached as lost:
            log.warning("deepgym: %s; placing the episode once more", lost.reason)
        return open_episode(self, self._ray(), spec)

    def run(self, spec: SandboxSpec, argv: Sequence[str], options: ExecOptions) -> ExecResult:
        """``argv`` in a fresh sandbox on a node that Ray chooses; a sample lost before it reached a sandbox is
        sent once more."""
        try:
            return self._dispatch(spec, argv, options)
        except NotReached as lost:
            log.warning("deepgym: %s; sending the sample once more", lost.reason)
        return self._dispatch(spec, argv, options)

    async def arun(self, spec: SandboxSpec, argv: Sequence[str], options: ExecOptions) -> ExecResult:
        """:meth:`run` awaited on Ray's object refs: a waiting sample holds no thread."""
        try:
            return await self._adispatch(spec, argv, options)
        except NotReached as lost:
            log.warning("deepgym: %s; sending the sample once more", lost.reason)
        return await self._adispatch(spec, argv, options)

    def sweep(self, labels: Mapping[str, str]) -> int:
        """Remove every sandbox carrying all of ``labels`` on every live node that offers the resource."""
        ray = self._ray()
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        sweep = ray.remote(sweep_here)
        nodes = [node["NodeID"] for node in ray.nodes() if node.get("Alive") and node["Resources"].get(self.resource)]
        refs = [sweep.options(num_cpus=0, scheduling_strategy=NodeAffinitySchedulingStrategy(node, soft=False)
                              ).remote(dict(labels)) for node in nodes]
        return sum(ray.get(refs))

    def close(self) -> None:
        """Disconnect from Ray when this provider connected (a caller's own connection is the caller's)."""
        with self._lock:
            if self._connected_here:
                import ray

                ray.shutdown()
                self._connected_here = False

    # ----------------------------------------------------------------------------------------------------

    def _ray(self) -> Any:
        """The ray module, connected to the cluster. Raises ProviderUnavailable without Ray or a cluster."""
        with self._lock:
            try:
                import ray
            except ImportError:
                raise ProviderUnavailable("mode 'ray' needs Ray: pip install 'deepgym[ray]'") from None
            if not ray.is_initialized():
                address = self.address or os.environ.get("RAY_ADDRESS") or "auto"
                fix = (f"start one with `ray start --head --resources '{{\"{self.resource}\": N}}'` (docs/ray.md) "
                       f"or set RAY_ADDRESS")
                if not gcs_answers(address):
                    raise ProviderUnavailable(f"no Ray cluster answers at {address!r}; {fix}")
                try:
                    ray.init(address=address, logging_level=logging.WARNING, log_to_driver=False)
                except (ConnectionError, RuntimeError, ValueError) as exc:
                    raise ProviderUnavailable(f"no Ray cluster answers at {address!r} ({exc}); {fix}") from None
                self._connected_here = True
            return ray

    def _dispatch(self, spec: SandboxSpec, argv: Sequence[str], options: ExecOptions) -> ExecResult:
        ray = self._ray()
        stream = self._submit(ray, spec, argv, options)
        first = started_by(self._next(ray, stream, None, None))
        return result_of(first, self._next(ray, stream, first, time.monotonic() + options.timeout_s + ANSWER_MARGIN_S))

    async def _adispatch(self, spec: SandboxSpec, argv: Sequence[str], options: ExecOptions) -> ExecResult:
        """:meth:`_dispatch` awaited: the waits are on Ray's object refs, with no thread of their own."""
        ray = self._ray() if self._connected() else await asyncio.to_thread(self._ray)
        stream = self._submit(ray, spec, argv, options)
        try:
            first = started_by(await self._anext(ray, stream, None, None))
            deadline = time.monotonic() + options.timeout_s + ANSWER_MARGIN_S
            return result_of(first, await self._anext(ray, stream, first, deadline))
        except asyncio.CancelledError:  # the caller stopped waiting: the task goes too
            self._cancel(ray, stream)
            raise

    def _submit(self, ray: Any, spec: SandboxSpec, argv: Sequence[str], options: ExecOptions) -> Any:
        """The judging task's stream: one unit of the resource, never retried by Ray, spread over the nodes."""
        with self._lock:
            if self._judge is None:
                self._judge = ray.remote(judge_here)
        return self._judge.options(num_cpus=0, resources={self.resource: 1}, max_retries=0,
                                   scheduling_strategy="SPREAD").remote(spec, list(argv), options)

    def _next(self, ray: Any, stream: Any, started: Started | None, deadline: float | None) -> Any:
        """The stream's next item once it comes (see :meth:`answer`)."""
        missing_since: float | None = None
        while not ray.wait([stream], timeout=POLL_S)[0]:
            missing_since = self._still_waiting(ray, stream, started, deadline, missing_since)
        try:
            return ray.get(next(stream))
        except StopIteration:
            raise ended(started) from None
        except Exception as exc:  # noqa: BLE001 - every failure of the task is translated in one place
            raise translated(exc, started) from None

    async def _anext(self, ray: Any, stream: Any, started: Started | None, deadline: float | None) -> Any:
        """:meth:`_next` awaited on Ray's refs (see :meth:`_awaited`)."""
        return await self._awaited(ray, _next_value(stream), stream, started, deadline)

    async def _awaited(self, ray: Any, coming: Awaitable[Any], waited: Any, started: Started | None,
                       deadline: float | None) -> Any:
        """What ``coming`` gives once it comes, checking what :meth:`_still_waiting` checks once per
        :data:`POLL_S` (``waited``: the task or call to cancel then), with no thread of its own."""
        waiting = asyncio.ensure_future(coming)
        missing_since: float | None = None
        try:
            while not (await asyncio.wait({waiting}, timeout=POLL_S))[0]:
                missing_since = self._still_waiting(ray, waited, started, deadline, missing_since)
            return waiting.result()
        except StopAsyncIteration:
            raise ended(started) from None
        except SandboxError:
            raise
        except Exception as exc:  # noqa: BLE001 - every failure of the task is translated in one place
            raise translated(exc, started) from None
        finally:
            waiting.cancel()

    def answer(self, ray: Any, ref: Any, started: Started | None, timeout_s: float = 0.0) -> Any:
        """The value of ``ref`` once it comes: while the sample waits to start, as long as some node offers the
        resource; once started, for ``timeout_s`` and :data:`ANSWER_MARGIN_S`; either way until deepgym shuts
        down, which cancels the task. Raises the sample's SandboxError otherwise."""
        deadline = time.monotonic() + timeout_s + ANSWER_MARGIN_S
        missing_since: float | None = None
        while not ray.wait([ref], timeout=POLL_S)[0]:
            missing_since = self._still_waiting(ray, ref, started, deadline, missing_since)
        try:
            return ray.get(ref)
        except Exception as exc:  # noqa: BLE001 - every failure of the task is translated in one place
            raise translated(exc, started) from None

    async def aanswer(self, ray: Any, ref: Any, started: Started | None, timeout_s: float = 0.0) -> Any:
        """:meth:`answer` awaited on ``ref`` itself, holding no thread."""
        return await self._awaited(ray, _value(ref), ref, started, time.monotonic() + timeout_s + ANSWER_MARGIN_S)

    def _still_waiting(self, ray: Any, waited: Any, started: Started | None, deadline: float | None,
                       missing_since: float | None) -> float | None:
        """One look at a task that has not answered yet: raises the sample's error (and cancels the task) when
        the wait must end; else returns since when no node has offered the resource (None while one does)."""
        now = time.monotonic()
        if shutdown_requested():  # the sample ends as cancelled (deepgym.judging); its task goes with it
            self._cancel(ray, waited)
            raise SandboxLost("deepgym is shutting down")
        if started is not None:
            if deadline is not None and now > deadline:
                self._cancel(ray, waited)
                raise NodeLost(f"Ray node {started.node} gave no answer by the sample's deadline and "
                               f"{ANSWER_MARGIN_S:g}s more")
            return None
        if self._units(ray) > 0:
            return None
        missing_since = missing_since if missing_since is not None else now
        if now - missing_since >= self.capacity_wait_s:
            self._cancel(ray, waited)
            raise ProviderUnavailable(
                f"no node of the Ray cluster offers the resource {self.resource!r} (waited "
                f"{self.capacity_wait_s:g}s); on each node that judges, run `ray start --address=HEAD:PORT "
                f"--resources '{{\"{self.resource}\": N}}'` with N its admission bound (docs/ray.md)")
        return missing_since

    def _connected(self) -> bool:
        import ray

        return ray.is_initialized()

    @staticmethod
    def _cancel(ray: Any, waited: Any) -> None:
        """Cancel a task's stream; an actor's call cannot be force-cancelled, and its actor is killed instead by
        whoever holds it."""
        with contextlib.suppress(Exception):  # noqa: BLE001 - a task that ended meanwhile needs no cancelling
            ray.cancel(waited, force=True)

    def _units(self, ray: Any) -> float:
        """How many units of the resource the cluster's live nodes offer, asked at most once a second."""
        with self._lock:
            when, units = self._capacity
            if time.monotonic() - when < CAPACITY_CACHE_S:
                return units
        units = float(ray.cluster_resources().get(self.resource, 0.0))
        with self._lock:
            self._capacity = (time.monotonic(), units)
        return units


async def _next_value(stream: Any) -> Any:
    """The value of a task stream's next item."""
    return await (await stream.__anext__())


async def _value(ref: Any) -> Any:
    """The value of ``ref``, as a coroutine that a task can run."""
    return await ref


def started_by(first: Any) -> Started:
    """The node's first answer, which must say that the sample started; else the error it stands for."""
    if isinstance(first, Failed):
        raise answered(first)
    if not isinstance(first, Started):
        raise SandboxLost(f"a Ray node answered {type(first).__name__} before it started the sample")
    return first


def result_of(first: Started, answer: Any) -> ExecResult:
    """The node's second answer, which must be the sample's result; else the error it stands for."""
    if isinstance(answer, Failed):
        raise answered(answer)
    if not isinstance(answer, ExecResult):
        raise SandboxLost(f"Ray node {first.node} answered {type(answer).__name__} instead of the sample's result")
    return answer


def ended(started: Started | None) -> SandboxError:
    """The error of a judging task that ended without its next answer."""
    if started is None:
        return NotReached("a Ray node ended the judging task without an answer")
    return NodeLost(f"Ray node {started.node} ended the judging task without an answer")
