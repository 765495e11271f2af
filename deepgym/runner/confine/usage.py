"""What a submission used, and what it may still use: the usage of one measured window, the sample's budget across
its cases, the memory evidence that wins over a time limit, and the three ways a sample ends without a verdict
for the submission.
"""

from __future__ import annotations

import time

from ..protocol import Limits
from .procfs import memory_peak, proc_stat

# A process that spent at least this share of its CPU in the kernel while its resident memory peaked at this
# share of its address-space limit was growing into its memory limit (see growing_into_memory_limit).
KERNEL_CPU_SHARE = 0.5
MEMORY_LIMIT_SHARE = 0.25


def growing_into_memory_limit(pids: list[int]) -> str | None:
    """Why the processes ``pids`` were running into their memory limit, or None.

    A process growing into its limit spends its CPU in the kernel, which hands memory out in page faults; on a
    busy host each fault costs several times more, so a memory bomb can use up its CPU limit before its
    address space runs out (RLIMIT_AS, set by the worker). Evidence: most of its CPU went to the kernel while
    its resident memory reached a quarter of its address-space limit, so a bomb is told apart as long as its
    whole limit would cost at most four CPU limits to fault in. A computation that is only slow spends its CPU in user
    space; a process busy in system calls holds little memory."""
    for pid in pids:
        stat, memory = proc_stat(pid), memory_peak(pid)
        if stat is None or memory is None or stat.cpu_s <= 0:
            continue
        peak, limit = memory
        if stat.system_s >= KERNEL_CPU_SHARE * stat.cpu_s and peak >= MEMORY_LIMIT_SHARE * limit:
            return (f"running into its memory limit ({peak >> 20} MiB resident of {limit >> 20} MiB of address "
                    f"space, {stat.system_s:.2f}s of its {stat.cpu_s:.2f}s of CPU in the kernel getting memory)")
    return None


class Usage:
    """What the untrusted processes did during one measured window."""

    __slots__ = ("cpu_s", "wall_s", "samples", "runnable_samples", "present_samples", "runner_lag_s", "psi_stall_s",
                 "oom_kills")

    def __init__(self, cpu_s: float = 0.0, wall_s: float = 0.0, samples: int = 0, runnable_samples: int = 0,
                 present_samples: int = 0, runner_lag_s: float = 0.0, psi_stall_s: float | None = None,
                 oom_kills: int = 0):
        self.cpu_s, self.wall_s, self.samples, self.runnable_samples = cpu_s, wall_s, samples, runnable_samples
        self.present_samples = present_samples  # samples at which a process of the submission existed
        self.runner_lag_s, self.psi_stall_s, self.oom_kills = runner_lag_s, psi_stall_s, oom_kills

    def __repr__(self) -> str:
        return f"Usage({', '.join(f'{name}={getattr(self, name)!r}' for name in self.__slots__)})"

    @property
    def runnable_fraction(self) -> float:
        return self.runnable_samples / self.samples if self.samples else 0.0

    def starved(self) -> bool:
        """True when the host, not the submission, kept the case from finishing: the submission got little
        CPU, the host's CPU pressure says others held it, and either the submission was runnable most of the
        time or the runner itself (which the submission may be waiting on) ran late most of the time. Only
        meaningful when a wall-clock limit fired first."""
        if self.wall_s <= 0:
            return False
        # The wall limit is WALL_FACTOR times the CPU limit, so a process that got at least 1/WALL_FACTOR
        # of a CPU always meets its CPU limit before its wall limit: getting less while runnable is starving.
        if self.cpu_s >= self.wall_s / Limits.WALL_FACTOR:
            return False
        if self.psi_stall_s is not None and self.psi_stall_s < 0.2 * self.wall_s:
            return False
        return self.runnable_fraction >= 0.5 or self.runner_lag_s >= 0.5 * self.wall_s


class Budget:
    """A sample's total CPU and wall-clock budget across its cases (the runner enforces it itself)."""

    def __init__(self, limits: Limits):
        self.limits = limits
        self.started = time.monotonic()
        self.usage = Usage()

    def spend(self, usage: Usage) -> None:
        total = self.usage
        total.cpu_s += usage.cpu_s
        total.samples += usage.samples
        total.runnable_samples += usage.runnable_samples
        total.present_samples += usage.present_samples
        total.runner_lag_s += usage.runner_lag_s
        if usage.psi_stall_s is not None:
            total.psi_stall_s = (total.psi_stall_s or 0.0) + usage.psi_stall_s

    def cpu_left(self) -> float:
        return self.limits.total_cpu_s - self.usage.cpu_s

    def used_up(self) -> str | None:
        """Why no further case may run, or None. Raises HostOverloaded when the wall-clock budget ran out
        while the host starved the submission."""
        if self.cpu_left() <= 0:
            return "not run: the total CPU limit was used up"
        self.usage.wall_s = time.monotonic() - self.started
        if self.usage.wall_s > self.limits.total_wall_s:
            if self.usage.starved():
                raise HostOverloaded(f"the total wall-clock limit of {self.limits.total_wall_s:g}s ran out while the "
                                     f"host starved the submission ({self.usage.cpu_s:.2f}s of CPU)")
            return f"not run: the total wall-clock limit of {self.limits.total_wall_s:g}s was used up"
        return None


class HostOverloaded(Exception):
    """A wall-clock limit fired while the host starved the submission of CPU: nobody can be judged."""


class RunnerStalled(Exception):
    """A limit fired before any process of the submission existed: the runner's side held it up."""


class BrokenTests(RuntimeError):
    """The trusted tests themselves failed (a dataset row's test code): the runner's side, so no verdict."""

