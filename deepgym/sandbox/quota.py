"""A provider account's limits: how many of its sandboxes may be alive at once, across every deepgym process of
this host (and of a Ray cluster, when deepgym runs under Ray), and how fast this process may create them.
Every remote adapter holds one :class:`AccountLimits`; a create waits for a slot and for its turn, so a burst
of samples queues here instead of being refused by the provider as a 429 (which would be a no-verdict sample).

**The bound is shared.** The slots are :mod:`deepgym.admission`'s file locks under the account's own key
(``<provider>-<hash of the account's key>``), so every process on the host that uses the account counts
against the same ``max_sandboxes``, and a killed process's slots come free with it. Under Ray
(``ray.is_initialized()``: verl's reward workers are Ray actors, possibly on many hosts) the slots are held
by one named, detached Ray actor per account instead (:class:`RaySlots`, made by whoever asks first), so the
bound holds across the cluster. A Ray slot is a lease for the sandbox's provider-side lifetime: a process
that dies holding one cannot keep it longer than the provider keeps the sandbox.

The creation rate is per process.
"""

from __future__ import annotations

import hashlib
import os
import sys
import threading
import time
from collections.abc import Callable

from ..admission import Admission, AdmissionTimeout
from .base import StartFailure

RAY_NAMESPACE = "deepgym"
RAY_POLL_S = 0.05


def account_key(provider: str, account: str | None) -> str:
    """The admission key of ``provider``'s account ``account`` (its API key or token id, never shown)."""
    digest = hashlib.sha256((account or "").encode()).hexdigest()[:12]
    return f"{provider}-{digest}"


def ray_running() -> bool:
    """Whether this process is connected to a Ray cluster (without importing Ray when nobody has)."""
    ray = sys.modules.get("ray")
    return bool(ray is not None and ray.is_initialized())


class AccountLimits:
    """At most ``max_sandboxes`` of the account ``account`` alive at once (host-wide, or cluster-wide under
    Ray), at most ``creates_per_s`` creations per second in this process (None: no limit). :meth:`acquire`
    before a create; it returns the release, to call once the sandbox is deleted (or never made)."""

    def __init__(self, provider: str, *, account: str | None = None, max_sandboxes: int,
                 creates_per_s: float | None, wait_s: float = 600.0):
        if max_sandboxes < 1:
            raise ValueError(f"{provider}: max_sandboxes must be at least 1, not {max_sandboxes}")
        if creates_per_s is not None and creates_per_s <= 0:
            raise ValueError(f"{provider}: creates_per_s must be positive or None, not {creates_per_s}")
        self.provider = provider
        self.key = account_key(provider, account)
        self.max_sandboxes = max_sandboxes
        self.creates_per_s = creates_per_s
        self.wait_s = wait_s
        self._host = Admission(self.key, max_sandboxes)
        self._lock = threading.Lock()
        self._next_create = 0.0

    @classmethod
    def configured(cls, provider: str, account: str | None, max_sandboxes: int | None,
                   creates_per_s: float | None) -> AccountLimits:
        """The limits given, else ``DEEPGYM_<PROVIDER>_MAX_SANDBOXES`` (default 16) and
        ``DEEPGYM_<PROVIDER>_CREATES_PER_S`` (default 4)."""
        prefix = f"DEEPGYM_{provider.upper()}_"
        return cls(provider, account=account,
                   max_sandboxes=max_sandboxes or int(os.environ.get(prefix + "MAX_SANDBOXES", "16")),
                   creates_per_s=creates_per_s if creates_per_s is not None
                   else float(os.environ.get(prefix + "CREATES_PER_S", "4")))

    def acquire(self, lifetime_s: float = 3600.0) -> Callable[[], None]:
        """Wait for a free slot and for the next creation turn; the slot is held for a sandbox that lives at
        most ``lifetime_s``. Returns the slot's release (idempotent). Raises StartFailure after ``wait_s``."""
        release = self._ray_slot(lifetime_s) if ray_running() else self._host_slot()
        if self.creates_per_s is not None:
            with self._lock:
                now = time.monotonic()
                turn = max(now, self._next_create)
                self._next_create = turn + 1.0 / self.creates_per_s
            time.sleep(max(0.0, turn - now))
        return release

    def _refused(self, where: str) -> StartFailure:
        return StartFailure(f"no {self.provider} sandbox slot came free in {self.wait_s:g}s (at most "
                            f"{self.max_sandboxes} alive at once {where}); raise max_sandboxes if the account "
                            "allows it")

    def _host_slot(self) -> Callable[[], None]:
        try:
            return self._host.acquire(timeout_s=self.wait_s).release
        except AdmissionTimeout:
            raise self._refused("on this host") from None

    def _ray_slot(self, lifetime_s: float) -> Callable[[], None]:
        import ray

        slots = RaySlots.get(self.key, self.max_sandboxes)
        token = os.urandom(8).hex()
        deadline = time.monotonic() + self.wait_s
        while not ray.get(slots.take.remote(token, lifetime_s)):
            if time.monotonic() >= deadline:
                raise self._refused("in the Ray cluster")
            time.sleep(RAY_POLL_S)
        released = threading.Event()

        def release() -> None:
            if not released.is_set():
                released.set()
                slots.give.remote(token)

        return release


class RaySlots:
    """The Ray actor that holds an account's slots cluster-wide: leases, each until its sandbox's lifetime
    ends or it is given back. Named ``deepgym-slots-<key>`` in namespace ``deepgym``, detached (it outlives the
    process that made it), and needing no CPU."""

    def __init__(self, bound: int):
        self.bound = bound
        self.leases: dict[str, float] = {}

    def take(self, token: str, lifetime_s: float) -> bool:
        now = time.monotonic()
        self.leases = {held: until for held, until in self.leases.items() if until > now}
        if len(self.leases) >= self.bound:
            return False
        self.leases[token] = now + lifetime_s
        return True

    def give(self, token: str) -> None:
        self.leases.pop(token, None)

    def held(self) -> int:
        return len(self.leases)

    @staticmethod
    def get(key: str, bound: int):
        """The account's actor, made on first use anywhere in the cluster (the first bound wins)."""
        import ray

        global _RAY_ACTOR
        if _RAY_ACTOR is None:
            _RAY_ACTOR = ray.remote(num_cpus=0)(RaySlots)
        return _RAY_ACTOR.options(name=f"deepgym-slots-{key}", namespace=RAY_NAMESPACE, lifetime="detached",
                             get_if_exists=True).remote(bound)


_RAY_ACTOR = None  # RaySlots as a Ray actor class, made on first use
