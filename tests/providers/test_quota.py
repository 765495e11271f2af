"""A provider account's limits (deepgym.sandbox.quota): the slots are shared by every process of the host (file
locks) and, under Ray, by every process of the cluster (a named detached actor); the creation rate is per
process. No provider and no Docker: the limits are exercised directly, from several processes."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time

import pytest
from support import ROOT

from deepgym.sandbox import StartFailure
from deepgym.sandbox.quota import AccountLimits, account_key


@pytest.fixture(autouse=True)
def own_slots(tmp_path, monkeypatch):
    monkeypatch.setenv("DEEPGYM_ADMISSION_DIR", str(tmp_path / "slots"))


def test_creations_are_spaced_by_the_rate():
    limits = AccountLimits("test", max_sandboxes=8, creates_per_s=20.0)
    started = time.monotonic()
    for _ in range(5):
        limits.acquire()
    assert time.monotonic() - started >= 4 / 20.0 * 0.9


def test_a_slot_waits_for_a_release_then_gives_up():
    limits = AccountLimits("test", max_sandboxes=1, creates_per_s=None, wait_s=0.3)
    release = limits.acquire()
    threading.Timer(0.1, release).start()
    limits.acquire()  # the release came in time
    with pytest.raises(StartFailure, match="max_sandboxes"):
        limits.acquire()


@pytest.mark.parametrize("fields", [{"max_sandboxes": 0, "creates_per_s": None},
                                    {"max_sandboxes": 1, "creates_per_s": 0.0}])
def test_nonsense_limits_are_refused(fields):
    with pytest.raises(ValueError):
        AccountLimits("test", **fields)


def test_the_key_names_the_provider_and_hides_the_account():
    key = account_key("daytona", "dtn_secret")
    assert key.startswith("daytona-") and "secret" not in key and key != account_key("daytona", "other")


HOLDER = textwrap.dedent("""
    import json, sys, time
    from deepgym.sandbox.quota import AccountLimits
    limits = AccountLimits("test", account=sys.argv[1], max_sandboxes=int(sys.argv[2]), creates_per_s=None)
    spans = []
    for _ in range(int(sys.argv[3])):
        release = limits.acquire()
        start = time.time()
        time.sleep(float(sys.argv[4]))
        spans.append((start, time.time()))
        release()
    print(json.dumps(spans))
""")


def run_holders(*accounts: str, bound: int, rounds: int = 3, hold_s: float = 0.3) -> dict[str, list]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    processes = [(account, subprocess.Popen([sys.executable, "-c", HOLDER, account, str(bound), str(rounds),
                                             str(hold_s)], stdout=subprocess.PIPE, text=True, env=env))
                 for account in accounts]
    spans: dict[str, list] = {}
    for account, process in processes:
        out, _ = process.communicate(timeout=120)
        assert process.returncode == 0
        spans.setdefault(account, []).extend(json.loads(out))
    return spans


def most_at_once(spans: list) -> int:
    edges = sorted([(start, 1) for start, _ in spans] + [(end, -1) for _, end in spans], key=lambda e: (e[0], e[1]))
    held = most = 0
    for _, step in edges:
        held += step
        most = max(most, held)
    return most


def test_the_bound_is_shared_by_every_process_of_the_host():
    spans = run_holders("acme", "acme", "acme", "acme", bound=2)["acme"]
    assert len(spans) == 12 and most_at_once(spans) == 2, "four processes, twelve slots, never more than two at once"


def test_each_account_has_its_own_bound():
    spans = run_holders("acme", "acme", "other", "other", bound=1, rounds=2)
    assert most_at_once(spans["acme"]) == 1 and most_at_once(spans["other"]) == 1
    assert most_at_once(spans["acme"] + spans["other"]) == 2, "one account does not wait for another's slots"


def test_a_killed_process_leaves_no_slot_behind():
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, "acme", "1", "1", "60"], env=env)
    limits = AccountLimits("test", account="acme", max_sandboxes=1, creates_per_s=None, wait_s=0.5)
    deadline = time.monotonic() + 30
    while True:  # the holder has its slot once ours times out
        try:
            limits.acquire()()
        except StartFailure:
            break
        assert time.monotonic() < deadline, "the holder never took its slot"
        time.sleep(0.1)
    holder.send_signal(signal.SIGKILL)
    holder.wait()
    limits.wait_s = 0  # free at the first try: the kernel dropped the dead holder's lock
    limits.acquire()()


RAY_HOLDERS = textwrap.dedent("""
    import json, time
    import ray
    from deepgym.sandbox import StartFailure
    from deepgym.sandbox.quota import AccountLimits, RaySlots

    ray.init(num_cpus=1, include_dashboard=False, log_to_driver=False)

    @ray.remote(num_cpus=0)
    def hold(hold_s):
        limits = AccountLimits("test", account="acme", max_sandboxes=2, creates_per_s=None)
        release = limits.acquire()
        start = time.time()
        time.sleep(hold_s)
        end = time.time()
        release()
        return start, end

    spans = ray.get([hold.remote(1.0) for _ in range(5)])
    held_after = ray.get(RaySlots.get(AccountLimits("test", account="acme", max_sandboxes=2,
                                                    creates_per_s=None).key, 2).held.remote())
    # A holder that never gives its slot back keeps it for its sandbox's lifetime, and only that long.
    lone = AccountLimits("test", account="lone", max_sandboxes=1, creates_per_s=None, wait_s=0)
    lone.acquire(lifetime_s=5.0)
    try:
        lone.acquire()
        early = True
    except StartFailure:
        early = False
    lone.wait_s = 120
    lone.acquire()  # StartFailure if the lapsed lease never came free
    print(json.dumps({"spans": spans, "held_after": held_after, "lease_free_early": early}))
    ray.shutdown()
""")


def test_under_ray_the_bound_holds_across_the_cluster():
    pytest.importorskip("ray")
    env = {**os.environ, "PYTHONPATH": str(ROOT), "RAY_USAGE_STATS_ENABLED": "0"}
    out = subprocess.run([sys.executable, "-c", RAY_HOLDERS], capture_output=True, text=True, env=env, timeout=240)
    assert out.returncode == 0, out.stderr[-3000:]
    found = json.loads(out.stdout.strip().splitlines()[-1])
    assert len(found["spans"]) == 5 and most_at_once(found["spans"]) == 2, found
    assert found["held_after"] == 0
    assert found["lease_free_early"] is False, "the lease came free before its lifetime"
