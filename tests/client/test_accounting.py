"""No-verdict accounting: a warning for a block with too many samples without a verdict, naming the cause."""

import logging

from deepgym.accounting import NoVerdictMonitor


def test_warns_once_per_block_over_the_limit_naming_the_dominant_type(caplog):
    monitor = NoVerdictMonitor(block=10, limit=2)
    with caplog.at_level(logging.WARNING, logger="deepgym"):
        for error_type in ["image_missing", "image_missing", None, None]:
            monitor.record(error_type is not None, error_type)
        assert not caplog.records
        monitor.record(True, "daemon_unavailable")  # the third in this block: over the limit
        monitor.record(True, "image_missing")  # still the same block: no second warning
        assert len(caplog.records) == 1
        assert "3 of the last 5 samples had no verdict" in caplog.records[0].getMessage()
        assert "mostly image_missing x2, daemon_unavailable x1" in caplog.records[0].getMessage()
        for _ in range(4):
            monitor.record(False)
        for _ in range(3):  # a new block counts afresh
            monitor.record(True, "sandbox_lost")
    assert len(caplog.records) == 2 and "sandbox_lost x3" in caplog.records[1].getMessage()
    snapshot = monitor.snapshot()
    assert snapshot["samples"] == 13 and snapshot["no_verdict"] == 7 and snapshot["warnings"] == 2
    assert snapshot["by_error_type"] == {"image_missing": 3, "daemon_unavailable": 1, "sandbox_lost": 3}
