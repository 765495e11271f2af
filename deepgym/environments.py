"""Environments: the registry of folders under ``environments/`` and their validated manifests.

An environment is a folder ``environments/<id>/`` holding ``manifest.yaml``, the prompt, a ``Dockerfile``
(usually ``FROM base`` plus the hidden tests), the hidden tests under ``tests/`` and, outside the image,
``solutions/reference.*`` and at least two ``solutions/wrong_*`` files. Extra folders of environments can be
added with ``DEEPGYM_ENVIRONMENTS=/path/a:/path/b``.

What ``tests/`` holds depends on the kind (the image copies it to /opt/deepgym/env):

- ``function``: ``cases.py`` with ``cases(variant)`` (see deepgym/runner/kinds/function.py)
- ``program``: ``cases/<id>.in`` and ``cases/<id>.out``, optional ``config.json`` (deepgym/runner/kinds/program.py)
- ``patch``: ``repo/``, ``hidden/``, ``spec.json`` and ``probes.json`` (deepgym/runner/kinds/patch.py)
- ``session``: ``verify.py`` and ``session.json`` (deepgym/runner/episode/verify.py); the folder ``start/<variant>/``
  beside ``tests/`` holds each variant's starting workspace, and ``solutions/`` holds JSON lists of shell
  actions (docs/sessions.md)
- ``desktop``: ``verify.py`` (scores the state recorder's log); the folder ``app/`` beside ``tests/`` holds the
  web app with ``variants.json`` (each variant's parameters), and ``solutions/`` holds JSON lists of
  ``computer`` actions (docs/desktop.md)

Manifest keys (unknown keys are an error):

=============  ========  ==============================================================================
key            required  meaning
=============  ========  ==============================================================================
id             yes       the environment's name; must equal the folder's name
kind           yes       ``function`` (implement a named Python function), ``program`` (a whole program
                         reading stdin), ``patch`` (a unified diff to a baked repository) or ``session``
                         (a multi-turn shell episode in one container) or ``desktop`` (an episode of
                         ``computer`` actions on a web app in a browser)
prompt         yes       file with the task text shown to the model, relative to the folder
entry_point    function  the function the hidden tests call (function tasks only)
title          no        one line for listings
difficulty     no        ``easy``, ``medium`` or ``hard``
scoring        no        ``all_or_nothing`` (default) or ``partial`` (fraction of hidden cases passed)
limits         no        any of the :class:`~deepgym.runner.protocol.Limits` fields, each within range
tags           no        list of strings
variants       no        how many seeded variants ``cases(variant)`` knows (default 1); pick one per call
session        no        session and desktop environments only: any of the :class:`SessionLimits` fields
isolation      no        ``container`` (default: a fresh container per sample) or ``process`` (warm
                         containers, one fresh uid per sample; docs/warm.md); not for sessions
services       no        session environments only: a list of :class:`ServiceSpec` mappings, the services
                         the agent starts by name and the final verification checks (docs/sessions.md)
screen         no        desktop environments only: ``{width, height}`` in pixels (default 1024x768)
=============  ========  ==============================================================================
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

import yaml

from .bundle import environment_roots
from .errors import EnvironmentNotFoundError, ManifestError
from .runner.protocol import ENVIRONMENT_KINDS, REQUIRED_FILES, SCORINGS, Limits
from .sandbox.base import Mount, SandboxSpec
from .session_limits import SessionLimits, session_limits

DIFFICULTIES = ("easy", "medium", "hard")
_NAME = re.compile(r"^[a-z][a-z0-9_]{1,63}$")
_KEYS = {"id", "kind", "prompt", "entry_point", "title", "difficulty", "scoring", "limits", "tags", "variants",
         "session", "isolation", "services", "screen"}
ISOLATIONS = ("container", "process")
SESSION_FILES = ("verify.py", "session.json")
DESKTOP_FILES = ("verify.py",)
DEFAULT_SCREEN = (1024, 768)
SCREEN_RANGES = {"width": (320, 3840), "height": (240, 2160)}
# (minimum, maximum) for every limit: a typo such as 5000 seconds is refused rather than trusted.
LIMIT_RANGES: dict[str, tuple[float, float]] = {
    "case_cpu_s": (0.05, 600), "total_cpu_s": (0.1, 3600), "memory_mb": (32, 65536), "pids": (4, 4096),
    "nofile": (16, 65536), "output_kb": (1, 1 << 20), "tmpfs_mb": (1, 65536),
    # At least half a CPU: below a third, a busy submission would look starved by the host (see Limits).
    "cpus": (0.5, 64),
}


@dataclass(frozen=True)
class ServiceSpec:
    """A service of a session environment: a server the agent starts by name (``deepgym-service start NAME``)
    that must still be running, and answer its health check, when the episode is graded.

    The supervisor runs ``command`` (the environment's, not the agent's) as a uid of its own in the agent's
    workspace, so it serves from the files the agent left (deepgym/runner/episode/services.py)."""

    name: str
    command: tuple[str, ...]
    port: int
    """The loopback TCP port the health check connects to."""
    health_path: str = "/"
    """The HTTP path of the health check: it passes on status 200."""
    check_timeout_s: float = 5.0
    """The health check's whole wall-clock limit (connect, request, the answer to its end)."""

    def to_request(self) -> dict[str, Any]:
        return {"name": self.name, "command": list(self.command), "port": self.port,
                "health_path": self.health_path, "check_timeout_s": self.check_timeout_s}


MAX_SERVICES = 4
SERVICE_KEYS = ("name", "command", "port", "health_path", "check_timeout_s")


def _services(path: Path, raw: Any) -> tuple[ServiceSpec, ...]:
    if not isinstance(raw, list) or not 1 <= len(raw) <= MAX_SERVICES:
        raise _fail(path, "services", f"must be a list of 1 to {MAX_SERVICES} mappings",
                    "write `- {name: web, command: [...], port: 8080}` items")
    services = []
    for index, item in enumerate(raw):
        key = f"services[{index}]"
        if not isinstance(item, dict) or sorted(set(item) - set(SERVICE_KEYS)):
            raise _fail(path, key, "must be a mapping of known keys", f"use {', '.join(SERVICE_KEYS)}")
        name, command, port = item.get("name"), item.get("command"), item.get("port")
        if not isinstance(name, str) or not _NAME.match(name):
            raise _fail(path, f"{key}.name", f"{name!r} is not a valid name", "use lowercase letters, digits and _")
        if not isinstance(command, list) or not command or not all(isinstance(a, str) and a for a in command):
            raise _fail(path, f"{key}.command", "must be a non-empty list of strings", "write the argv as a list")
        if isinstance(port, bool) or not isinstance(port, int) or not 1024 <= port <= 65535:
            raise _fail(path, f"{key}.port", f"{port!r} is not a port from 1024 to 65535",
                        "give the unprivileged loopback port the service listens on")
        health = item.get("health_path", "/")
        if not isinstance(health, str) or not health.startswith("/") or any(c.isspace() for c in health):
            raise _fail(path, f"{key}.health_path", f"{health!r} is not an HTTP path", "start it with /")
        timeout = item.get("check_timeout_s", 5.0)
        if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not 0.5 <= timeout <= 60:
            raise _fail(path, f"{key}.check_timeout_s", f"{timeout!r} is out of range", "give 0.5 to 60 seconds")
        services.append(ServiceSpec(name, tuple(command), port, health, float(timeout)))
    if len({s.name for s in services}) < len(services) or len({s.port for s in services}) < len(services):
        raise _fail(path, "services", "two services share a name or a port", "give each its own")
    return tuple(services)


@dataclass(frozen=True)
class Environment:
    """A validated environment. ``path`` is its folder; its image's name is :func:`deepgym.images.image_name`."""

    id: str
    kind: str
    prompt: str
    path: Path
    entry_point: str | None = None
    title: str = ""
    difficulty: str | None = None
    scoring: str = "all_or_nothing"
    limits: Limits = Limits()
    tags: tuple[str, ...] = ()
    variants: int = 1
    session: SessionLimits | None = None
    """The episode's budgets; set exactly for ``session`` and ``desktop`` environments."""
    isolation: str = "container"
    """How its samples are isolated unless a call says otherwise (docs/warm.md)."""
    services: tuple[ServiceSpec, ...] = ()
    """The services a session's agent starts and the final verification checks."""
    screen: tuple[int, int] | None = None
    """(width, height) of a ``desktop`` environment's display; None for every other kind."""
    instance_image: str | None = None
    """The SWE-style instance image that a ``swe`` environment's image layers the runner onto
    (:mod:`deepgym.swe_images`); None for every other kind."""

    @property
    def tests_dir(self) -> Path:
        """The hidden tests as they sit on the host (the image copies this folder to /opt/deepgym/env)."""
        return self.path / "tests"

    def solutions(self) -> dict[str, Path]:
        """Reference and known-wrong solutions, by file stem (``reference``, ``wrong_*``)."""
        folder = self.path / "solutions"
        return {p.stem: p for p in sorted(folder.iterdir()) if p.is_file()} if folder.is_dir() else {}


def _fail(path: Path, key: str, problem: str, fix: str) -> ManifestError:
    return ManifestError(str(path), key, problem, fix)


def _limits(path: Path, raw: Any) -> Limits:
    if raw is None:
        return Limits()
    if not isinstance(raw, dict):
        raise _fail(path, "limits", f"must be a mapping, got {type(raw).__name__}", "write limits as `key: value` lines")
    values: dict[str, Any] = {}
    for key, value in raw.items():
        if key not in LIMIT_RANGES:
            raise _fail(path, f"limits.{key}", "unknown limit", f"use one of {', '.join(LIMIT_RANGES)}")
        low, high = LIMIT_RANGES[key]
        kind = int if isinstance(getattr(Limits, key), int) else float
        if isinstance(value, bool) or not isinstance(value, (int, float)) or (kind is int and not isinstance(value, int)):
            raise _fail(path, f"limits.{key}", f"must be {'an integer' if kind is int else 'a number'}, got {value!r}",
                        f"give a value between {low:g} and {high:g}")
        if not low <= value <= high:
            raise _fail(path, f"limits.{key}", f"{value!r} is out of range", f"give a value between {low:g} and {high:g}")
        values[key] = kind(value)
    limits = Limits(**values)
    if limits.total_cpu_s < limits.case_cpu_s:
        raise _fail(path, "limits.total_cpu_s", f"{limits.total_cpu_s:g} is below case_cpu_s ({limits.case_cpu_s:g})",
                    "make the total CPU limit at least the per-case limit")
    return limits


def _screen(path: Path, raw: Any) -> tuple[int, int]:
    if raw is None:
        return DEFAULT_SCREEN
    if not isinstance(raw, dict) or set(raw) - set(SCREEN_RANGES):
        raise _fail(path, "screen", f"must be a mapping of width and height, got {raw!r}", "write screen: "
                    "{width: 1024, height: 768}")
    size = {**dict(zip(SCREEN_RANGES, DEFAULT_SCREEN)), **raw}
    for key, (low, high) in SCREEN_RANGES.items():
        value = size[key]
        if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
            raise _fail(path, f"screen.{key}", f"{value!r} is not a whole number of pixels in range",
                        f"give a value between {low} and {high}")
    return size["width"], size["height"]


def parse_manifest(path: Path) -> Environment:
    """Load and validate one ``manifest.yaml``. Raises ManifestError naming the file, key and fix."""
    folder = path.parent
    try:
        data = yaml.safe_load(path.read_text())
    except yaml.YAMLError as exc:
        raise _fail(path, "(file)", f"is not valid YAML ({exc})", "fix the YAML syntax") from None
    if not isinstance(data, dict):
        raise _fail(path, "(file)", "must be a mapping of keys to values", "see the manifest keys in docs/environments.md")
    unknown = sorted(set(data) - _KEYS)
    if unknown:
        raise _fail(path, unknown[0], "unknown key", f"remove it or use one of {', '.join(sorted(_KEYS))}")
    for key in ("id", "kind", "prompt"):
        if key not in data:
            raise _fail(path, key, "is missing", f"add `{key}:` to the manifest")
    env_id = data["id"]
    if not isinstance(env_id, str) or not _NAME.match(env_id):
        raise _fail(path, "id", f"{env_id!r} is not a valid name", "use lowercase letters, digits and underscores")
    if env_id != folder.name:
        raise _fail(path, "id", f"{env_id!r} differs from the folder name {folder.name!r}", "make them equal")
    if data["kind"] not in ENVIRONMENT_KINDS:
        raise _fail(path, "kind", f"{data['kind']!r} is not a known kind", f"use one of {', '.join(ENVIRONMENT_KINDS)}")
    prompt_file = folder / str(data["prompt"])
    if not prompt_file.is_file():
        raise _fail(path, "prompt", f"file {prompt_file} does not exist", "create it or fix the path")
    entry_point = data.get("entry_point")
    if data["kind"] == "function" and not (isinstance(entry_point, str) and entry_point.isidentifier()):
        raise _fail(path, "entry_point", f"{entry_point!r} is not a Python function name",
                    "name the function the hidden tests call")
    if data["kind"] != "function" and entry_point is not None:
        raise _fail(path, "entry_point", f"{data['kind']} tasks have no entry point", "remove the key")
    variants = data.get("variants", 1)
    if isinstance(variants, bool) or not isinstance(variants, int) or not 1 <= variants <= 10_000:
        raise _fail(path, "variants", f"{variants!r} is not a count between 1 and 10000", "give how many variants "
                    "cases(variant) supports")
    scoring = data.get("scoring", "all_or_nothing")
    if scoring not in SCORINGS:
        raise _fail(path, "scoring", f"{scoring!r} is not a known scoring", f"use one of {', '.join(SCORINGS)}")
    if data["kind"] == "patch" and scoring == "partial":
        raise _fail(path, "scoring", "patch tasks give no partial credit: their pytest results come from the "
                    "submission's own process, so only the all-or-nothing verdict (which the probes back) is "
                    "unforgeable", "remove the key")
    difficulty = data.get("difficulty")
    if difficulty is not None and difficulty not in DIFFICULTIES:
        raise _fail(path, "difficulty", f"{difficulty!r} is not known", f"use one of {', '.join(DIFFICULTIES)}")
    tags = data.get("tags", [])
    if not isinstance(tags, list) or not all(isinstance(t, str) for t in tags):
        raise _fail(path, "tags", "must be a list of strings", "write tags: [a, b]")
    limits = _limits(path, data.get("limits"))
    isolation = data.get("isolation", "container")
    if isolation not in ISOLATIONS:
        raise _fail(path, "isolation", f"{isolation!r} is not a known isolation", f"use one of {', '.join(ISOLATIONS)}")
    if data["kind"] in ("session", "desktop") and isolation != "container":
        raise _fail(path, "isolation", f"a {data['kind']} episode has a container of its own", "remove the key")
    session = None
    if data["kind"] in ("session", "desktop"):
        session = session_limits(path, data.get("session"))
        if data["kind"] == "desktop" and session.terminal != "fresh":
            raise _fail(path, "session.terminal", "a desktop has no shell", "remove the key")
    elif "session" in data:
        raise _fail(path, "session", f"{data['kind']} tasks have no session budgets", "remove the key")
    services: tuple[ServiceSpec, ...] = ()
    if "services" in data:
        if data["kind"] != "session":
            raise _fail(path, "services", f"{data['kind']} tasks have no services", "remove the key")
        services = _services(path, data["services"])
    screen = _screen(path, data.get("screen")) if data["kind"] == "desktop" else None
    if screen is None and "screen" in data:
        raise _fail(path, "screen", f"{data['kind']} tasks have no screen", "remove the key")
    required_files = {"session": SESSION_FILES, "desktop": DESKTOP_FILES}.get(data["kind"]) \
        or REQUIRED_FILES[data["kind"]]
    starts = [f"start/{variant}" for variant in range(variants)] if data["kind"] == "session" else []
    starts += ["app/index.html", "app/variants.json"] if data["kind"] == "desktop" else []
    for required in ("Dockerfile", "tests", *(f"tests/{name}" for name in required_files), *starts):
        if not (folder / required).exists():
            raise _fail(path, "(folder)", f"{folder / required} does not exist",
                        f"add {required} ({data['kind']} environments need it)")
    return Environment(id=env_id, kind=data["kind"], prompt=prompt_file.read_text(), path=folder,
                       entry_point=entry_point, title=str(data.get("title", "")), difficulty=difficulty,
                       scoring=scoring, limits=limits, tags=tuple(tags), variants=variants, session=session,
                       isolation=isolation, services=services, screen=screen)


def _manifests() -> dict[str, Path]:
    roots = environment_roots()
    stamp = tuple((str(root), root.stat().st_mtime_ns if root.is_dir() else 0) for root in roots)
    return _scan(stamp)


@lru_cache(maxsize=8)
def _scan(stamp: tuple[tuple[str, int], ...]) -> dict[str, Path]:
    """Every manifest under the roots. Cached by the roots' modification times: adding or removing an
    environment folder changes its root's, so the cache never hides one."""
    found: dict[str, Path] = {}
    for root in (Path(name) for name, _ in stamp):
        if not root.is_dir():
            continue
        for manifest in sorted(root.glob("*/manifest.yaml")):
            name = manifest.parent.name
            if name in found:
                raise _fail(manifest, "id", f"{name!r} is also defined by {found[name]}", "rename one of them")
            found[name] = manifest
    return found


def list_environments() -> list[str]:
    """Names of every environment, sorted."""
    return sorted(_manifests())


@lru_cache(maxsize=None)
def _load(manifest: Path, mtime_ns: int) -> Environment:
    return parse_manifest(manifest)


def load_environment(name: str | Environment) -> Environment:
    """The environment called ``name`` (an Environment is returned as is). Raises EnvironmentNotFoundError."""
    if isinstance(name, Environment):
        return name
    manifests = _manifests()
    if name not in manifests:
        raise EnvironmentNotFoundError(name, sorted(manifests))
    manifest = manifests[name]
    return _load(manifest, manifest.stat().st_mtime_ns)


ENVIRONMENT_LABEL = "deepgym.environment"
# The runner, the init and the kernel's bookkeeping need a little beyond the submission's own limits.
RUNNER_MEMORY_MB = 128
RUNNER_PIDS = 8
# The host's deadline for a sample is the runner's own (Limits.host_deadline_s) plus the time a sandbox may
# take to start on a busy engine.
START_GRACE_S = 20.0


def sandbox_spec(env: Environment, image_id: str, *, lifetime_s: float | None = None, memory_mb: int = RUNNER_MEMORY_MB,
                 pids: int = RUNNER_PIDS, mounts: tuple[Mount, ...] = ()) -> SandboxSpec:
    """The one spec builder: a sandbox of ``env`` with the manifest's limits plus ``memory_mb`` and ``pids`` for
    what deepgym runs in it beside the submission (a sample's runner by default; an episode passes its own),
    living ``lifetime_s`` (by default a sample's host deadline and twice the start grace), with ``mounts`` (an
    episode's own folders)."""
    limits = env.limits
    if lifetime_s is None:
        lifetime_s = limits.host_deadline_s + 2 * START_GRACE_S
    return SandboxSpec(image=image_id, memory_mb=limits.memory_mb + memory_mb, pids=limits.pids + pids,
                       cpus=limits.cpus, nofile=limits.nofile, tmpfs_mb=limits.tmpfs_mb, lifetime_s=lifetime_s,
                       labels={ENVIRONMENT_LABEL: env.id}, mounts=mounts)
