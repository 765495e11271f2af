"""The image of an imported task: the task's own Dockerfile, then deepgym's trusted runner in layers of its own.

The task's Dockerfile is kept verbatim (a ``# syntax=`` directive must stay on its first line) except for the
``FROM`` lines a ``--base-map`` rewrites, so what the task author tested is what is built. After its last
stage come two layers that are deepgym's alone, so a change to the runner rebuilds only them:

1. **The runner.** The runner (``deepgym/runner``, bake's named context ``deepgym_runner``) goes into the
   site-packages of the image's own ``python3`` (``python3 -I`` finds it there, as on deepgym's base image),
   with the ``deepgym-service`` command, the root-only ``/opt/deepgym/env`` and, when the task has a working
   directory, a world-readable copy of it as the starting workspace ``/opt/deepgym/start/0`` (the session's
   setup copies it to the agent). A task image without Python 3.10 or bash fails here with a message that
   says so, rather than later as a sandbox that cannot start.
2. **The hidden tests** (bake's named context ``deepgym_tests``, the environment's ``tests/``), root-only.

Both use ``RUN --mount=type=bind`` so each is one layer and nothing of the build context is left behind.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass, field

RUNNER_CONTEXT = "deepgym_runner"
TESTS_CONTEXT = "deepgym_tests"
MIN_PYTHON = (3, 10)
_FROM = re.compile(r"^(\s*FROM\s+)((?:--\S+\s+)*)(\S+)(.*)$", re.IGNORECASE)
_INSTRUCTION = re.compile(r"^\s*(WORKDIR|USER|ENTRYPOINT|CMD)\s+(.*)$", re.IGNORECASE)


@dataclass
class DockerfileFacts:
    """What the import needs to know of a task's Dockerfile."""

    bases: list[str] = field(default_factory=list)
    """External images its stages start from (after mapping), in order; stage names are left out."""
    mapped: dict[str, str] = field(default_factory=dict)
    """The ``--base-map`` entries that matched a FROM line."""
    unresolved: list[str] = field(default_factory=list)
    """FROM references built from ARGs (``${BASE}``): they cannot be checked or mapped before a build."""
    workdir: str | None = None
    user: str | None = None
    entrypoint: str | None = None
    cmd: str | None = None


def _logical_lines(text: str) -> list[str]:
    """The instructions of a Dockerfile, continuation lines joined and comments dropped."""
    lines, current = [], ""
    for raw in text.splitlines():
        stripped = raw.strip()
        if not current and (not stripped or stripped.startswith("#")):
            continue
        if stripped.startswith("#"):
            continue
        if stripped.endswith("\\"):
            current += stripped[:-1] + " "
            continue
        lines.append(current + stripped)
        current = ""
    if current:
        lines.append(current)
    return lines


def map_bases(text: str, base_map: dict[str, str]) -> tuple[str, DockerfileFacts]:
    """``text`` with every ``FROM`` image that ``base_map`` names replaced, and the facts of the result.

    A FROM that names an earlier stage (``FROM build AS final``) is a stage, not an image, and is never mapped.
    WORKDIR, USER, ENTRYPOINT and CMD are read from the last stage, the one the runner is added to."""
    facts = DockerfileFacts()
    stages: set[str] = set()
    out = []
    for line in text.splitlines(keepends=True):
        match = _FROM.match(line.rstrip("\r\n"))
        if match is None:
            out.append(line)
            continue
        head, flags, image, tail = match.groups()
        alias = re.search(r"\bAS\s+(\S+)", tail, re.IGNORECASE)
        if image.lower() not in stages:
            if image in base_map:
                facts.mapped[image] = base_map[image]
                image = base_map[image]
            if "$" in image:
                facts.unresolved.append(image)
            elif image != "scratch":
                facts.bases.append(image)
        if alias:
            stages.add(alias.group(1).lower())
        ending = line[len(line.rstrip("\r\n")):]
        out.append(f"{head}{flags}{image}{tail}{ending}")
    mapped = "".join(out)
    for instruction in _logical_lines(mapped):
        if _FROM.match(instruction):
            facts.workdir = facts.user = facts.entrypoint = facts.cmd = None
            continue
        found = _INSTRUCTION.match(instruction)
        if found is None:
            continue
        name, value = found.group(1).upper(), found.group(2).strip()
        if name == "WORKDIR":
            facts.workdir = value if value.startswith("/") else f"{(facts.workdir or '').rstrip('/')}/{value}"
        else:
            setattr(facts, name.lower(), value)
    return mapped, facts


def runner_layers(workdir: str | None) -> str:
    """The Dockerfile text deepgym appends after the task's: the runner's layer and the hidden tests' layer.

    ``workdir`` is the task's working directory, copied as the agent's starting workspace (None or ``/``:
    the workspace starts empty, since copying the whole root is never what a task means)."""
    wanted = ".".join(map(str, MIN_PYTHON))
    snapshot = ""
    if workdir and workdir.rstrip("/"):
        quoted = shlex.quote(workdir)
        snapshot = (f" && if [ -d {quoted} ]; then cp -a {quoted}/. /opt/deepgym/start/0/; fi \\\n"
                    " && chown -R root:root /opt/deepgym/start && chmod -R a+rX,go-w /opt/deepgym/start")
    return f"""
# ---- deepgym: everything below is added by `deepgym harbor import`, not part of the task ----
# deepgym's trusted runner, in a layer of its own: into the site-packages of the image's python3, with the
# unprivileged submission user, the root-only /opt/deepgym/env and the agent's starting workspace.
USER root
RUN --mount=type=bind,from={RUNNER_CONTEXT},target=/mnt/deepgym-runner \\
    command -v bash >/dev/null || {{ echo "deepgym: the task image has no bash; deepgym's shell actions need \
it. Fix: install bash in environment/Dockerfile" >&2; exit 1; }} \\
 && command -v python3 >/dev/null || {{ echo "deepgym: the task image has no python3; deepgym's runner needs \
Python {wanted} or later. Fix: install python3 in environment/Dockerfile, or map the base with --base-map" >&2; \
exit 1; }} \\
 && python3 -c 'import sys; sys.exit(sys.version_info < {MIN_PYTHON!r})' || {{ echo "deepgym: the task image's \
python3 is older than {wanted}, which deepgym's runner needs. Fix: install a newer python3 in \
environment/Dockerfile" >&2; exit 1; }} \\
 && site="$(python3 -I -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')" \\
 && rm -rf "$site/deepgym_runner" && mkdir -p "$site/deepgym_runner" \\
 && cp -R /mnt/deepgym-runner/. "$site/deepgym_runner/" \\
 && find "$site/deepgym_runner" -name __pycache__ -prune -exec rm -rf {{}} + \\
 && python3 -m compileall -q "$site/deepgym_runner" \\
 && chown -R root:root "$site/deepgym_runner" && chmod -R a+rX,go-w "$site/deepgym_runner" \\
 && printf '#!/bin/sh\\nexec python3 -I -B -m deepgym_runner.episode.services "$@"\\n' \
> /usr/local/bin/deepgym-service \\
 && chmod 0755 /usr/local/bin/deepgym-service \\
 && install -d -m 0700 -o root -g root /opt/deepgym/env \\
 && install -d -m 0755 -o root -g root /opt/deepgym/start/0{snapshot}
# The hidden tests (deepgym's verify.py, session.json and the task's tests/ under harbor/), root-only.
RUN --mount=type=bind,from={TESTS_CONTEXT},target=/mnt/deepgym-tests \\
    cp -R /mnt/deepgym-tests/. /opt/deepgym/env/ \\
 && chown -R root:root /opt/deepgym/env && chmod -R go-rwx /opt/deepgym/env
WORKDIR /
ENTRYPOINT ["python3", "-I", "-B", "-m", "deepgym_runner"]
CMD []
"""


def environment_dockerfile(task_dockerfile: str, base_map: dict[str, str],
                           workdir: str | None) -> tuple[str, DockerfileFacts]:
    """The imported environment's Dockerfile and the facts of the task's: the task's text (bases mapped)
    followed by :func:`runner_layers` for the task's working directory (``workdir`` when task.toml sets one,
    else the Dockerfile's last WORKDIR)."""
    mapped, facts = map_bases(task_dockerfile, base_map)
    body = mapped if mapped.endswith("\n") else mapped + "\n"
    return body + runner_layers(workdir or facts.workdir), facts


def image_dockerfile(image: str) -> str:
    """The task Dockerfile of a task that names a prebuilt ``docker_image`` and builds nothing of its own."""
    return f"FROM {image}\n"
