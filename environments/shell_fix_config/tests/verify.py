"""Hidden verifier of shell_fix_config. deepgym has already found the `inventory` service running (started
through its supervisor) and answering GET /health with 200 (``services``); here its answer must count every
item of the untouched catalogue, and the catalogue file must be unchanged. The agent's files are read as
data (no symlink followed)."""

import hashlib
import json
import os

# variant -> (catalogue path, its sha256, the item count and checksum /health must report)
EXPECTED = {
    0: ("data/items.csv", "f68d317e78f750d33ae869c13f702b0c7c0b006bca61fa6c49a1fc7ab58efef4", 6,
        "32addd262f5978220741c9d30248e3198a2f04325c267b15d6409ef002095d1a"),
    1: ("data/stock.txt", "8572a1961b1d9c7da0802851677f1333f06f2b590fb8482e31482d491091d6a6", 7,
        "5b55e727ee3670ef2b57f7589b031fe6e6e6f7e0ed39dd8c0dc26b78e3bf5be5"),
}


def _read(path, limit=1 << 20):
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return None
    try:
        return os.read(fd, limit)
    finally:
        os.close(fd)


def verify(workspace, variant, probes, services):
    path, sha, count, checksum = EXPECTED[variant]
    found = services["inventory"]
    try:
        health = json.loads(found["body"])
    except ValueError:
        health = {}
    if not isinstance(health, dict):
        health = {}
    data = _read(os.path.join(workspace, path))
    cases = [
        {"id": "health-items", "passed": health.get("items") == count and health.get("checksum") == checksum,
         "expected": f"{count} items, checksum {checksum[:12]}",
         "actual": f"{health.get('items')!r} items, checksum {str(health.get('checksum'))[:12]}"},
        {"id": "catalogue-unchanged", "passed": data is not None and hashlib.sha256(data).hexdigest() == sha,
         "expected": f"{path} unchanged", "actual": "unchanged" if data is not None and
         hashlib.sha256(data).hexdigest() == sha else "changed or missing"},
    ]
    ok = all(case["passed"] for case in cases)
    return {"score": 1.0 if ok else 0.0, "passed": ok,
            "details": "the service is healthy and serves the whole catalogue" if ok else
                       "; ".join(f"{c['id']}: {c['actual']}" for c in cases if not c["passed"]),
            "cases": cases}
