"""Test doubles of the providers' APIs (see each module's docstring), and how a test gives one our images.

A stand-in's "registry" maps digest-pinned references to local images: :func:`publish` writes a pushed-images
manifest (deepgym.pushed, as ``deepgym images push`` would) whose references stand for the local images, so
that ``deepgym images register`` runs its real path against the stand-in.
"""

from __future__ import annotations

import importlib.util
import io
import os
import tarfile
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

import docker

from deepgym.images import build, content_hash, image_name
from deepgym.pushed import PushedImage, write_manifest

STANDIN_REGISTRY = "registry.standin.invalid"
ROOT = Path(__file__).resolve().parents[3]


def require(module: str, extra: str) -> None:
    """Skip the calling test module when ``module`` is not installed; under CI=true fail instead: CI installs
    the extras (scripts/test.sh), so a skip there would hide a provider that was never tested."""
    import pytest

    if importlib.util.find_spec(module) is None:
        reason = f"{module} is not installed (pip install 'deepgym[{extra}]')"
        if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
            raise RuntimeError(f"{reason}: under CI=true the provider tests must run, not skip")
        pytest.skip(reason, allow_module_level=True)


def publish(standin, envs: list[str], manifest: Path) -> Path:
    """Build ``envs`` (and base), and stand each local image in for a pushed one: the manifest names
    ``registry.standin.invalid/deepgym-<env>@sha256:<the local image id>`` and the stand-in resolves it."""
    build([env for env in envs if env != "base"])
    client = docker.from_env()
    pushed = {}
    try:
        for env in envs:
            image_id = client.images.get(image_name(env)).id
            pushed[env] = PushedImage(f"{STANDIN_REGISTRY}/deepgym-{env}", content_hash(env), image_id)
            standin.registry[pushed[env].ref] = image_id
    finally:
        client.close()
    write_manifest(manifest, pushed)
    return manifest


@dataclass
class Faults:
    """Faults a stand-in injects: per route (each stand-in names its own: ``create``, ``exec``, ...), a queue
    of failures the next requests answer with (an HTTP status, or a gRPC status for Modal's);
    ``create_delay_s`` before every create answers; ``kill_during_exec_s``: the next exec's container is killed
    that long after the exec starts."""

    statuses: dict[str, list] = field(default_factory=lambda: defaultdict(list))
    create_delay_s: float = 0.0
    kill_during_exec_s: float | None = None

    def fail(self, route: str, *statuses) -> None:
        self.statuses[route].extend(statuses)

    def next(self, route: str):
        """The failure the next request of ``route`` answers with, or None."""
        queue = self.statuses.get(route)
        return queue.pop(0) if queue else None

    def clear(self) -> None:
        self.statuses.clear()
        self.create_delay_s = 0.0
        self.kill_during_exec_s = None


class ContainerBacked:
    """What every stand-in does with the Docker containers behind its sandboxes: ``self.sandboxes`` maps a
    sandbox id to a dict with its ``container``; every container carries ``self.label=self.id``."""

    label: str
    id: str
    sandboxes: dict[str, dict]
    docker: docker.DockerClient
    faults: Faults

    def container(self, sandbox_id: str):
        return self.docker.containers.get(self.sandboxes[sandbox_id]["container"])

    def remove_from_outside(self, sandbox_id: str) -> None:
        self.container(sandbox_id).remove(force=True)

    def kill_from_outside(self, sandbox_id: str) -> None:
        self.container(sandbox_id).kill()

    def gone(self, sandbox_id: str) -> bool:
        entry = self.sandboxes.get(sandbox_id)
        if entry is None:
            return True
        try:
            self.docker.containers.get(entry["container"])
        except docker.errors.NotFound:
            return True
        return False

    def running(self, entry: dict) -> bool:
        """Whether the container behind a sandbox's entry is running."""
        try:
            return self.docker.api.inspect_container(entry["container"])["State"]["Running"]
        except docker.errors.NotFound:
            return False

    def remove_container(self, container: str) -> None:
        """Remove ``container``, which may be gone or going already: Modal's stand-in makes containers that remove
        themselves once their main process exits (auto_remove, as a Modal sandbox ends with its main process), and
        the engine refuses a removal already in progress (409)."""
        try:
            self.docker.api.remove_container(container, force=True)
        except docker.errors.NotFound:
            pass
        except docker.errors.APIError as exc:
            if exc.status_code != 409 or "already in progress" not in str(exc.explanation):
                raise

    def live_containers(self) -> int:
        return len(self.docker.containers.list(filters={"label": f"{self.label}={self.id}"}))

    def remove_all(self) -> None:
        for container in self.docker.containers.list(all=True, filters={"label": f"{self.label}={self.id}"}):
            container.remove(force=True)
        self.docker.close()

    def put(self, container: str, path: str, data: bytes) -> None:
        """Write ``data`` at ``path`` in ``container`` (root's, mode 0600). Raises docker.errors.APIError."""
        folder, _, name = path.rpartition("/")
        archive = io.BytesIO()
        with tarfile.open(fileobj=archive, mode="w") as tar:
            info = tarfile.TarInfo(name)
            info.size, info.mode = len(data), 0o600
            tar.addfile(info, io.BytesIO(data))
        self.docker.api.put_archive(container, folder or "/", archive.getvalue())


HOSTILE_CATEGORIES = ("secrets", "signals", "privileges", "network", "exits", "filesystem")


def hostile_attacks(env: str = "coin_change") -> list:
    """A subset of the single-turn hostile suite (tests/hostile/attacks.py) for one environment: the attacks on
    secrets, signals, privileges, the network, exits and the file system that are neither slow nor known
    breaches."""
    import sys

    spec = importlib.util.spec_from_file_location("provider_attacks", ROOT / "tests" / "hostile" / "attacks.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return [attack for attack in module.ATTACKS if attack.env == env and attack.category in HOSTILE_CATEGORIES
            and not attack.slow and not attack.known_breach and not attack.then_reference]
