"""The exceptions deepgym raises. Catch :class:`DeepGymError` to catch them all.

::

    DeepGymError
    ├── NoVerdictError (deepgym.verdict)   the infrastructure failed: this sample has no verdict
    ├── EnvironmentNotFoundError           an unknown environment name (also a LookupError)
    ├── ManifestError                      a malformed manifest: names the file, the key and the fix (ValueError)
    ├── LocalModeNotAllowedError           mode="local" without the explicit opt-in (PermissionError)
    ├── ImageBuildError                    `deepgym images build` failed (RuntimeError)
    ├── ImagePushError                     `deepgym images push` failed: names the image, the registry and the fix (RuntimeError)
    ├── EngineUnavailableError             an engine command (not a sample) found no engine (ConnectionError)
    └── ConfigurationError                 a setting or file the user gave is wrong: names it and the fix (ValueError)
"""

from __future__ import annotations


class DeepGymError(Exception):
    """Root of every deepgym exception."""


class EnvironmentNotFoundError(DeepGymError, LookupError):
    """No environment has this name. The message lists the known ones."""

    def __init__(self, name: str, known: list[str]):
        import difflib

        self.name = name
        self.known = known
        close = difflib.get_close_matches(name, known, n=1)
        hint = f" Did you mean {close[0]!r}?" if close else ""
        super().__init__(f"unknown environment {name!r}.{hint} Known environments: {', '.join(known) or 'none'}")


class ManifestError(DeepGymError, ValueError):
    """A manifest that cannot be loaded. The message names the file, the key, the problem and the fix."""

    def __init__(self, path: str, key: str, problem: str, fix: str):
        self.path = path
        self.key = key
        super().__init__(f"{path}: {key}: {problem}. Fix: {fix}")


class LocalModeNotAllowedError(DeepGymError, PermissionError):
    """mode="local" runs model-written code on this host with no isolation, so it needs an explicit opt-in."""


class ImageBuildError(DeepGymError, RuntimeError):
    """Building images failed; the message says which step and how to fix it."""


class ImagePushError(DeepGymError, RuntimeError):
    """Pushing an image failed (the registry refused, needs a login, cannot be reached); the message names the
    image, the registry and the fix."""


class EngineUnavailableError(DeepGymError, ConnectionError):
    """A command that is not judging a sample (``deepgym cleanup``) could not reach the container engine.
    Samples never raise it: for them the same failure is the no-verdict type ``daemon_unavailable``."""


class ConfigurationError(DeepGymError, ValueError):
    """A setting, option or file the user supplied is wrong. Never a sample's fault and never a 0: the message
    names the bad input and how to fix it, before anything is judged with it."""
