"""The docker provider (:mod:`~deepgym.sandbox.docker.provider`) and what it is made of: one engine client
(``engine``), its owners and reaper (``owners``), the reader of Docker's stream frames (``frames``), the
programs run inside a sandbox (``scripts``), a sandbox (``sandbox``), and the provider's pools (``ready``:
containers started ahead of need; ``warm``: warm mode's long-lived containers). The pools and the sandbox
take the :class:`~deepgym.sandbox.docker.engine.Engine`, never the provider."""

from .engine import (API_VERSION, ENGINE_GRACE_S, LOOPBACK_SYSCTLS, Attached, Engine, Launch, container_settings,
                     engine_options, key, translate_errors)
from ..frames import FrameReader
from .owners import LABEL, OWNER_LABEL, owner_alive, owner_label, pid_namespace, process_start_time
from .provider import EXEC_PATH_VARIABLE, DockerProvider
from ..ready import ReadyPool
from .sandbox import DockerSandbox
from .scripts import FILE_HELPER, FILE_TIMEOUT_S, INIT, KILL_ALL, file_error, read_file_reply

__all__ = ["API_VERSION", "ENGINE_GRACE_S", "EXEC_PATH_VARIABLE", "FILE_HELPER", "FILE_TIMEOUT_S", "INIT", "KILL_ALL",
           "LABEL", "LOOPBACK_SYSCTLS", "OWNER_LABEL", "Attached", "DockerProvider", "DockerSandbox", "Engine",
           "FrameReader", "Launch", "ReadyPool", "container_settings", "engine_options", "file_error", "key",
           "owner_alive", "owner_label", "pid_namespace", "process_start_time", "read_file_reply",
           "translate_errors"]
