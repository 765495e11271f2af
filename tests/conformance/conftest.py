"""The provider under test. ``DEEPGYM_CONFORMANCE`` (comma-separated, default ``docker,local,docker-remote``)
or ``--provider NAME`` (repeatable) chooses the providers; docker runs both ways: ``docker-attach``
(Provider.run's attached main process) and ``docker-exec`` (the generic create-and-exec path);
``docker-remote`` is the docker provider on a second engine reached over tcp:// (scripts/second-engine.sh), as
a remote host would be. A provider that is planned but not implemented here, or has no credentials, is
reported as not run (a skip), never passed.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from dataclasses import dataclass

import pytest

from deepgym.sandbox import Provider, SandboxSpec

PLANNED = {"daytona": "DAYTONA_API_KEY", "e2b": "E2B_API_KEY", "modal": "MODAL_TOKEN_ID", "apple": None}


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--provider", action="append", default=[],
                     help="a provider for tests/conformance (docker, local, docker-remote, daytona, e2b, modal, apple); "
                          "repeatable")


def _chosen(config: pytest.Config) -> list[str]:
    names = config.getoption("--provider") or os.environ.get("DEEPGYM_CONFORMANCE", "docker,local,docker-remote").split(",")
    chosen = []
    for name in (n.strip() for n in names if n.strip()):
        chosen += ["docker-attach", "docker-exec"] if name == "docker" else [name]
    return chosen


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "target" in metafunc.fixturenames:
        params = [pytest.param(name, id=name, marks=[pytest.mark.docker] if name.startswith("docker") else [])
                  for name in _chosen(metafunc.config)]
        metafunc.parametrize("target", params, indirect=True, scope="module")


@dataclass
class Target:
    """A provider and how to address its sandboxes: an image, the python in it, whether it isolates, and the
    docker CLI of its engine (for the docker ones: what removes or kills a sandbox from outside)."""

    name: str
    provider: Provider
    image: str
    python: str
    isolated: bool
    cli: tuple[str, ...] = ("docker",)

    def spec(self, **fields) -> SandboxSpec:
        return SandboxSpec(image=self.image, **fields)

    def py(self, code: str) -> list[str]:
        return [self.python, "-I", "-S", "-c", code]

    def only_isolated(self, what: str) -> None:
        """Mark the test as an expected failure where the provider cannot promise ``what``."""
        if not self.isolated:
            pytest.xfail(f"{self.name} has no isolation: it cannot promise {what}")


@pytest.fixture(scope="module")
def target(request: pytest.FixtureRequest) -> Iterator[Target]:
    name: str = request.param
    if name in PLANNED:
        variable = PLANNED[name]
        credentials = f"{variable} is {'set' if os.environ.get(variable) else 'not set'}" if variable else "local only on macOS"
        pytest.skip(f"not run: the {name} provider is not implemented yet ({credentials})")
    if name == "docker-remote":
        from deepgym.images import build, image_name
        from deepgym.sandbox.docker import DockerProvider

        engine = request.getfixturevalue("second_engine")
        build(["coin_change", "prog_max_subarray"])
        engine.load(*(image_name(image) for image in ("base", "coin_change", "prog_max_subarray")))
        provider = DockerProvider(docker_host=engine.host)
        target = Target(name, provider, provider.image(image_name("base")).id, "python3", True,
                        cli=("docker", "--host", engine.host))
    elif name.startswith("docker"):
        from deepgym.images import build, image_name
        from deepgym.sandbox.docker import DockerProvider

        build(["coin_change"])  # not conftest's ensure_images: tests/verl's conftest may hold that module name
        provider: Provider = DockerProvider(attach=name == "docker-attach")
        target = Target(name, provider, provider.image(image_name("base")).id, "python3", True)
    elif name == "local":
        from deepgym.sandbox.local import LocalProvider

        with pytest.warns(RuntimeWarning):
            provider = LocalProvider(allow_local=True)
        # Commands run as another uid too (deepgym as root), which cannot reach a virtualenv under /root.
        python = "/usr/bin/python3" if os.access("/usr/bin/python3", os.X_OK) else sys.executable
        target = Target(name, provider, "host", python, False)
    else:
        pytest.fail(f"unknown provider {name!r}")
    try:
        yield target
    finally:
        provider.close()
