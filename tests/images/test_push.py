"""`deepgym images push` against real registries on 127.0.0.1: Debian's docker-registry in a service container
(pytest-docker, tests/registry/docker-compose.yml), open and behind htpasswd. Each test pushes an image, removes
it from the engine, pulls it back by the manifest's digest and judges with it; the registry is gone afterwards.
"""

from __future__ import annotations

import base64
import io
import json
import os
import secrets
import subprocess
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path

import pytest

from deepgym import DeepGym, NoVerdictError
from deepgym.cli import main
from deepgym.errors import ConfigurationError, ImagePushError
from deepgym.images import HASH_LABEL, build, content_hash, image_name
from deepgym.push import push, repository
from deepgym.pushed import MANIFEST_VARIABLE, read_manifest
from deepgym.sandbox import ImageMissing
from deepgym.sandbox.docker import DockerProvider
from support import HangingRegistry

ENV = "coin_change"
ROOT = Path(__file__).resolve().parents[2]
USER, PASSWORD = "deepgym", "not-a-secret-test-password"  # as tests/registry/docker-compose.yml sets them


def answer(name: str) -> str:
    code = next((ROOT / "environments" / ENV / "solutions").glob(f"{name}.*")).read_text()
    return f"```python\n{code}\n```\n"


@pytest.mark.parametrize("registry", ["https://127.0.0.1:5000", "127.0.0.1:5000/repo:tag", "acme", "HOST.io/Team",
                                      ""])
def test_a_registry_that_is_not_host_port_path_is_refused_with_the_fix(registry):
    with pytest.raises(ConfigurationError, match=r"host\[:port\]\[/path\]"):
        repository(registry, ENV)


@pytest.mark.parametrize("registry, expected", [("127.0.0.1:5000", "127.0.0.1:5000/deepgym-coin_change"),
                                                ("ghcr.io/acme/", "ghcr.io/acme/deepgym-coin_change"),
                                                ("localhost/a/b", "localhost/a/b/deepgym-coin_change")])
def test_repositories_are_the_registry_then_the_image_name(registry, expected):
    assert repository(registry, ENV) == expected


def test_the_command_refuses_a_bad_registry_before_building_anything(capsys):
    assert main(["images", "push", "--registry", "https://127.0.0.1:5000", ENV]) == 2
    assert "is not a registry" in capsys.readouterr().err


@dataclass(frozen=True)
class Registry:
    address: str  # 127.0.0.1:PORT
    auth: bool

    def tags(self, name: str) -> list[str]:
        """The tags of ``name``'s repository, from the registry's own HTTP API."""
        request = urllib.request.Request(f"http://{self.address}/v2/deepgym-{name}/tags/list")
        if self.auth:
            token = base64.b64encode(f"{USER}:{PASSWORD}".encode()).decode()
            request.add_header("Authorization", f"Basic {token}")
        with urllib.request.urlopen(request, timeout=10) as response:
            return json.load(response)["tags"]


@pytest.fixture(params=["open", "htpasswd"])
def registry(request, docker_services) -> Registry:
    return Registry(f"127.0.0.1:{docker_services.port_for(request.param, 5000)}", request.param == "htpasswd")


@pytest.fixture
def unique_image(monkeypatch) -> str:
    """coin_change's current image plus a layer of its own (4 KiB of random bytes), under a tag of this test's:
    removing it from the engine removes bytes no other image holds, so pulling it back really fetches them."""
    build([ENV])
    source = image_name(ENV)
    monkeypatch.setenv("DEEPGYM_TAG", f"push-test-{os.getpid()}-{secrets.token_hex(3)}")
    subprocess.run(["docker", "build", "-q", "-t", image_name(ENV), "-"], check=True, capture_output=True, text=True,
                   input=f"FROM {source}\nRUN head -c 4096 /dev/urandom > /opt/push-test-nonce\n")
    yield image_name(ENV)
    subprocess.run(["docker", "image", "rm", "-f", image_name(ENV)], capture_output=True)


@pytest.fixture
def docker_config(tmp_path, monkeypatch) -> Path:
    """A docker CLI configuration of this test's own, so `docker login` never touches the user's."""
    folder = tmp_path / "docker-config"
    folder.mkdir()
    monkeypatch.setenv("DOCKER_CONFIG", str(folder))
    return folder


def image_id(ref: str) -> str | None:
    found = subprocess.run(["docker", "image", "inspect", "--format", "{{.Id}}", ref], capture_output=True, text=True)
    return found.stdout.strip() if found.returncode == 0 else None


@pytest.mark.docker
def test_a_pushed_image_round_trips_by_digest_and_judges(registry, unique_image, docker_config, tmp_path,
                                                         monkeypatch, capsys):
    manifest = tmp_path / "deepgym-images.json"
    if registry.auth:
        with pytest.raises(ImagePushError, match=f"Fix: log in first: `docker login {registry.address}`"):
            push(registry.address, [ENV], manifest=manifest, log=io.StringIO())
        assert not manifest.exists()
        subprocess.run(["docker", "login", registry.address, "-u", USER, "--password-stdin"], input=PASSWORD,
                       check=True, capture_output=True, text=True)

    assert main(["images", "push", "--registry", registry.address, "--manifest", str(manifest), ENV]) == 0
    pushed = read_manifest(manifest)[ENV]
    assert capsys.readouterr().out == f"{ENV}  {pushed.ref}\n"
    assert pushed.repository == f"{registry.address}/deepgym-{ENV}"
    assert pushed.tag == content_hash(ENV) and registry.tags(ENV) == [pushed.tag], "tagged by content, never latest"
    assert image_id(pushed.tagged) is None, "the registry's name for the image is not left on the engine"

    built = image_id(unique_image)
    subprocess.run(["docker", "image", "rm", unique_image], check=True, capture_output=True)
    assert image_id(built) is None, "the pushed image is gone from the engine"
    with DeepGym(mode="docker", image_manifest=manifest) as gym:
        missing = gym.judge(ENV, answer("reference"))
    assert isinstance(missing, NoVerdictError) and missing.error_type == "image_missing"
    assert f"docker pull {pushed.ref}" in missing.reason

    subprocess.run(["docker", "pull", "-q", pushed.ref], check=True, capture_output=True)
    try:
        with DeepGym(mode="docker", image_manifest=manifest) as gym:
            right = gym.run(ENV, answer("reference"))
        monkeypatch.setenv(MANIFEST_VARIABLE, str(manifest))
        with DeepGym(mode="docker") as gym:
            wrong = gym.run(ENV, answer("wrong_greedy"))
        assert (right.score, right.image_status, right.image_id) == (1.0, "current", built)
        assert (wrong.score, wrong.error_type, wrong.image_id) == (0.0, "wrong_answer", built)
    finally:
        subprocess.run(["docker", "image", "rm", "-f", pushed.ref], capture_output=True)


@pytest.mark.docker
def test_a_remote_engine_pulls_the_pushed_image_by_digest_and_judges_with_it(docker_services, unique_image,
                                                                            second_engine, tmp_path):
    """The same bytes on another engine: pushed from this one, pulled by digest on the second (which never had
    the image), judged there through docker_host."""
    address = f"127.0.0.1:{docker_services.port_for('open', 5000)}"
    manifest = tmp_path / "deepgym-images.json"
    pushed = push(address, [ENV], manifest=manifest, log=io.StringIO())[ENV]
    assert second_engine.docker("image", "inspect", pushed.ref).returncode != 0
    pulled = second_engine.docker("pull", "-q", pushed.ref)
    assert pulled.returncode == 0, pulled.stderr
    try:
        with DeepGym(mode="docker", docker_host=second_engine.host, image_manifest=manifest) as gym:
            right = gym.run(ENV, answer("reference"))
            wrong = gym.run(ENV, answer("wrong_greedy"))
        assert (right.score, wrong.score, wrong.error_type) == (1.0, 0.0, "wrong_answer")
        assert right.image_id == image_id(unique_image) and right.image_status == "current"
    finally:
        second_engine.docker("image", "rm", "-f", pushed.ref)


@pytest.mark.docker
def test_the_docker_provider_pulls_a_digest_and_only_a_digest_within_its_timeout(docker_services, unique_image,
                                                                                  second_engine, tmp_path):
    """Provider.pull, which a Ray node uses for an image it lacks: the pushed digest arrives on the second engine
    (which never had it) as the bytes pushed; a tag is refused; a registry that never answers ends the pull
    within its timeout as image_missing."""
    address = f"127.0.0.1:{docker_services.port_for('open', 5000)}"
    pushed = push(address, [ENV], manifest=tmp_path / "deepgym-images.json", log=io.StringIO())[ENV]
    provider = DockerProvider(docker_host=second_engine.host)
    hanging = HangingRegistry()
    try:
        assert second_engine.docker("image", "inspect", pushed.ref).returncode != 0
        pulled = provider.pull(pushed.ref, 120)
        assert pulled.id == image_id(unique_image) and pulled.labels[HASH_LABEL] == content_hash(ENV)
        with pytest.raises(ImageMissing, match="names no digest"):
            provider.pull(pushed.tagged, 120)
        started = time.monotonic()
        with pytest.raises(ImageMissing, match="could not be pulled"):
            provider.pull(f"127.0.0.1:{hanging.port}/deepgym-{ENV}@sha256:{'0' * 64}", 3)
        assert time.monotonic() - started < 15, "the engine's own wait for the registry is longer"
    finally:
        hanging.close()
        provider.close()
        second_engine.docker("image", "rm", "-f", pushed.ref)
