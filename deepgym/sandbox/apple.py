"""The apple provider: Apple's ``container`` CLI on macOS (each container its own lightweight Linux VM). There is
no SDK; deepgym runs the CLI (``DEEPGYM_APPLE_CONTAINER``, default ``container`` on PATH), with only flags
the real CLI has (its ``run`` lacks docker's ``--cap-drop``, ``--pids-limit``, ``--security-opt``,
``--ulimit`` and ``--network none``: the VM is the isolation).

A sandbox is ``container run -d`` of the image with ``sleep infinity`` as its main process, ``-c``/``-m``
from the spec and the labels ``deepgym`` (run id) and ``deepgym.owner``. Apple has no network-off flag, so
before any untrusted code runs the sandbox's root takes every interface but loopback down from inside and
checks that none is up (:data:`~deepgym.sandbox.remote.NETWORK_DOWN`; the submission holds no capability to
bring one back). There is no lifetime on Apple's side: the sandbox's main process is ``sleep`` for
``lifetime_s``, after which the VM stops and ``--rm`` removes it. Commands run through
:mod:`deepgym.sandbox.remote`'s exec helper via ``container exec``.

Tested only with a fake ``container`` on PATH (tests/providers/standins/fake_container) that accepts the real
CLI's flags and delegates to docker; see docs/providers.md for what that does not prove.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
from collections.abc import Mapping, Sequence
from typing import Any

from .base import (Image, ImageMissing, Provider, ProviderUnavailable, SandboxError, SandboxLost, SandboxSpec,
                   StartFailure)
from .quota import AccountLimits
from .remote import Remote, RemoteSandbox, create_sandbox

LABEL = "deepgym"
OWNER_LABEL = "deepgym.owner"
CLI_TIMEOUT_S = 120.0


class AppleProvider(Provider):
    """Containers of the local ``container`` system service."""

    name = "apple"
    writable_root = True  # an episode makes its own folders (deepgym.session.mounts)

    def __init__(self, *, max_parallel: int = 32, cli: str | None = None, max_sandboxes: int | None = None):
        from .docker import owner_label

        self.cli = cli or os.environ.get("DEEPGYM_APPLE_CONTAINER", "container")
        self.limits = AccountLimits("apple", max_sandboxes=max_sandboxes or max_parallel + 4, creates_per_s=None)
        self.run_id = os.urandom(6).hex()
        self.owner = owner_label(os.getpid())
        self._checked = False

    def call(self, args: Sequence[str], *, stdin: bytes = b"", timeout_s: float = CLI_TIMEOUT_S,
             phase: str = "run") -> subprocess.CompletedProcess:
        """Run the CLI. Its own failures (not the command's) are typed sandbox errors."""
        try:
            return subprocess.run([self.cli, *args], input=stdin, capture_output=True, timeout=timeout_s)
        except FileNotFoundError:
            raise ProviderUnavailable(f"no {self.cli!r} on PATH: mode 'apple' needs Apple's container CLI on macOS "
                                      "(github.com/apple/container)") from None
        except subprocess.TimeoutExpired:
            error = SandboxLost if phase == "run" else StartFailure
            raise error(f"`{self.cli} {args[0]}` did not answer in {timeout_s:g}s") from None

    def _check_system(self) -> None:
        if not self._checked:
            result = self.call(["system", "status"], phase="start")
            if result.returncode != 0:
                raise ProviderUnavailable(f"Apple's container services are not running ({_said(result)}); start "
                                          f"them with `{self.cli} system start`")
            self._checked = True

    def image(self, ref: str) -> Image:
        self._check_system()
        result = self.call(["image", "inspect", ref], phase="start")
        if result.returncode != 0:
            raise ImageMissing(f"{ref} is not in Apple's image store ({_said(result)}); build it with "
                               "`deepgym images build` and load it (`container image load`), or pull it")
        labels = _find(json.loads(result.stdout or "null"), "labels") or {}
        return Image(id=ref, labels={str(key): str(value) for key, value in dict(labels).items()})

    def create(self, spec: SandboxSpec) -> RemoteSandbox:
        self._check_system()
        name = f"deepgym-{self.run_id}-{os.urandom(4).hex()}"
        args = ["run", "-d", "--rm", "--name", name, "-c", str(max(1, math.ceil(spec.cpus))),
                "-m", f"{spec.memory_mb}M", "--entrypoint", "sleep"]
        for key, value in {**spec.labels, LABEL: self.run_id, OWNER_LABEL: self.owner}.items():
            args += ["-l", f"{key}={value}"]
        args += [spec.image, f"{spec.lifetime_s:g}"]

        def make() -> AppleRemote:
            result = self.call(args, phase="start")
            if result.returncode != 0:
                raise StartFailure(f"`{self.cli} run` refused: {_said(result)}")
            return AppleRemote(self, name)

        return create_sandbox(self.limits, make, spec, network_down=True)

    def sweep(self, labels: Mapping[str, str]) -> int:
        """Delete every container of deepgym's (label ``deepgym``) carrying all of ``labels``."""
        self._check_system()
        result = self.call(["list", "--all", "--format", "json"])
        if result.returncode != 0:
            raise ProviderUnavailable(f"`{self.cli} list` failed: {_said(result)}")
        removed = 0
        for item in json.loads(result.stdout or "[]"):
            found = _find(item, "labels") or {}
            if LABEL in found and all(found.get(k) == v for k, v in labels.items()):
                if self.call(["delete", "--force", _find(item, "id")]).returncode == 0:
                    removed += 1
        return removed

    def close(self) -> None:
        if self._checked:
            try:
                self.sweep({LABEL: self.run_id})
            except SandboxError:
                pass


class AppleRemote(Remote):
    """One container, as :mod:`deepgym.sandbox.remote` uses it."""

    def __init__(self, provider: AppleProvider, name: str):
        self.provider = provider
        self.id = name

    def upload(self, path: str, data: bytes) -> None:
        result = self.provider.call(["exec", "-i", self.id, "sh", "-c", 'umask 077 && cat > "$1"', "sh", path],
                                    stdin=data)
        if result.returncode != 0:
            raise SandboxLost(f"cannot write into container {self.id}: {_said(result)}")

    def shell(self, script: str, timeout_s: float) -> str:
        try:
            result = self.provider.call(["exec", self.id, "sh", "-c", script], timeout_s=timeout_s)
        except SandboxLost:
            raise SandboxLost(f"the command in container {self.id} passed the CLI's own deadline") from None
        return result.stdout.decode("utf-8", "replace") + "\n" + _said(result)

    def delete(self) -> None:
        try:
            self.provider.call(["delete", "--force", self.id], timeout_s=30)
        except SandboxError:
            pass


def _find(value: Any, key: str) -> Any:
    """The first value under ``key`` anywhere in a JSON document (the CLI's inspect and list nest them)."""
    if isinstance(value, dict):
        if key in value:
            return value[key]
        value = list(value.values())
    if isinstance(value, list):
        for item in value:
            found = _find(item, key)
            if found is not None:
                return found
    return None


def _said(result: subprocess.CompletedProcess) -> str:
    return result.stderr.decode("utf-8", "replace").strip()[-500:] if result.stderr else ""

