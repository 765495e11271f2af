"""The provider under test. ``DEEPGYM_CONFORMANCE`` (comma-separated, default
``docker,local,docker-remote,daytona-standin,e2b-standin,apple-fake``) or ``--provider NAME`` (repeatable)
chooses the providers; docker runs both ways: ``docker-attach`` (Provider.run's attached main process) and
``docker-exec`` (the generic create-and-exec path); ``docker-remote`` is the docker provider on a second engine
reached over tcp:// (scripts/second-engine.sh), as a remote host would be.
"""

from __future__ import annotations

import importlib.util
import os
import sys
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from deepgym.sandbox import Provider, SandboxSpec

PLANNED = {"modal": "MODAL_TOKEN_ID"}
ROOT = Path(__file__).resolve().parents[2]
# Limits a provider cannot set per sandbox: the check is an expected failure that says why.
DAYTONA_CANNOT = {
    "memory": "Daytona sizes a sandbox by its snapshot, in whole GiB; a smaller memory limit is not honoured",
    "pids": "Daytona has no pids limit per sandbox",
}
APPLE_CANNOT = {
    "pids": "Apple's container has no pids limit",
    "interfaces": "Apple's VM keeps its interface; deepgym takes it down from inside instead",
}
E2B_CANNOT = {
    "memory": "E2B sizes a sandbox by its template; a memory limit per sandbox is not honoured",
    "pids": "E2B has no pids limit per sandbox",
}


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--provider", action="append", default=[],
                     help="a provider for tests/conformance (docker, local, docker-remote, daytona-standin, "
                          "e2b-standin, apple-fake, daytona, e2b, modal, apple); repeatable")


def _chosen(config: pytest.Config) -> list[str]:
    names = config.getoption("--provider") or os.environ.get(
        "DEEPGYM_CONFORMANCE", "docker,local,docker-remote,daytona-standin,e2b-standin,apple-fake").split(",")
    chosen = []
    for name in (n.strip() for n in names if n.strip()):
        chosen += ["docker-attach", "docker-exec"] if name == "docker" else [name]
    return chosen


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "target" in metafunc.fixturenames:
        params = [pytest.param(name, id=name, marks=[pytest.mark.docker] if name.startswith("docker")
                               or name.endswith(("-standin", "-fake")) else [])
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
    outside: object = None
    """A stand-in: what a test does to a sandbox from outside (remove_from_outside, kill_from_outside, gone)."""
    cannot: Mapping[str, str] = field(default_factory=dict)

    def spec(self, **fields) -> SandboxSpec:
        return SandboxSpec(image=self.image, **fields)

    def py(self, code: str) -> list[str]:
        return [self.python, "-I", "-S", "-c", code]

    def only_isolated(self, what: str) -> None:
        """Mark the test as an expected failure where the provider cannot promise ``what``."""
        if not self.isolated:
            pytest.xfail(f"{self.name} has no isolation: it cannot promise {what}")

    def only_if_settable(self, limit: str) -> None:
        """Mark the test as an expected failure where the provider cannot set ``limit`` per sandbox."""
        if limit in self.cannot:
            pytest.xfail(f"{self.name}: {self.cannot[limit]}")


@pytest.fixture(scope="module")
def target(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Target]:
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
    elif name in ("daytona", "daytona-standin"):
        yield from _daytona_target(name, tmp_path_factory)
        return
    elif name in ("apple", "apple-fake"):
        yield from _apple_target(name, tmp_path_factory)
        return
    elif name in ("e2b", "e2b-standin"):
        yield from _e2b_target(name)
        return
    else:
        pytest.fail(f"unknown provider {name!r}")
    try:
        yield target
    finally:
        provider.close()


def _needs_sdk(extra: str, *modules: str) -> None:
    if all(importlib.util.find_spec(module) is None for module in modules):
        missing = f"not run: the {extra} extra is not installed (pip install 'deepgym[{extra}]')"
        pytest.fail(missing) if _in_ci() else pytest.skip(missing)


def _apple_target(name: str, scratch: pytest.TempPathFactory) -> Iterator[Target]:
    from deepgym.images import build, image_name
    from deepgym.sandbox.apple import AppleProvider

    if name == "apple":
        if sys.platform != "darwin":
            pytest.skip("not run: Apple's container runs only on macOS")
        provider = AppleProvider()
        yield Target(name, provider, provider.image(image_name("base")).id, "python3", True, cannot=APPLE_CANNOT)
        provider.close()
        return
    sys.path.insert(0, str(ROOT / "tests" / "providers"))
    from standins.apple import AppleFake

    build(["coin_change", "prog_max_subarray"])
    fake = AppleFake(scratch.mktemp("apple") / "calls.jsonl")
    os.environ["FAKE_CONTAINER_LOG"] = str(fake.log)
    provider = AppleProvider(cli=fake.cli)
    try:
        yield Target(name, provider, provider.image(image_name("base")).id, "python3", True, outside=fake,
                     cannot=APPLE_CANNOT)
    finally:
        provider.close()
        fake.stop()
        os.environ.pop("FAKE_CONTAINER_LOG", None)


def _e2b_target(name: str) -> Iterator[Target]:
    _needs_sdk("e2b", "e2b")
    from deepgym.images import image_name
    from deepgym.sandbox.e2b import E2BProvider

    if name == "e2b":
        if not os.environ.get("E2B_API_KEY"):
            pytest.skip("not run: E2B_API_KEY is not set (the real E2B service needs an account)")
        provider = E2BProvider()
        yield Target(name, provider, provider.image(image_name("base")).id, "python3", True, cannot=E2B_CANNOT)
        provider.close()
        return
    sys.path.insert(0, str(ROOT / "tests" / "providers"))
    from standins.e2b import E2BStandIn, template_images

    standin = E2BStandIn().start()
    try:
        template_images(standin, ["base", "coin_change", "prog_max_subarray"])
        provider = E2BProvider(api_key=standin.api_key, api_url=standin.url, sandbox_url=standin.url)
        try:
            yield Target(name, provider, provider.image(image_name("base")).id, "python3", True, outside=standin,
                         cannot=E2B_CANNOT)
        finally:
            provider.close()
    finally:
        standin.stop()


def _daytona_target(name: str, scratch: pytest.TempPathFactory) -> Iterator[Target]:
    _needs_sdk("daytona", "daytona", "daytona_sdk")
    from deepgym.images import image_name
    from deepgym.sandbox.daytona import DaytonaProvider

    if name == "daytona":
        if not os.environ.get("DAYTONA_API_KEY"):
            pytest.skip("not run: DAYTONA_API_KEY is not set (the real Daytona service needs an account)")
        provider = DaytonaProvider()
        yield Target(name, provider, provider.image(image_name("base")).id, "python3", True, cannot=DAYTONA_CANNOT)
        provider.close()
        return
    sys.path.insert(0, str(ROOT / "tests" / "providers"))
    from standins import publish
    from standins.daytona import DaytonaStandIn

    from deepgym.registration import register

    standin = DaytonaStandIn().start()
    try:
        manifest = publish(standin, ["base", "coin_change", "prog_max_subarray"],
                           scratch.mktemp("daytona") / "pushed.json")
        settings = {"api_key": standin.api_key, "api_url": standin.api_url, "target": "us"}
        register("daytona", ["base", "coin_change", "prog_max_subarray"], manifest,
                 provider=DaytonaProvider(**settings))
        provider = DaytonaProvider(**settings)
        try:
            yield Target(name, provider, provider.image(image_name("base")).id, "python3", True, outside=standin,
                         cannot=DAYTONA_CANNOT)
        finally:
            provider.close()
    finally:
        standin.stop()


def _in_ci() -> bool:
    return os.environ.get("CI", "").lower() in ("1", "true", "yes")
