"""Fuzzing what a submission's worker may send back on its reply channel, through the runner's real reading
and decoding: a process writes fuzzed bytes to the channel pipe in fuzzed pieces and ends in a fuzzed way;
the runner's Supervised wait (deepgym/runner/confine/) reads it as it reads a worker, and the reply goes
through the step run_calls uses (deepgym/runner/kinds/function.py ``reply_of``, then channels.worker_reply). Loading
and one call, as run_calls does them. Every outcome must be a Reply or a fault charged to the submission:
never an exception (the runner's entry point would make it "no verdict") and never a fault of ours.

channels.worker_reply alone is fuzzed in tests/runner/test_runner_channels.py; this adds the pipe, the framing and
the process's end. Unconfined on the host (Processes that track its processes by session, as local mode
does), derandomized; one process per example.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
import tempfile
from collections.abc import Iterator

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from deepgym.runner.channels import Fault
from deepgym.runner.kinds.function import reply_of
from deepgym.runner.protocol import Limits, is_scored
from deepgym.runner.confine.local import Local
from deepgym.runner.confine.processes import Processes
from deepgym.runner.confine.supervise import Supervised

# A failing example's plan can be large; its repr must not turn into an error that hides the failure.
pytestmark = pytest.mark.filterwarnings("ignore::hypothesis.errors.HypothesisWarning")
FUZZ = settings(derandomize=True, database=None, deadline=None, max_examples=40,
                suppress_health_check=list(HealthCheck))
CALL_ID = "0123456789abcdef"
LIMITS = Limits(case_cpu_s=2.0, output_kb=64)
# The hostile worker: writes each piece (repeated) to the channel (a pause before some), optionally on stdout too, then
# ends as told: exit with a status, close the channel and live on briefly, or kill itself.
WORKER = """\
import json, os, signal, sys, time
fd, plan = int(sys.argv[1]), json.load(sys.stdin)
for piece, repeat, pause, to_stdout in plan["pieces"]:
    time.sleep(pause)
    data = bytes.fromhex(piece) * repeat
    try:
        os.write(1 if to_stdout else fd, data)
    except OSError:
        pass
end = plan["end"]
if end == "close":
    os.close(fd)
    time.sleep(0.3)
elif end == "kill":
    os.kill(os.getpid(), signal.SIGKILL)
os._exit(plan["status"])
"""

ready = json.dumps({"event": "ready"}).encode()
answer = json.dumps({"id": CALL_ID, "ok": True, "value": [1, 2]}).encode()
pieces = st.one_of(
    st.binary(max_size=64),
    st.sampled_from([ready + b"\n", answer + b"\n", ready, answer, b"\n", b"\r\n", b"\xff\xfe\n", b"[" * 5000 + b"\n",
                     json.dumps({"id": CALL_ID, "ok": False, "error_type": "verifier_error",
                                 "error": "\x1b[2J" * 50}).encode() + b"\n",
                     json.dumps({"event": "load_error", "error_type": "sandbox_lost"}).encode() + b"\n",
                     json.dumps({"id": CALL_ID, "ok": True, "value": "x" * 70000}).encode() + b"\n",
                     b"9" * 5000 + b"\n", b"NaN\n", b'{"id": "0123456789abcdef", "ok": true, "value": 1e999}\n',
                     b"\x00" * 1000]))
plans = st.fixed_dictionaries({
    "pieces": st.lists(st.tuples(pieces.map(bytes.hex), st.sampled_from([1, 1, 1, 2, 1 << 10]),
                                 st.sampled_from([0, 0, 0, 0.01]), st.booleans()), max_size=6),
    "end": st.sampled_from(["exit", "close", "kill"]),
    "status": st.sampled_from([0, 1, 3, 255])})


@contextlib.contextmanager
def _worker(plan: dict) -> Iterator[Supervised]:
    """The hostile worker running ``plan`` (on its stdin), supervised as run_calls supervises a worker."""
    sandbox = Processes(Local())
    reply_r, reply_w = os.pipe()
    req_r, req_w = os.pipe()
    with tempfile.TemporaryFile() as given_plan:
        given_plan.write(json.dumps(plan).encode())
        given_plan.seek(0)
        try:
            proc = sandbox.spawn([sys.executable, "-I", "-S", "-c", WORKER, str(reply_w)], pass_fds=(reply_w,),
                                 stdin=given_plan.fileno())
        finally:
            os.close(reply_w)
            os.close(req_r)
    process = Supervised(sandbox, proc, channel_fd=reply_r, requests_fd=req_w)
    try:
        yield process
    finally:
        process.close()
        sandbox.kill_all()
        proc.wait()


def _converse(plan: dict) -> list:
    """Read the worker's loading reply and one call's reply as run_calls does."""
    outcomes = []
    with _worker(plan) as process:
        for call_id in (None, CALL_ID):
            outcome = process.wait(process.processes.watch(), for_line=True, cpu_limit_s=LIMITS.case_cpu_s,
                                   wall_limit_s=LIMITS.case_wall_s, output_limit=LIMITS.output_kb * 1024,
                                   send=b'{"id": "%s"}\n' % call_id.encode() if call_id else b"")
            reply = reply_of(outcome, "running the case", call_id, LIMITS)
            outcomes.append(reply)
            if isinstance(reply, Fault):
                break
    return outcomes


def _charged(reply) -> None:
    if isinstance(reply, Fault):
        assert is_scored(reply.error_type), reply
        assert reply.message is None or isinstance(reply.message, str)
        return
    assert reply["error_type"] in ("", "solution_error", "solution_oom"), reply
    json.dumps([reply["error"], reply["raises"]], allow_nan=False).encode("utf-8")


@FUZZ
@given(plan=plans)
def test_any_bytes_on_the_reply_channel_are_a_reply_or_the_submissions_fault(plan: dict) -> None:
    outcomes = _converse(plan)
    assert outcomes
    for reply in outcomes:
        _charged(reply)


def test_the_worst_endings_are_the_submissions_fault() -> None:
    """A reply cut by the worker's death, one line past the runner's 16 MiB cap, a reply that never ends and
    the channel closed by a worker that lives on: each is a scored fault."""
    cases = {
        "cut": {"pieces": [[(ready + b"\n" + answer[:20]).hex(), 1, 0, False]], "end": "kill", "status": 0},
        "huge": {"pieces": [[(b"x" * 1024).hex(), 17 << 10, 0, False]], "end": "exit", "status": 0},
        "closed": {"pieces": [[ready.hex(), 1, 0, False]], "end": "close", "status": 0},
        "noisy": {"pieces": [[(b"y" * 1024).hex(), 200, 0, True], [(ready + b"\n").hex(), 1, 0, False]],
                  "end": "exit", "status": 0},
    }
    found = {name: _converse(plan)[-1] for name, plan in cases.items()}
    for name, reply in found.items():
        assert isinstance(reply, Fault) and is_scored(reply.error_type), (name, reply)
    # Past the cap, or out of time reading 17 MiB on a busy host: the submission's either way.
    assert found["huge"].error_type in ("output_limit_exceeded", "solution_timeout")
    assert found["noisy"].error_type == "output_limit_exceeded"


def test_a_line_of_megabytes_arrives_whole_and_the_bytes_after_it_stay_for_the_next_read() -> None:
    """A 12 MiB line (under the 16 MiB cap, so some two hundred reads of the channel) is one line, and the
    lines that came in the same read as its end are the next ones, in order; a reply that long is judged as
    any reply past the output limit is."""
    long = b"x" * (12 << 20)
    plan = {"pieces": [[(b"x" * 1024).hex(), 12 << 10, 0, False], [b"\nsecond\nthi".hex(), 1, 0, False],
                       [b"rd\n".hex(), 1, 0, False]], "end": "exit", "status": 0}
    with _worker(plan) as process:
        outcomes = [process.wait(process.processes.watch(), for_line=True, cpu_limit_s=60, wall_limit_s=600,
                                 output_limit=1 << 20) for _ in range(3)]
    assert [(outcome.kind, outcome.line) for outcome in outcomes] == [("line", long), ("line", b"second"),
                                                                    ("line", b"third")]
    reply = json.dumps({"id": CALL_ID, "ok": True, "value": "v" * (8 << 20)}).encode()
    found = _converse({"pieces": [[(ready + b"\n" + reply + b"\n").hex(), 1, 0, False]], "end": "exit",
                       "status": 0})
    assert isinstance(found[-1], Fault) and found[-1].error_type == "output_limit_exceeded", found


def _batch(plan: dict, call_ids: list[str]) -> list:
    """Read the worker's loading reply, then every call's reply of one batch, as run_calls does: every request
    sent at once, each reply in the window from the previous one (Meter.successor)."""
    outcomes = []
    with _worker(plan) as process:
        limits = dict(cpu_limit_s=LIMITS.case_cpu_s, wall_limit_s=LIMITS.case_wall_s,
                      output_limit=LIMITS.output_kb * 1024)
        loaded = reply_of(process.wait(process.processes.watch(), for_line=True, **limits), "loading", None, LIMITS)
        outcomes.append(loaded)
        if isinstance(loaded, Fault):
            return outcomes
        meter = process.processes.watch()
        send = b"".join(b'{"id": "%s"}\n' % call_id.encode() for call_id in call_ids)
        for call_id in call_ids:
            outcome = process.wait(meter, for_line=True, send=send, **limits)
            send = b""
            meter = meter.successor()
            reply = reply_of(outcome, "running the case", call_id, LIMITS)
            outcomes.append(reply)
            if isinstance(reply, Fault):
                break
    return outcomes


batches = st.lists(st.one_of(st.integers(), st.text(max_size=30), st.lists(st.integers(), max_size=5)),
                   min_size=1, max_size=8)


@FUZZ
@given(values=batches, cuts=st.lists(st.integers(min_value=0, max_value=1 << 16), max_size=8),
       pause=st.sampled_from([0, 0, 0.01]))
def test_a_batch_of_replies_in_any_pieces_comes_back_whole_and_in_order(values: list, cuts: list[int],
                                                                         pause: float) -> None:
    """However the worker's stream of replies is cut into writes, each call gets exactly its own reply."""
    call_ids = [f"{index:016x}" for index in range(len(values))]
    stream = ready + b"\n" + b"".join(json.dumps({"id": call_id, "ok": True, "value": value}).encode() + b"\n"
                                      for call_id, value in zip(call_ids, values))
    points = sorted({cut % len(stream) for cut in cuts} | {0, len(stream)})
    plan = {"pieces": [[stream[a:b].hex(), 1, pause, False] for a, b in zip(points, points[1:])], "end": "exit",
            "status": 0}
    outcomes = _batch(plan, call_ids)
    assert not isinstance(outcomes[0], Fault), outcomes[0]
    assert [reply["value"] for reply in outcomes[1:]] == values, outcomes


@FUZZ
@given(plan=plans, count=st.integers(min_value=1, max_value=4))
def test_any_bytes_in_a_batch_are_replies_or_the_submissions_fault(plan: dict, count: int) -> None:
    for reply in _batch(plan, [CALL_ID] * count):
        _charged(reply)


def test_a_failed_reply_while_the_oom_killer_struck_is_solution_oom():
    """A worker that waits for its OOM-killed child answers before the runner's next tick would see the kill:
    the window's OOM kills, read when the line arrives, decide. A right answer stays right."""
    from deepgym.runner.confine.supervise import Ending
    from deepgym.runner.confine.usage import Usage

    failed = b'{"id": "%s", "ok": false, "error_type": "solution_error", "error": "boom", "raises": "E"}' % (
        CALL_ID.encode())
    right = b'{"id": "%s", "ok": true, "value": 3}' % CALL_ID.encode()
    struck, calm = Usage(oom_kills=1), Usage()

    assert reply_of(Ending("line", struck, line=failed), "running the case", CALL_ID, LIMITS).error_type \
        == "solution_oom"
    assert reply_of(Ending("line", struck, line=right), "running the case", CALL_ID, LIMITS)["ok"] is True
    assert reply_of(Ending("line", calm, line=failed), "running the case", CALL_ID, LIMITS)["error_type"] \
        == "solution_error"
