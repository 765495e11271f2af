import csv
import json

sums = {}
with open("/app/sales.csv") as handle:
    for row in csv.DictReader(handle):
        sums[row["region"]] = sums.get(row["region"], 0.0) + float(row["amount"])
sums["total"] = sum(sums.values())
with open("/app/report.json", "w") as out:
    json.dump(sums, out)
