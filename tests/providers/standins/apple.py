"""The fake Apple ``container`` CLI (fakebin/container, a TEST DOUBLE that accepts only the real CLI's flags
and delegates to docker), and what a test does to its containers from outside."""

from __future__ import annotations

import subprocess
from pathlib import Path

FAKE_CLI = Path(__file__).resolve().parent / "fakebin" / "container"
NETWORK = "deepgym-apple-fake"


class AppleFake:
    """The fake CLI's path, its call log, and outside actions on a container by name."""

    def __init__(self, log: Path):
        self.cli = str(FAKE_CLI)
        self.log = log

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
        """Remove the fake's containers and its network."""
        found = subprocess.run(["docker", "ps", "-aq", "--filter", "label=deepgym.test.apple-fake"],
                               capture_output=True, text=True).stdout.split()
        if found:
            subprocess.run(["docker", "rm", "-f", *found], capture_output=True)
        subprocess.run(["docker", "network", "rm", NETWORK], capture_output=True)
