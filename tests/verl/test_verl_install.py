"""`pip install "deepgym[verl]"` is enough: every distribution that verl's trainers (v1, the default, and the
legacy one), its agent loops and deepgym's own loop import comes with the extra, directly or through what it
requires. verl 0.9.1 imports some modules it does not declare (TransferQueue for the v1 trainer, among others);
a user who installs only the extra must not meet them as an ImportError at the trainer's start."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest


IMPORTED_BY_TRAINING = ["verl.trainer.main_ppo", "verl.trainer.ppo.v1", "verl.trainer.main_ppo_v0",
                        "verl.experimental.agent_loop", "deepgym.integrations.verl_mask"]

# Run in a fresh interpreter, so sys.modules holds just what these imports pulled in.
PROBE = """
import importlib, json, re, sys
from importlib import metadata

def key(name):
    return re.sub(r"[-_.]+", "-", name).lower()

for module in sys.argv[1:]:
    importlib.import_module(module)
# By file, not by top-level name: a namespace package (opentelemetry) is shared by many distributions, and
# importing one of them must not count the others that happen to be installed (daytona brings several).
owner_of = {str(dist.locate_file(f)): key(dist.metadata["Name"]) for dist in metadata.distributions()
            for f in dist.files or []}
imported = {owner_of[m.__file__] for m in list(sys.modules.values()) if getattr(m, "__file__", None) in owner_of}

def closure(requirement, extras):
    seen, todo = set(), [(requirement, frozenset(extras))]
    while todo:
        name, wanted = todo.pop()
        if (key(name), wanted) in seen:
            continue
        seen.add((key(name), wanted))
        try:
            requires = metadata.requires(name) or []
        except metadata.PackageNotFoundError:
            continue
        for line in requires:
            marker = re.search(r'extra\\s*==\\s*"([^"]+)"', line)
            if marker and marker.group(1) not in wanted:
                continue
            match = re.match(r"\\s*([A-Za-z0-9_.-]+)\\s*(?:\\[([^\\]]*)\\])?", line)
            todo.append((match[1], frozenset(x.strip() for x in (match[2] or "").split(",") if x.strip())))
    return {name for name, _ in seen}

print(json.dumps(sorted(imported - closure("deepgym", ["verl"]) - {"torch"})))
"""


@pytest.mark.verl
def test_the_verl_extra_brings_everything_the_trainers_import():
    result = subprocess.run([sys.executable, "-c", PROBE, *IMPORTED_BY_TRAINING], capture_output=True, text=True,
                            timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    undeclared = json.loads(result.stdout.splitlines()[-1])
    assert undeclared == [], f"imported by verl's trainers but not brought by deepgym[verl]: {undeclared}"
