"""The provider under test. ``DEEPGYM_CONFORMANCE`` (comma-separated, default
``docker,local,docker-remote,docker-ssh,daytona-standin,e2b-standin,modal-standin,apple-fake,ray``) or ``--provider NAME`` (repeatable)
chooses the providers; docker runs both ways: ``docker-attach`` (Provider.run's attached main process) and
``docker-exec`` (the generic create-and-exec path); ``docker-remote`` is the docker provider on a second engine
reached over tcp:// (scripts/second-engine.sh), as a remote host would be, and ``docker-ssh`` the same engine
reached over ssh:// through an sshd of the tests' own (scripts/start-sshd.sh); ``ray`` is mode ray on the
tests' two-node Ray cluster (tests/ray_cluster.py), every sandbox on the node whose engine is the second one.
"""

from __future__ import annotations

import contextlib
import importlib
import importlib.util
import os
import sys
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from support import ROOT, environment, image_ref, unavailable

from deepgym.sandbox import Provider, SandboxSpec

sys.path.insert(0, str(ROOT / "tests" / "providers"))  # the stand-ins

ENVS = ["base", "coin_change", "prog_max_subarray"]
# Limits a provider cannot set per sandbox: the check is an expected failure that says why.
DAYTONA_CANNOT = {
    "memory": "Daytona sizes a sandbox by its snapshot, in whole GiB; a smaller memory limit is not honoured",
    "pids": "Daytona has no pids limit per sandbox",
}
APPLE_CANNOT = {
    "pids": "Apple's container has no pids limit",
    "interfaces": "Apple's VM keeps its interface; deepgym takes it down from inside instead",
}
MODAL_CANNOT = {
    "pids": "Modal has no pids limit per sandbox",
}
E2B_CANNOT = {
    "memory": "E2B sizes a sandbox by its template; a memory limit per sandbox is not honoured",
    "pids": "E2B has no pids limit per sandbox",
}


DEFAULT = "docker,local,docker-remote,docker-ssh,daytona-standin,e2b-standin,modal-standin,apple-fake,ray"


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--provider", action="append", default=[],
                     help="a provider for tests/conformance (docker, local, docker-remote, docker-ssh, daytona-standin, "
                          "e2b-standin, modal-standin, apple-fake, daytona, e2b, modal, apple, ray); repeatable")


def _chosen(config: pytest.Config) -> list[str]:
    names = config.getoption("--provider") or os.environ.get(
        "DEEPGYM_CONFORMANCE", DEFAULT).split(",")
    chosen = []
    for name in (n.strip() for n in names if n.strip()):
        chosen += ["docker-attach", "docker-exec"] if name == "docker" else [name]
    return chosen


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "target" in metafunc.fixturenames:
        params = [pytest.param(name, id=name, marks=[pytest.mark.docker, pytest.mark.ray] if name == "ray" else
                               [pytest.mark.docker] if name.startswith("docker") or name.endswith(("-standin", "-fake"))
                               else []) for name in _chosen(metafunc.config)]
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
    scope = contextlib.ExitStack()
    if name in ("docker-remote", "docker-ssh"):
        from deepgym.images import build, image_name
        from deepgym.sandbox.docker import DockerProvider

        engine = request.getfixturevalue("second_engine")
        build(["coin_change", "prog_max_subarray"])
        engine.load(*(image_name(image) for image in ("base", "coin_change", "prog_max_subarray")))
        host = engine.host
        if name == "docker-ssh":
            ssh = request.getfixturevalue("ssh_engine")
            scope.enter_context(environment(HOME=str(ssh.home)))  # its ~/.ssh: the key and known_hosts
            host = ssh.url
        provider = DockerProvider(docker_host=host)
        target = Target(name, provider, provider.image(image_ref(provider, "base")).id, "python3", True,
                        cli=("docker", "--host", engine.host))
    elif name.startswith("docker"):
        from deepgym.images import build, image_name
        from deepgym.sandbox.docker import DockerProvider

        build(["coin_change"])  # not conftest's ensure_images: tests/verl's conftest may hold that module name
        provider: Provider = DockerProvider(attach=name == "docker-attach")
        target = Target(name, provider, provider.image(image_ref(provider, "base")).id, "python3", True)
    elif name == "ray":
        from deepgym.images import build, image_name
        from deepgym.sandbox.ray import RayProvider

        cluster = request.getfixturevalue("ray_cluster")
        engine = request.getfixturevalue("second_engine")
        build(["coin_change", "prog_max_subarray"])
        engine.load(*(image_name(image) for image in ("base", "prog_max_subarray")))  # the cluster loaded coin_change
        scope.enter_context(environment(RAY_ADDRESS=cluster.address, DOCKER_HOST="tcp://127.0.0.1:9"))
        # Every sandbox on node b (its resource of its own), whose engine the checks reach from outside.
        provider = RayProvider(resource="deepgym_b")
        target = Target(name, provider, image_name("base"), "python3", True, cli=("docker", "--host", engine.host))
    elif name == "local":
        from deepgym.sandbox.local import LocalProvider

        with pytest.warns(RuntimeWarning):
            provider = LocalProvider(allow_local=True)
        # Commands run as another uid too (deepgym as root), which cannot reach a virtualenv under /root.
        python = "/usr/bin/python3" if os.access("/usr/bin/python3", os.X_OK) else sys.executable
        target = Target(name, provider, "host", python, False)
    elif name.removesuffix("-standin").removesuffix("-fake") in REMOTES:
        yield from _remote_target(name, tmp_path_factory)
        return
    else:
        pytest.fail(f"unknown provider {name!r}")
    try:
        yield target
    finally:
        provider.close()
        scope.close()


def _needs_sdk(extra: str, *modules: str) -> None:
    if all(importlib.util.find_spec(module) is None for module in modules):
        unavailable(f"not run: the {extra} extra is not installed (pip install 'deepgym[{extra}]')")


@dataclass(frozen=True)
class Remote:
    """How the conformance suite reaches one provider that is not docker or local: the real service (run only
    where it can be: ``not_run`` says why not, else None) or its stand-in (a context manager yielding the
    provider and the stand-in, which does things to sandboxes from outside)."""

    modules: tuple[str, ...]
    real: Callable[[], Provider]
    not_run: Callable[[], str | None]
    standin: Callable[[Path], contextlib.AbstractContextManager[tuple[Provider, object]]]
    cannot: Mapping[str, str]


def _without(variable: str, service: str) -> Callable[[], str | None]:
    return lambda: None if os.environ.get(variable) else f"{variable} is not set (the real {service} needs an account)"


@contextlib.contextmanager
def _daytona_standin(scratch: Path) -> Iterator[tuple[Provider, object]]:
    from standins import publish
    from standins.daytona import DaytonaStandIn

    from deepgym.registration import register
    from deepgym.sandbox.daytona import DaytonaProvider

    standin = DaytonaStandIn().start()
    try:
        manifest = publish(standin, ENVS, scratch / "pushed.json")
        settings = {"api_key": standin.api_key, "api_url": standin.api_url, "target": "us"}
        register("daytona", ENVS, manifest, provider=DaytonaProvider(**settings))
        yield DaytonaProvider(**settings), standin
    finally:
        standin.stop()


@contextlib.contextmanager
def _e2b_standin(scratch: Path) -> Iterator[tuple[Provider, object]]:
    from standins import publish
    from standins.e2b import E2BStandIn

    from deepgym.registration import register
    from deepgym.sandbox.e2b import E2BProvider

    standin = E2BStandIn().start()
    try:
        manifest = publish(standin, ENVS, scratch / "pushed.json")
        settings = {"api_key": standin.api_key, "api_url": standin.url, "sandbox_url": standin.url}
        register("e2b", ENVS, manifest, provider=E2BProvider(**settings))
        yield E2BProvider(**settings), standin
    finally:
        standin.stop()


@contextlib.contextmanager
def _modal_standin(scratch: Path) -> Iterator[tuple[Provider, object]]:
    from standins import publish
    from standins.modal import ModalStandIn

    from deepgym.registration import register
    from deepgym.sandbox.modal import ModalProvider

    standin = ModalStandIn().start()
    try:
        manifest = publish(standin, ENVS, scratch / "pushed.json")
        settings = {"token_id": standin.token_id, "token_secret": standin.token_secret}
        with environment(MODAL_SERVER_URL=standin.url):
            register("modal", ENVS, manifest, provider=ModalProvider(**settings))
            yield ModalProvider(**settings), standin
    finally:
        standin.stop()


@contextlib.contextmanager
def _apple_fake(scratch: Path) -> Iterator[tuple[Provider, object]]:
    from standins.apple import AppleFake

    from deepgym.images import build
    from deepgym.sandbox.apple import AppleProvider

    build([env for env in ENVS if env != "base"])
    fake = AppleFake(scratch / "calls.jsonl")
    try:
        with environment(**fake.variables()):
            yield AppleProvider(cli=fake.cli), fake
    finally:
        fake.stop()


def _real(module: str, cls: str) -> Callable[[], Provider]:
    return lambda: getattr(importlib.import_module(f"deepgym.sandbox.{module}"), cls)()


REMOTES = {
    "daytona": Remote(("daytona", "daytona_sdk"), _real("daytona", "DaytonaProvider"),
                      _without("DAYTONA_API_KEY", "Daytona service"), _daytona_standin, DAYTONA_CANNOT),
    "e2b": Remote(("e2b",), _real("e2b", "E2BProvider"), _without("E2B_API_KEY", "E2B service"), _e2b_standin,
                  E2B_CANNOT),
    "modal": Remote(("modal",), _real("modal", "ModalProvider"), _without("MODAL_TOKEN_ID", "Modal service"),
                    _modal_standin, MODAL_CANNOT),
    "apple": Remote((), _real("apple", "AppleProvider"),
                    lambda: None if sys.platform == "darwin" else "Apple's container runs only on macOS",
                    _apple_fake, APPLE_CANNOT),
}


def _remote_target(name: str, scratch: pytest.TempPathFactory) -> Iterator[Target]:
    """A provider of :data:`REMOTES`: ``<mode>`` is the real service, ``<mode>-standin`` (``apple-fake``) its
    test double; the real one is "not run" (a skip saying why) where it cannot run."""

    mode = name.removesuffix("-standin").removesuffix("-fake")
    how = REMOTES[mode]
    if how.modules:
        _needs_sdk(mode, *how.modules)
    if name == mode:
        reason = how.not_run()
        if reason is not None:
            pytest.skip(f"not run: {reason}")
        context: contextlib.AbstractContextManager = contextlib.nullcontext((how.real(), None))
    else:
        context = how.standin(scratch.mktemp(mode))
    with context as (provider, outside):
        try:
            yield Target(name, provider, provider.image(image_ref(provider, "base")).id, "python3", True, outside=outside,
                         cannot=how.cannot)
        finally:
            provider.close()


