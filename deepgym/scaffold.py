"""``deepgym new``: a new environment folder from a working template.

Each kind's template is a small, complete task that passes ``deepgym check`` as generated: replace the task,
keep the shape. Inside the repository the new environment also gets its target in docker-bake.hcl; elsewhere
(a folder on ``DEEPGYM_ENVIRONMENTS``), ``deepgym images build`` adds the target itself.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from importlib import resources
from pathlib import Path

from .bundle import bundle_root, environment_roots
from .environments import _NAME, list_environments
from .errors import DeepGymError
from .images import bake_target
from .runner.protocol import ENVIRONMENT_KINDS

PLACEHOLDER = "{{name}}"


def _add_to_group(text: str, group_name: str, name: str) -> str | None:
    group = re.search(r'(group "%s" \{\s*targets = \[)([^\]]*)(\])' % group_name, text)
    if group is None:
        return None
    names = sorted({*re.findall(r'"([a-z0-9_]+)"', group[2]), name})
    listed = "\n" + "".join(f'    "{n}",\n' for n in names) + "  "
    return text[:group.start(2)] + listed + text[group.end(2):]


def _add_to_bake_file(name: str, kind: str) -> Path:
    bake = bundle_root() / "docker-bake.hcl"
    text = _add_to_group(bake.read_text(), "environments", name)
    if text is None:
        raise DeepGymError(f"{bake} has no group \"environments\"; add the target for {name} by hand")
    if kind == "desktop":
        text = _add_to_group(text, "desktops", name) or text
    bake.write_text(text.rstrip("\n") + "\n" + bake_target(name, f"environments/{name}", kind))
    return bake


def new_environment(name: str, kind: str, directory: Path | None = None) -> Path:
    """Create ``<directory>/<name>`` (default: the repository's environments folder) from the template of
    ``kind``. Returns the new folder."""
    if not _NAME.match(name):
        raise DeepGymError(f"{name!r} is not a valid environment name: use lowercase letters, digits and "
                           "underscores, starting with a letter")
    if kind not in ENVIRONMENT_KINDS:
        raise DeepGymError(f"unknown kind {kind!r}; use one of {', '.join(ENVIRONMENT_KINDS)}")
    if name in list_environments():
        raise DeepGymError(f"an environment called {name!r} already exists")
    in_bundle = directory is None or directory.resolve() == (bundle_root() / "environments").resolve()
    directory = bundle_root() / "environments" if directory is None else directory
    if not in_bundle and directory.resolve() not in [root.resolve() for root in environment_roots()]:
        raise DeepGymError(f"{directory} is not on DEEPGYM_ENVIRONMENTS, so deepgym would not find the new "
                           f"environment; export DEEPGYM_ENVIRONMENTS={directory} first")
    target = directory / name
    template = resources.files("deepgym") / "templates" / kind
    with resources.as_file(template) as source:
        shutil.copytree(source, target, ignore=shutil.ignore_patterns("__pycache__", ".keep"))
    for path in target.rglob("*"):
        if path.is_file():
            path.write_text(path.read_text().replace(PLACEHOLDER, name))
    (target / "tests").mkdir(exist_ok=True)
    generator = target / "generator" / "generate.py"
    if generator.exists():
        subprocess.run([sys.executable, str(generator)], check=True)
    if in_bundle:
        _add_to_bake_file(name, kind)
    return target
