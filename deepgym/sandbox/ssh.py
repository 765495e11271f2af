"""Docker engines reached over ``ssh://`` (``docker_host="ssh://user@host:port"`` or DOCKER_HOST): what the
transport needs and what its failures mean.

docker-py speaks ssh:// through paramiko, the ``ssh`` extra (``pip install 'deepgym[ssh]'``); its other way,
shelling out to the system's ``ssh``, imports paramiko too, and its pipe ignores socket timeouts, so a command
deadline could not be kept over it. paramiko reads ``~/.ssh/config`` (HostName, Port, User, IdentityFile,
ProxyCommand), offers ssh-agent's keys and ``~/.ssh/id_*``, and checks the host key against
``~/.ssh/known_hosts``: a host whose key is not there is refused, never trusted on first use, so each failure
here is the infrastructure's and becomes ProviderUnavailable with the fix, never a sample's 0.
"""

from __future__ import annotations

import importlib.util
import urllib.parse

from ..errors import ConfigurationError


def is_ssh(url: str | None) -> bool:
    return bool(url) and url.startswith("ssh://")


def require_transport(url: str | None) -> None:
    """Raise ConfigurationError when ``url`` is ssh:// and paramiko is not installed."""
    if is_ssh(url) and importlib.util.find_spec("paramiko") is None:
        raise ConfigurationError(f"the Docker engine {url} is reached over ssh, which needs paramiko: "
                                 "pip install 'deepgym[ssh]'")


def failure(exc: BaseException, url: str | None) -> str | None:
    """What went wrong with the ssh connection to ``url``, with the fix, for one of paramiko's exceptions (or a
    socket error under it); None for anything else."""
    if not is_ssh(url):
        return None
    import paramiko  # present: require_transport ran when the provider was made

    parsed = urllib.parse.urlparse(url)
    host, port, user = parsed.hostname, parsed.port or 22, parsed.username or "(your user name)"
    if isinstance(exc, paramiko.BadHostKeyException):
        return (f"the ssh host key of {host}:{port} is not the one ~/.ssh/known_hosts holds for it (it changed, "
                f"or something else answers there): check it, then replace the old entry "
                f"(ssh-keygen -R '[{host}]:{port}')")
    if isinstance(exc, paramiko.AuthenticationException):
        return (f"{user}@{host}:{port} refused every key offered (ssh-agent's, ~/.ssh/id_*, IdentityFile in "
                f"~/.ssh/config): authorise your public key for {user} there, or name its key with IdentityFile")
    if isinstance(exc, paramiko.SSHException) and "not found in known_hosts" in str(exc):
        return (f"the ssh host key of {host}:{port} is not in ~/.ssh/known_hosts, and an unknown host is never "
                f"trusted: check its key and add it (connect once with `ssh -p {port} {user}@{host}`, or "
                f"ssh-keyscan -p {port} {host} >> ~/.ssh/known_hosts after checking what it prints)")
    if isinstance(exc, paramiko.SSHException):
        return f"the ssh connection to {host}:{port} failed: {exc}"
    if isinstance(exc, OSError):
        return f"no ssh server answers at {host}:{port}: {exc}"
    return None
