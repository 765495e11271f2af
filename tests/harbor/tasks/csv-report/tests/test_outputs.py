import csv
import json
import os

REPORT = os.environ.get("REPORT_PATH", "/app/report.json")


def expected():
    sums = {}
    with open("/app/sales.csv") as handle:
        for row in csv.DictReader(handle):
            sums[row["region"]] = sums.get(row["region"], 0.0) + float(row["amount"])
    sums["total"] = sum(sums.values())
    return sums


def test_report_exists():
    assert os.path.isfile(REPORT)


def test_report_sums():
    with open(REPORT) as handle:
        report = json.load(handle)
    want = expected()
    assert set(report) == set(want)
    for key, value in want.items():
        assert abs(float(report[key]) - value) < 1e-9, key
