"""A function environment's hidden cases: computed by its ``cases.py`` once per variant when the image is built,
and read back by the runner, so that no sample pays for the oracle again.

``python3 -I -B -m deepgym_runner.kinds.hidden_cases ENV_DIR MANIFEST`` (a step of every function environment's
Dockerfile, as root, before the folder is made root-only) writes one file ``ENV_DIR/cases-V.json`` per variant
V (the manifest's ``variants``; a sample reads only its own): the cases, and whether ``cases.py`` has a ``check``
and a ``FLOAT_TOLERANCE``. At run time :func:`load` takes a variant's cases from there and imports ``cases.py``
only for a ``check``, or when the file is missing or was not made from this ``cases.py`` (the ``local``
runtime, a folder without the files): that computes the cases as before. The files sit beside ``cases.py``, as
unreadable to the submission.

A variant whose cases would not come back from JSON as they are (tuples, non-string keys, NaN) is not stored:
the runner computes it, so a case is always exactly what ``cases()`` returned.
"""

from __future__ import annotations

import binascii
import os
import sys

from .. import wire

TYPE_CHECKING = False  # typing is not imported at start-up: its milliseconds are paid per sample
if TYPE_CHECKING:
    from types import ModuleType
    from typing import Any, Callable

CASES_FILE = "cases-{variant}.json"
MODULE_FILE = "cases.py"


def load_cases_module(env_dir: str) -> ModuleType:
    """Import the hidden ``cases.py`` (trusted code) from the environment directory."""
    import importlib.util  # here: only a task with a ``check`` (or without stored cases) pays for its imports

    path = os.path.join(env_dir, MODULE_FILE)
    spec = importlib.util.spec_from_file_location("deepgym_hidden_cases", path)
    if spec is None or spec.loader is None:
        raise FileNotFoundError(path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _source_stamp(env_dir: str) -> str:
    """What ties the stored cases to this ``cases.py``: its size and CRC (a guard against a stale file, which
    only root can write; binascii, unlike hashlib, costs nothing to import)."""
    with open(os.path.join(env_dir, MODULE_FILE), "rb") as f:
        data = f.read()
    return f"{len(data)}:{binascii.crc32(data):08x}"


def load(env_dir: str, variant: int) -> tuple[list[dict[str, Any]], Callable[[Any, Any, Any], bool] | None, Any]:
    """(cases, check or None, FLOAT_TOLERANCE or None) of ``variant``, from its stored file when there is one."""
    stored = _stored(env_dir, variant)
    if stored is not None and not stored["check"]:
        return stored["cases"], None, stored["float_tolerance"]
    hidden = load_cases_module(env_dir)
    cases = stored["cases"] if stored is not None else hidden.cases(variant)
    return cases, getattr(hidden, "check", None), getattr(hidden, "FLOAT_TOLERANCE", None)


def _stored(env_dir: str, variant: int) -> dict[str, Any] | None:
    """The stored cases of ``variant`` when its file exists and was made from this very ``cases.py``, else None."""
    try:
        with open(os.path.join(env_dir, CASES_FILE.format(variant=int(variant))), "rb") as f:
            stored = wire.loads(f.read())
    except (OSError, ValueError):
        return None
    if not isinstance(stored, dict) or stored.get("source") != _source_stamp(env_dir):
        return None
    return stored


def manifest_variants(text: str) -> int:
    """The ``variants`` of a manifest's text (a top-level ``variants: N`` line; 1 without one). Only how many
    variants are stored depends on it: a variant not stored is computed at run time."""
    for line in text.splitlines():
        key, sep, value = line.partition(":")
        if sep and key == "variants":
            return int(value.split("#", 1)[0].strip())
    return 1


def bake(env_dir: str, variants: int) -> int:
    """Compute every variant's cases and write each to its file in ``env_dir`` (mode 0600). Returns how many
    variants were stored."""
    hidden = load_cases_module(env_dir)
    facts = {"source": _source_stamp(env_dir), "check": callable(getattr(hidden, "check", None)),
             "float_tolerance": getattr(hidden, "FLOAT_TOLERANCE", None)}
    stored = 0
    for variant in range(variants):
        cases = hidden.cases(variant)
        if wire.loads(wire.dumps(cases)) != cases:
            print(f"hidden_cases: variant {variant}'s cases do not survive JSON; the runner will compute them",
                  file=sys.stderr)
            continue
        path = os.path.join(env_dir, CASES_FILE.format(variant=variant))
        with os.fdopen(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), "w") as f:
            f.write(wire.dumps({**facts, "cases": cases}))
        stored += 1
    return stored


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print("usage: python3 -m deepgym_runner.kinds.hidden_cases ENV_DIR MANIFEST", file=sys.stderr)
        return 2
    env_dir, manifest = argv
    with open(manifest, encoding="utf-8") as f:
        variants = manifest_variants(f.read())
    print(f"hidden_cases: stored {bake(env_dir, variants)} of {variants} variant(s) in {env_dir}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
