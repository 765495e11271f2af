"""The fake Apple ``container`` CLI (fakebin/container, a TEST DOUBLE that accepts only the real CLI's flags
and delegates to docker), and what a test does to its containers from outside."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

FAKE_CLI = Path(__file__).resolve().parent / "fakebin" / "container"
MARK = "deepgym.test.apple-fake"


class AppleFake:
    """The fake CLI's path, its call log, its own run (the mark of its containers and the name of its network,
    so that :meth:`stop` removes only what this fake made), and outside actions on a container by name."""

    def __init__(self, log: Path):
        self.cli = str(FAKE_CLI)
        self.log = log
        self.run = os.urandom(6).hex()
        self.mark = f"{MARK}={self.run}"
        self.network = f"deepgym-apple-fake-{self.run}"

    def variables(self) -> dict[str, str]:
        """The environment the fake CLI reads: this fake's call log and run."""
        return {"FAKE_CONTAINER_LOG": str(self.log), "FAKE_CONTAINER_RUN": self.run}

    def containers(self) -> list[str]:
        """The ids of this fake's containers, running or not."""
        return subprocess.run(["docker", "ps", "-aq", "--filter", f"label={self.mark}"], capture_output=True,
                              text=True, check=True).stdout.split()

    def calls(self) -> list[list[str]]:
        import json

        return [json.loads(line) for line in self.log.read_text().splitlines()] if self.log.exists() else []

    def remove_from_outside(self, name: str) -> None:
        subprocess.run(["docker", "rm", "-f", name], check=True, capture_output=True)

    def kill_from_outside(self, name: str) -> None:
        subprocess.run(["docker", "kill", name], check=True, capture_output=True)

    def gone(self, name: str) -> bool:
        return subprocess.run(["docker", "inspect", name], capture_output=True).returncode != 0

    def stop(self) -> None:
        """Remove this fake's containers and its network (never another run's)."""
        found = self.containers()
        if found:
            subprocess.run(["docker", "rm", "-f", *found], capture_output=True)
        subprocess.run(["docker", "network", "rm", self.network], capture_output=True)
