"""The bake target of an imported environment: built from the task's own context, not from deepgym's base.

An environment of deepgym's own is ``FROM base`` with its folder as the context. An imported one starts from
the task's base image, so its target differs in three ways (the rest, tags and hash labels, is the same, so
``deepgym images build`` and ``image_status`` treat it like any other):

- ``context`` is the task's ``environment/`` folder alone: a task's ``COPY . /app`` must never pick up the
  hidden tests or the reference solution that sit beside it in the environment's folder;
- ``dockerfile`` is the environment's combined Dockerfile (:mod:`deepgym.harbor.dockerfile`);
- two named contexts carry deepgym's parts into the runner's layers: ``deepgym_runner`` (the runner's source,
  the same folder the base image copies) and ``deepgym_tests`` (the environment's ``tests/``); a task whose
  base was mapped to deepgym's own (``--base-map IMAGE=base``) gets ``base = "target:base"`` as well.
"""

from __future__ import annotations

import json
from pathlib import Path

from .bases import DEEPGYM_BASE, recorded_bases
from .dockerfile import RUNNER_CONTEXT, TESTS_CONTEXT


def _hcl(value: str) -> str:
    """``value`` as an HCL string literal: JSON's escapes, and ``${`` / ``%{`` kept literal."""
    return json.dumps(value).replace("${", "$${").replace("%{", "%%{")


def harbor_target(name: str, env_path: Path, runner_dir: Path) -> str:
    """The docker-bake.hcl target block of the imported environment ``name`` in ``env_path``."""
    env_path = env_path.resolve()
    base = f', {DEEPGYM_BASE} = "target:{DEEPGYM_BASE}"' if DEEPGYM_BASE in (recorded_bases(env_path) or []) else ""
    return (f'\ntarget "{name}" {{\n'
            f'  context    = {_hcl(str(env_path / "environment"))}\n'
            f'  dockerfile = {_hcl(str(env_path / "Dockerfile"))}\n'
            f'  contexts   = {{ {RUNNER_CONTEXT} = {_hcl(str(runner_dir.resolve()))}, '
            f'{TESTS_CONTEXT} = {_hcl(str(env_path / "tests"))}{base} }}\n'
            f'  tags       = [image("{name}")]\n'
            f'  labels     = environment_labels("{name}")\n}}\n')
