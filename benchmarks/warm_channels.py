"""How many bits each counter that outlives a warm sample can carry to the next sample in the same container.

    python benchmarks/warm_channels.py              # coin_change, 16 quiet samples, one pushing sample
    python benchmarks/warm_channels.py --samples 32

The clean-up between warm samples (deepgym/runner/cleanup.py) removes or refuses every object a sample can
leave, but some numbers move with what a sample does and cannot be wound back: the container's cgroup
counters, the next pid, the next inode number of its tmpfs folders, the server's own CPU time and page faults.
A sample can push each of them by an amount of its choosing, and the next sample can read it. This script
measures, in one pool of one warm container of the real image:

- **noise**: the spread (max - min) of each counter's change from one quiet sample to the next (the same
  right answer, again and again): what the next sample cannot tell apart;
- **reach**: how far one sample can push each counter within its environment's CPU budget (``total_cpu_s``),
  from the rate it reaches in a short push, per CPU second spent;
- **bits** = log2(1 + reach / max(noise, 1)): the most one sample can pass to the next through it, without
  counting the bits lost to the uncertainty of the rate. The rule (docs/warm.md) is under 64 for each.

Each sample reads the counters at the start of its first case and reports them in its error details (a
verdict of ``solution_error``), the way the isolation tests read what a sample sees.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from deepgym import DeepGym, load_environment  # noqa: E402

LEFT = 20000  # files the pushing sample leaves in /dev/shm for the server to remove

# Read inside the sample: the name of each counter and the expression that reads it.
READ = r'''
import json, os, time
def _server():  # the lowest pid past Docker's init (pid 1) whose command is the server (its zygote comes later)
    for pid in sorted((p for p in os.listdir("/proc") if p.isdigit() and p != "1"), key=int):
            try:
                if b"serve" in open(f"/proc/{pid}/cmdline", "rb").read():
                    return pid
            except OSError:
                pass
def _stat(key):
    for line in open("/sys/fs/cgroup/memory/memory.stat"):
        name, value = line.split()
        if name == key:
            return int(value)
def _inode(folder):
    path = os.path.join(folder, "probe-%d" % os.getpid())
    open(path, "w").close()
    number = os.stat(path).st_ino
    os.unlink(path)
    return number
def _server_stat(field):
    return int(open(f"/proc/{_server()}/stat").read().rsplit(")", 1)[1].split()[field])
def _server_status(key):
    for line in open(f"/proc/{_server()}/status"):
        if line.startswith(key + ":"):
            return int(line.split()[1])
COUNTERS = {
    "cgroup CPU ns (cpuacct.usage)": lambda: int(open("/sys/fs/cgroup/cpuacct/cpuacct.usage").read()),
    "cgroup memory peak bytes": lambda: int(open("/sys/fs/cgroup/memory/memory.max_usage_in_bytes").read()),
    "cgroup page faults (memory.stat pgfault)": lambda: _stat("total_pgfault"),
    "cgroup pages in (memory.stat pgpgin)": lambda: _stat("total_pgpgin"),
    "next pid (ns_last_pid)": lambda: int(open("/proc/sys/kernel/ns_last_pid").read()),
    "next inode of /tmp": lambda: _inode(os.getcwd()),
    "next inode of /dev/shm": lambda: _inode("/dev/shm"),
    "server's CPU ticks (/proc/PID/stat)": lambda: _server_stat(11) + _server_stat(12),
    "server's minor faults (/proc/PID/stat)": lambda: _server_stat(7),
    "server's peak RSS kB (VmHWM)": lambda: _server_status("VmHWM"),
}
def _read():
    return {"host": os.uname().nodename, **{name: read() for name, read in COUNTERS.items()}}
'''

# Pushes each counter as fast as this process can for PUSH_S of CPU, and reports the rate per CPU second.
PUSH = r'''
PUSH_S = 0.04
def _push_cpu():
    end = time.process_time() + PUSH_S
    while time.process_time() < end:
        pass
def _push_memory():
    block = bytearray(200 << 20)
    for at in range(0, len(block), 4096):
        block[at] = 1
def _push_faults():
    import mmap
    end = time.process_time() + PUSH_S
    while time.process_time() < end:
        block = mmap.mmap(-1, 1 << 20)
        for at in range(0, len(block), 4096):
            block[at] = 1
        block.close()
def _push_pids():
    end = time.process_time() + PUSH_S
    while time.process_time() < end:
        pid = os.fork()
        if pid == 0:
            os._exit(0)
        os.waitpid(pid, 0)
def _push_files(folder):
    def push():
        end = time.process_time() + PUSH_S
        while time.process_time() < end:
            path = os.path.join(folder, "push")
            open(path, "w").close()
            os.unlink(path)
    return push
LEFT = 20000
def _push_server():  # files the server lists and removes after the sample
    for n in range(LEFT):
        open("/dev/shm/left-%d" % n, "w").close()
PUSHES = {
    "cgroup CPU ns (cpuacct.usage)": _push_cpu,
    "cgroup memory peak bytes": _push_memory,
    "cgroup page faults (memory.stat pgfault)": _push_faults,
    "cgroup pages in (memory.stat pgpgin)": _push_faults,
    "next pid (ns_last_pid)": _push_pids,
    "next inode of /tmp": _push_files(os.getcwd()),
    "next inode of /dev/shm": _push_files("/dev/shm"),
}
def coin_change(coins, amount):
    rates = {}
    for name, push in PUSHES.items():
        before, cpu = COUNTERS[name](), time.process_time()
        push()
        rates[name] = (COUNTERS[name]() - before) / max(time.process_time() - cpu, 1e-6)
    _push_server()
    raise RuntimeError("REPORT=" + json.dumps(rates) + "=END")
'''

QUIET = r'''
_seen = _read()
def coin_change(coins, amount):
    raise RuntimeError("REPORT=" + json.dumps(_seen) + "=END")
'''


def reported(verdict) -> dict:
    if "REPORT=" not in verdict.details:
        raise SystemExit(f"the probe did not report: {verdict}")
    return json.loads(verdict.details.split("REPORT=", 1)[1].split("=END", 1)[0])


def fenced(code: str) -> str:
    return f"```python\n{code}\n```"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--env", default="coin_change")
    parser.add_argument("--samples", type=int, default=16, help="quiet samples in a row (default 16)")
    args = parser.parse_args()
    os.environ["DEEPGYM_WARM_CONTAINERS"] = "1"
    os.environ["DEEPGYM_WARM_SAMPLES"] = str(args.samples + 3)
    limits = load_environment(args.env).limits
    budget_s, memory_bytes = limits.total_cpu_s, limits.memory_mb << 20
    with DeepGym("docker", max_parallel=1) as gym:
        def run(code: str) -> dict:
            return reported(gym.run(args.env, fenced(code), isolation="process"))

        quiet = [run(READ + QUIET) for _ in range(args.samples)]
        rates = run(READ + PUSH)
        after = run(READ + QUIET)
    if len({seen.pop("host") for seen in [*quiet, after]}) > 1:
        raise SystemExit("the samples ran in more than one container: the numbers are not one container's")
    print(f"{args.env}, {args.samples} quiet samples in one warm container, CPU budget {budget_s} s per sample")
    print(f"{'counter':44} {'noise':>12} {'reach':>14} {'bits':>6}")
    worst = 0.0
    for name in quiet[0]:
        steps = [later[name] - earlier[name] for earlier, later in zip(quiet, quiet[1:])]
        noise = max(steps) - min(steps)
        if name == "cgroup memory peak bytes":  # set once, anywhere up to the limit
            reach = memory_bytes
        elif name in rates:
            reach = rates[name] * budget_s
        else:  # the server's own counters move with the files it removes: per file, times the files one
            # sample can leave within its budget
            per_file = max(0, after[name] - quiet[-1][name] - statistics.median(steps)) / LEFT
            reach = per_file * rates["next inode of /dev/shm"] * budget_s
        bits = math.log2(1 + reach / max(noise, 1))
        worst = max(worst, bits)
        print(f"{name:44} {noise:12,.0f} {reach:14,.0f} {bits:6.1f}")
    print(f"widest channel: {worst:.1f} bits (the rule: under 64)")
    return 0 if worst < 64 else 1


if __name__ == "__main__":
    raise SystemExit(main())
