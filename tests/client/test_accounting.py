"""No-verdict accounting: a warning for a block with too many samples without a verdict, naming the cause."""

import logging

from deepgym.accounting import NoVerdictMonitor


def block_warnings(caplog) -> list[str]:
    return [r.getMessage() for r in caplog.records if "in a block of" in r.getMessage()]


def test_warns_once_per_block_over_the_limit_naming_the_dominant_type(caplog):
    monitor = NoVerdictMonitor(block=10, limit=2)
    with caplog.at_level(logging.WARNING, logger="deepgym"):
        for error_type in ["image_missing", "image_missing", None, None]:
            monitor.record(error_type is not None, error_type)
        assert not block_warnings(caplog)
        monitor.record(True, "daemon_unavailable")  # the third in this block: over the limit
        monitor.record(True, "image_missing")  # still the same block: no second warning
        assert len(block_warnings(caplog)) == 1
        assert "3 of the last 5 samples had no verdict" in block_warnings(caplog)[0]
        assert "mostly image_missing x2, daemon_unavailable x1" in block_warnings(caplog)[0]
        for _ in range(4):
            monitor.record(False)
        for _ in range(3):  # a new block counts afresh
            monitor.record(True, "sandbox_lost")
    assert len(block_warnings(caplog)) == 2 and "sandbox_lost x3" in block_warnings(caplog)[1]
    snapshot = monitor.snapshot()
    assert snapshot["samples"] == 13 and snapshot["no_verdict"] == 7 and snapshot["warnings"] == 2
    assert snapshot["by_error_type"] == {"image_missing": 3, "daemon_unavailable": 1, "sandbox_lost": 3}


def test_logs_each_cause_once_per_block_with_its_reason(caplog):
    monitor = NoVerdictMonitor(block=4, limit=10)
    with caplog.at_level(logging.WARNING, logger="deepgym"):
        for _ in range(3):
            monitor.record(True, "daemon_unavailable", reason="the engine stopped answering", environment="two_sum")
        monitor.record(True, "image_missing", reason="not built")
        monitor.record(True, "daemon_unavailable", reason="the engine stopped answering", environment="two_sum")
    lines = [r.getMessage() for r in caplog.records]
    assert lines == ["deepgym: no verdict (daemon_unavailable) for two_sum: the engine stopped answering",
                     "deepgym: no verdict (image_missing): not built",
                     "deepgym: no verdict (daemon_unavailable) for two_sum: the engine stopped answering"]


def test_notes_a_step_of_the_wall_clock_once(caplog):
    monitor = NoVerdictMonitor()
    clocks = {"wall": 1000.0, "monotonic": 50.0}
    monitor.wall, monitor.monotonic = (lambda: clocks["wall"]), (lambda: clocks["monotonic"])
    with caplog.at_level(logging.WARNING, logger="deepgym"):
        for wall, monotonic in [(1001.0, 51.0), (402.0, 52.0), (403.0, 53.5), (1001.0, 54.0)]:
            monitor.record(False)
            clocks.update(wall=wall, monotonic=monotonic)
        monitor.record(False)
    lines = [r.getMessage() for r in caplog.records]
    assert monitor.clock_steps == 2 and len(lines) == 2
    assert "stepped back by 600 s" in lines[0] and "stepped forward by 598 s" in lines[1]
