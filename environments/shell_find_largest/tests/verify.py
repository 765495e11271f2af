"""Hidden verifier of shell_find_largest: answer.txt names the largest file under data/, and every file
under data/ is still there, unchanged. The agent's files are read as data (no symlink followed)."""

import hashlib
import os

# variant -> (the answer, relative path -> sha256 of every file under data/)
EXPECTED = {0: ('data/archive/2023/q4/report-final.csv',
     {'data/archive/2022/summary.csv': 'ed85516fa4fdb3709f495e8d7e10b670938d5f153476c80c577a5b675278d4ea',
      'data/archive/2023/q3/report.csv': 'f330621265e6967d8b72a7e64e0eff97b2b41fb35ece1638a0855fb896a7fa9b',
      'data/archive/2023/q4/report-draft.csv': 'a379e1686da7529dc7f29ebbf856e3698c6bb600fc9a13e2dcd409ffd8889cf0',
      'data/archive/2023/q4/report-final.csv': '4b16d1f41681786d46551265a4af1bff8b4d837f09550e8d97ac278398ae75d7',
      'data/big-top.log': '9100441c21ba263cf227aa7842a6f4dacb5d1467abe071516ee6bf62e8c14c31',
      'data/images/a.txt': '9a94ea78276ec927137164e6e7eddcb92edcb03468db9d9b598b119c8573b12b',
      'data/images/b.txt': 'b7d26821cd4483214f7c2ddcac50f7acb55f3850fe4ddd93d0b3f787232c843a',
      'data/readme.txt': '84a92d384cf4bd2c99bab3a0319538faf6fc93facb0326ab3b75aca1f0cbac38'}),
 1: ('data/.cache/blob.bin',
     {'data/.cache/blob.bin': '56417537acd790bcfad5fdf316d9f5a04920acaeba45e1c8af8b6279bffed41c',
      'data/alpha.txt': '4ae6eebfb8f6a8eebb71ec6083cf89dd3d5e3b2f589fcc5c741ad4489f0e105a',
      'data/notes/long-notes.md': 'e5bd9510b05922ce96d51a6b0e4653486d8cf1bc3760728e8c6b66c85c20b485',
      'data/notes/todo.md': '02a9c3e729055de81e2e278c40833fcf85b5ccc9752d5d3afb48e12727b2b153',
      'data/src/main.py': 'bef1f3712770a3bfd73e48ee5fdd251e1c9f5e3febbc0fb4fc06b198736a0f4a',
      'data/src/util/helpers.py': '33c3af20b00c6058119b9686fa6f98ab1f436f2f8c4e93dc4aff162c123da755',
      'data/zz-largest-name.txt': '5d432d85a609df4f3195ef0f8c3e66a1100c2454042af254fdb9beeae60c6636'})}


def _read(path, limit=1 << 20):
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return None
    try:
        return os.read(fd, limit)
    finally:
        os.close(fd)


def verify(workspace, variant, probes):
    answer, files = EXPECTED[variant]
    given = _read(os.path.join(workspace, "answer.txt"), 4096)
    given = given.decode("utf-8", "replace").strip() if given is not None else None
    cases = [{"id": "answer", "passed": given in (answer, "./" + answer), "expected": answer, "actual": repr(given)}]
    changed = [rel for rel, digest in files.items()
               if (data := _read(os.path.join(workspace, rel))) is None or hashlib.sha256(data).hexdigest() != digest]
    cases.append({"id": "data-unchanged", "passed": not changed, "expected": "every file under data/ unchanged",
                  "actual": ", ".join(changed[:5]) or "unchanged"})
    ok = all(case["passed"] for case in cases)
    return {"score": 1.0 if ok else 0.0, "passed": ok,
            "details": "right" if ok else f"answer.txt holds {given!r}"
                       + (f"; changed: {changed[:3]}" if changed else ""),
            "cases": cases}
