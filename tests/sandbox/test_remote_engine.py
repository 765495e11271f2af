"""A remote Docker engine runs the same docker sandbox: a second engine on this machine (its own data root,
socket and containerd, no bridge; scripts/second-engine.sh), reached through DOCKER_HOST or the docker_host
option, over tcp://, unix:// and ssh:// (an sshd of the tests' own on 127.0.0.1, scripts/start-sshd.sh, whose
sessions' docker CLI talks to the second engine). The conformance suite runs on it too (tests/conformance,
``docker-remote`` and ``docker-ssh``).

Each test judges with a tag that exists only on the second engine, so a sample that reached the first engine
instead would have no image.
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest
from support import unavailable, verl_reward

from deepgym import DeepGym, NoVerdictError
from deepgym.errors import ConfigurationError
from deepgym.images import build, image_name
from deepgym.sandbox.docker import engine_options

ENV = "coin_change"
ROOT = Path(__file__).resolve().parents[2]
LOOPING = "```python\ndef coin_change(coins, amount):\n    while True:\n        pass\n```\n"


def answer(name: str) -> str:
    code = next((ROOT / "environments" / ENV / "solutions").glob(f"{name}.*")).read_text()
    return f"```python\n{code}\n```\n"


@pytest.fixture
def remote_only(second_engine, monkeypatch) -> str:
    """coin_change's image on the second engine under a tag the first engine does not have; deepgym uses it."""
    build([ENV])
    second_engine.load(image_name(ENV))
    tag = f"remote-only-{os.getpid()}"
    assert second_engine.docker("tag", image_name(ENV), f"deepgym-{ENV}:{tag}").returncode == 0
    monkeypatch.setenv("DEEPGYM_TAG", tag)
    yield tag
    second_engine.docker("image", "rm", f"deepgym-{ENV}:{tag}")


@pytest.mark.docker
def test_docker_host_in_the_environment_reaches_the_remote_engine(second_engine, remote_only, monkeypatch):
    monkeypatch.setenv("DOCKER_HOST", second_engine.host)
    with DeepGym(mode="docker") as gym:
        outcomes = gym.run_batch(ENV, [answer("reference"), answer("wrong_greedy"), LOOPING])
    assert [(o.score, o.error_type) for o in outcomes] == [(1.0, None), (0.0, "wrong_answer"),
                                                           (0.0, "solution_timeout")]


@pytest.mark.docker
def test_the_docker_host_option_reaches_the_remote_engine_over_its_unix_socket(second_engine, remote_only):
    with DeepGym(mode="docker", docker_host=f"unix://{second_engine.folder}/docker.sock") as gym:
        right, wrong = gym.run(ENV, answer("reference")), gym.run(ENV, answer("wrong_greedy"))
    assert (right.score, wrong.score) == (1.0, 0.0)
    with DeepGym(mode="docker") as local:
        assert local.judge(ENV, answer("reference")).error_type == "image_missing", "the tag is the remote's only"


def test_an_engine_that_does_not_answer_is_no_verdict_never_a_zero():
    with DeepGym(mode="docker", docker_host="tcp://127.0.0.1:1") as gym:
        outcome = gym.judge(ENV, answer("reference"))
    assert isinstance(outcome, NoVerdictError) and outcome.error_type == "daemon_unavailable"


def test_docker_host_is_refused_outside_docker_mode():
    with pytest.raises(ValueError, match="docker_host is an option of mode 'docker'"):
        DeepGym(mode="local", allow_local=True, docker_host="tcp://127.0.0.1:2375")


@pytest.mark.parametrize("docker_host, expected", [
    ("tcp://judge-1.internal:2375", {"base_url": "tcp://judge-1.internal:2375"}),
    ("unix:///run/engine.sock", {"base_url": "unix:///run/engine.sock"}),
    ("ssh://deepgym@judge-1", {"base_url": "ssh://deepgym@judge-1"}),
])
def test_docker_host_is_read_as_docker_host_is(docker_host, expected, monkeypatch):
    """The option goes through docker-py's own DOCKER_HOST parsing; ssh:// through paramiko (deepgym.sandbox.ssh)."""
    monkeypatch.setenv("DOCKER_HOST", "unix:///elsewhere.sock")
    for variable in ("DOCKER_TLS_VERIFY", "DOCKER_CERT_PATH"):
        monkeypatch.delenv(variable, raising=False)
    assert engine_options(docker_host) == expected
    assert engine_options(None) == {"base_url": "unix:///elsewhere.sock"}


@pytest.mark.docker
@pytest.mark.verl
def test_verls_reward_kwargs_docker_host_reaches_the_remote_engine(second_engine, remote_only):
    from deepgym.integrations.verl import reset_clients

    score = verl_reward(ENV, mode="docker", docker_host=second_engine.host)
    try:
        assert (score(answer("reference"))["score"], score(answer("wrong_greedy"))["score"]) == (1.0, 0.0)
    finally:
        reset_clients()


@pytest.mark.verl
def test_verls_reward_kwargs_docker_host_that_does_not_answer_is_no_verdict():
    from deepgym.integrations.verl import VerlNoVerdictError, reset_clients

    score = verl_reward(ENV, mode="docker", docker_host="tcp://127.0.0.1:1")
    try:
        with pytest.raises(VerlNoVerdictError) as caught:
            score(answer("reference"))
        assert caught.value.error_type == "daemon_unavailable"
    finally:
        reset_clients()


@pytest.mark.docker
def test_an_ssh_docker_host_judges_on_the_remote_engine(ssh_engine, remote_only, monkeypatch):
    """Over ssh:// with the user's ~/.ssh (its key and the host's key in known_hosts), both docker paths."""
    monkeypatch.setenv("HOME", str(ssh_engine.home))
    for exec_path in ("0", "1"):
        monkeypatch.setenv("DEEPGYM_DOCKER_EXEC", exec_path)
        with DeepGym(mode="docker", docker_host=ssh_engine.url) as gym:
            outcomes = gym.run_batch(ENV, [answer("reference"), answer("wrong_greedy"), LOOPING])
        assert [(o.score, o.error_type) for o in outcomes] == [(1.0, None), (0.0, "wrong_answer"),
                                                               (0.0, "solution_timeout")], exec_path


def _over_ssh(url: str, home: Path, monkeypatch) -> NoVerdictError:
    monkeypatch.setenv("HOME", str(home))
    with DeepGym(mode="docker", docker_host=url) as gym:
        outcome = gym.judge(ENV, answer("reference"))
    assert isinstance(outcome, NoVerdictError) and outcome.error_type == "daemon_unavailable", outcome
    return outcome


@pytest.mark.docker
def test_an_ssh_host_whose_key_is_not_in_known_hosts_is_no_verdict(ssh_engine, monkeypatch):
    """An unknown host key is refused (never trusted on first use), and the reason says how to add it."""
    outcome = _over_ssh(ssh_engine.url, ssh_engine.home_with("id_ed25519"), monkeypatch)
    port = ssh_engine.url.rsplit(":", 1)[1]
    assert "is not in ~/.ssh/known_hosts" in str(outcome) and f"ssh-keyscan -p {port} 127.0.0.1" in str(outcome)


@pytest.mark.docker
def test_an_ssh_host_whose_key_changed_is_no_verdict(ssh_engine, monkeypatch, tmp_path):
    home = ssh_engine.home_with("id_ed25519")
    other = tmp_path / "other_host_key"
    assert subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(other)]).returncode == 0
    port = ssh_engine.url.rsplit(":", 1)[1]
    (home / ".ssh" / "known_hosts").write_text(f"[127.0.0.1]:{port} {other.with_suffix('.pub').read_text()}")
    outcome = _over_ssh(ssh_engine.url, home, monkeypatch)
    assert "is not the one ~/.ssh/known_hosts holds" in str(outcome)


@pytest.mark.docker
def test_an_ssh_host_that_refuses_the_key_is_no_verdict(ssh_engine, monkeypatch, tmp_path):
    home = ssh_engine.home_with("known_hosts")
    key = home / ".ssh" / "id_ed25519"
    assert subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(key)]).returncode == 0
    monkeypatch.delenv("SSH_AUTH_SOCK", raising=False)
    outcome = _over_ssh(ssh_engine.url, home, monkeypatch)
    assert "root@127.0.0.1" in str(outcome) and "refused every key offered" in str(outcome)


def test_an_ssh_host_where_nothing_listens_is_no_verdict(tmp_path, monkeypatch):
    if importlib.util.find_spec("paramiko") is None:
        unavailable("ssh:// needs paramiko (pip install 'deepgym[ssh]')")
    outcome = _over_ssh("ssh://root@127.0.0.1:1", tmp_path, monkeypatch)
    assert "no ssh server answers at 127.0.0.1:1" in str(outcome)


def test_an_ssh_docker_host_without_paramiko_says_which_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "paramiko", None)  # importlib finds no such module
    with pytest.raises(ConfigurationError, match=r"ssh://root@judge-1 .*pip install 'deepgym\[ssh\]'"):
        DeepGym(mode="docker", docker_host="ssh://root@judge-1")
