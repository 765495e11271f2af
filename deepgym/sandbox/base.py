"""The sandbox interface: what every place that runs untrusted code (Docker, this host, a remote provider)
offers deepgym, and nothing more.

A :class:`Provider` creates a :class:`Sandbox` from an image and a :class:`SandboxSpec`. A sandbox can
:meth:`~Sandbox.exec` an argv (options in :class:`ExecOptions`, the outcome an :class:`ExecResult`),
:meth:`~Sandbox.put` and :meth:`~Sandbox.get` a :class:`File`, and :meth:`~Sandbox.close`. Those are every
provider's common ground: Daytona, E2B, Modal and Apple ``container`` all create from an image, exec with a
timeout, upload, download and delete; none attaches to a main process. Options live in frozen dataclasses so
that these signatures never grow.

A non-zero exit status, a timeout or output over the cap is data in the :class:`ExecResult`. An
infrastructure failure is a :class:`SandboxError` whose ``error_type`` is a no-verdict type of
:data:`deepgym.runner.protocol.ERROR_TYPES`; each provider translates its client's errors into them in one
place. Nothing here decides a verdict: :func:`deepgym.verdict.classify` does, from the runner's own facts.

How each consumer uses it::

    # one-shot judging (deepgym.judging): a fresh sandbox per sample, the request on the runner's stdin
    result = provider.run(spec, IMAGE_RUNNER, ExecOptions(stdin=request_json, timeout_s=deadline))
    observation = observe(result)                     # then classify(request, observation, env)

    # a session: one sandbox per episode, many commands, the verifier in the same sandbox at the end
    box = provider.create(spec)
    try:
        for action in actions:
            shown = box.exec(["bash", "-lc", action], ExecOptions(user="10000:10000", timeout_s=step_s))
        verdict = judge_in(box, final_request)
    finally:
        box.close()

    # a warm pool: long-lived sandboxes, each sample under its own uid and scratch directory
    boxes = [provider.create(spec) for _ in range(size)]
    result = boxes[i].exec(runner_argv, ExecOptions(stdin=request_with_uid_and_scratch, timeout_s=deadline))

    # a remote provider: the same calls; only how the sandbox is made differs
    provider = make_provider("daytona")               # spec.lifetime_s becomes the provider's own TTL
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar, Protocol

from .errors import ImageMissing, NodeLost, ProviderUnavailable, SandboxError, SandboxLost, StartFailure  # noqa: F401

if TYPE_CHECKING:
    import socket

    from ..admission import Admission
    from ..runner.protocol import Request

# How deepgym's processes start in an image: isolated (no PYTHON* variables, user site or script folder), no .pyc.
IMAGE_PYTHON = ("python3", "-I", "-B")
# The runner's command line: the image's entry point, but ``-c`` (runpy's imports cost a fresh runner some 4 ms).
IMAGE_RUNNER = (*IMAGE_PYTHON, "-c", "from deepgym_runner.__main__ import leave, main; leave(main())")
# The in-sandbox sides of a shell episode and of a persistent terminal, as the image carries them.
IMAGE_EPISODE_RUNNER = (*IMAGE_PYTHON, "-m", "deepgym_runner.episode.verify")
IMAGE_TERMINAL = (*IMAGE_PYTHON, "-m", "deepgym_runner.episode.terminal")
STDERR_TAIL_BYTES = 8192
"""How much of a command's stderr an :class:`ExecResult` keeps: the end, where a traceback says what broke."""


@dataclass(frozen=True)
class Mount:
    """A writable tmpfs of its own beside ``/tmp`` (of ``tmpfs_mb`` too), owned by ``uid``: an episode's
    workspace where programs may run (``exec``), or a folder of the script verifier that only its owner may
    write. Docker's provider makes them (:attr:`Provider.mounts`); on a provider whose root file system is
    writable (:attr:`Provider.writable_root`) the episode makes them as folders (:mod:`deepgym.session.mounts`)."""

    path: str
    uid: int
    mode: int = 0o755
    exec: bool = False


@dataclass(frozen=True)
class SandboxSpec:
    """How to make one sandbox. Limits are the sandbox's own (the runner's share included); a provider maps
    each to its own terms, or refuses with ``sandbox_start_failure`` when it cannot honour one."""

    image: str
    """An image reference the provider can start: a local image id, or a registry reference with a digest."""
    memory_mb: int = 640
    """Memory and swap together; the kernel's OOM killer acts past it."""
    pids: int = 72
    cpus: float = 1.0
    nofile: int = 256
    tmpfs_mb: int = 64
    """The size of the writable, ``noexec`` scratch space at ``/tmp`` (the root file system is read-only)."""
    network: bool = False
    """False: no interface but loopback, no DNS. Untrusted code never gets a network."""
    lifetime_s: float = 3600.0
    """The sandbox is removed after this long even if deepgym dies (a provider TTL, or the reaper)."""
    labels: Mapping[str, str] = field(default_factory=dict)
    """Labels that find the sandbox again: the run id and the owner, for a leak sweep."""
    user: str = "0:0"
    """The uid:gid that processes run as unless an exec says otherwise (the runner starts as root)."""
    capabilities: tuple[str, ...] = ("SETUID", "SETGID", "KILL")
    """The only capabilities the sandbox's processes may hold; the runner drops them before untrusted code."""
    mounts: tuple[Mount, ...] = ()
    """Writable folders beyond ``/tmp`` (an episode's own workspace, the script verifier's folders)."""
    image_labels: Mapping[str, str] = field(default_factory=dict)
    """Labels ``image`` must carry where the sandbox is made, for a provider whose images are there and not
    here (:attr:`Provider.images_elsewhere`): the content hash the caller's files give. Empty when ``image`` is
    an id the caller resolved and checked itself."""
    network_later: bool = False
    """Made with no network, as without :attr:`network`, but so that :meth:`Sandbox.set_network` can attach one
    later (a script verifier's, only while it verifies): for the providers whose :attr:`Provider.late_network`."""


@dataclass(frozen=True)
class ExecOptions:
    """How to run one command."""

    timeout_s: float
    """The host's backstop: past it the command's whole process tree is killed and ``timed_out`` is True.
    Untrusted work has a shorter limit of its own inside the sandbox (the runner's)."""
    stdin: bytes = b""
    user: str | None = None
    """uid:gid, default the spec's ``user``."""
    cwd: str = "/"
    env: Mapping[str, str] = field(default_factory=dict)
    """The whole environment of the command (nothing is inherited), besides a default ``PATH``."""
    stdout_limit: int = 64 << 20
    """stdout beyond this many bytes is dropped (``ExecResult.stdout_truncated``)."""


@dataclass(frozen=True)
class ExecResult:
    """What one command did. ``exit_code`` is None when it is unknown: the command was killed at its timeout,
    or the sandbox went away under it (a provider may raise SandboxLost instead)."""

    exit_code: int | None
    stdout: bytes
    stderr_tail: str
    timed_out: bool
    elapsed_s: float
    stdout_truncated: bool = False
    node: str | None = None
    """The machine that ran it, for a provider that places each sandbox on one of several (Ray's node id)."""
    image_id: str | None = None
    """The image it ran in as that machine resolved it, for a provider whose images are there
    (:attr:`Provider.images_elsewhere`); None when the spec already named the id."""


@dataclass(frozen=True)
class File:
    """A file's bytes, mode and owner, for :meth:`Sandbox.put` and :meth:`Sandbox.get`."""

    data: bytes
    mode: int = 0o644
    uid: int = 0
    gid: int = 0


class Sandbox(ABC):
    """One live sandbox. Thread-safe for concurrent :meth:`exec` calls; a context manager that closes it."""

    id: str
    node: str | None = None
    """The machine it lives on, for a provider that places each sandbox on one of several (Ray's node id)."""
    image_id: str | None = None
    """Its image as that machine resolved it, for a provider whose images are there
    (:attr:`Provider.images_elsewhere`); None when the spec already named the id."""

    @abstractmethod
    def exec(self, argv: Sequence[str], options: ExecOptions) -> ExecResult:
        """Run ``argv`` (no shell) and wait for it under ``options.timeout_s``. Raises SandboxError only for
        an infrastructure failure; any exit status, a timeout or an output flood is in the result."""

    async def aexec(self, argv: Sequence[str], options: ExecOptions) -> ExecResult:
        """:meth:`exec` awaited without a thread of its own: a capability of the sandboxes of providers whose
        :attr:`Provider.awaits` is true (an episode's step then holds no thread, :mod:`deepgym.aio`)."""
        raise NotImplementedError(f"{type(self).__name__} cannot be awaited; call exec() in a thread")

    def stream(self, argv: Sequence[str], options: ExecOptions) -> Stream:
        """Start ``argv`` with its stdin and stdout kept open for the caller: a capability of the providers whose
        :attr:`Provider.streams` is true. ``options.timeout_s`` does not apply (the caller's reads have their
        own deadlines); ``stdin`` must be empty. Raises SandboxError."""
        raise NotImplementedError(f"{type(self).__name__} cannot keep a command's stream open")

    def set_network(self, on: bool) -> None:
        """Attach (``on``) or detach the network of a sandbox made with :attr:`SandboxSpec.network_later`: a
        capability of the providers whose :attr:`Provider.late_network` is true. Raises SandboxError."""
        raise NotImplementedError(f"{type(self).__name__} cannot attach a network to a running sandbox")

    @abstractmethod
    def put(self, path: str, file: File) -> None:
        """Write ``file`` at ``path`` (absolute; its folder exists) with its mode and owner."""

    @abstractmethod
    def get(self, path: str) -> File:
        """Read the file at ``path``. Raises FileNotFoundError when there is none."""

    @abstractmethod
    def close(self) -> None:
        """Remove the sandbox and everything in it. Idempotent; never raises (a leftover is the sweep's)."""

    def __enter__(self) -> Sandbox:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


@dataclass(frozen=True)
class Image:
    """An image as the provider knows it: its id (what a SandboxSpec should name) and its labels."""

    id: str
    labels: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Registered:
    """What registering one image did, for ``images register`` to tell the user: made it (``created``), found it
    made and usable, or made it again in place of an unusable one (``replaced`` says what was wrong with it)."""

    created: bool
    replaced: str = ""

    def __str__(self) -> str:
        if self.replaced:
            return f"registered again (the one found {self.replaced})"
        return "registered" if self.created else "already registered"


@dataclass(frozen=True)
class Resources:
    """What a registered image asks of the provider per sandbox, in the provider's coarse units."""

    cpus: int
    memory_gib: int
    disk_gib: int = 3


class EpisodeRunner:
    """How a provider's sandboxes run a shell episode (:mod:`deepgym.session.shell`): a capability every
    provider supplies (:meth:`Provider.episode_runner`), so that episodes never ask which provider they are on.
    This default is the image's: its runner, confined, with the agent and the verifier as uids of their own."""

    argv: tuple[str, ...] = IMAGE_EPISODE_RUNNER
    terminal_argv: tuple[str, ...] = IMAGE_TERMINAL
    """A persistent terminal's in-sandbox side (:mod:`deepgym.runner.episode.terminal`)."""
    own_uids = True
    """Whether commands run as the uid they are given: services (run as uids of their own) need it."""

    def user(self, uid: int) -> str | None:
        """The ``ExecOptions.user`` of a command deepgym runs as ``uid`` (0 for the runner, the agent's uid)."""
        return f"{uid}:{uid}"

    def path(self, sandbox: Sandbox, path: str) -> str:
        """``path`` inside ``sandbox`` as the sandbox's commands see it."""
        return path

    def request_fields(self, tests_dir: str, start_dir: str) -> dict[str, Any]:
        """What the episode runner's request adds, for an environment whose hidden tests and start state are in
        these host folders: nothing, when the image carries both."""
        return {}


class AttachedRun(Protocol):
    """A sandbox whose main process's stdio is a stream the caller holds (:meth:`Provider.start_attached`):
    ``sock`` carries it (Docker's multiplexed frames), ``container`` names it, and ``close()`` closes the stream
    and removes the sandbox."""

    sock: socket.socket
    container: str

    def close(self) -> None: ...


class Stream(Protocol):
    """A command of a sandbox whose stdio the caller holds (:meth:`Sandbox.stream`): ``sock`` carries it (Docker's
    multiplexed frames), and ``close()`` closes the stream, which ends the command's stdin."""

    sock: socket.socket

    def close(self) -> None: ...


class WarmRuns(Protocol):
    """A provider's warm sandboxes (:meth:`Provider.warm_pool`): each judges many samples, one at a time, each
    under uids it never had (docs/warm.md)."""

    def run(self, spec: SandboxSpec, argv: Sequence[str], request: Request, timeout_s: float) -> ExecResult:
        """Judge ``request`` in a warm sandbox of ``spec`` whose main process is ``argv`` (the runner's server),
        by ``timeout_s`` from when it has a sandbox."""


class Provider(ABC):
    """Makes sandboxes. Thread-safe; one per process and mode is enough. Optional abilities are capabilities
    the provider advertises (:attr:`attaches`, :meth:`warm_pool`, :attr:`host_image`), never its name."""

    name: ClassVar[str]
    admission_key: str | None = "host"
    """Whose slots the client takes for each sample (:mod:`deepgym.admission`): ``host`` for sandboxes that use
    this host's CPUs, a key per engine for a remote Docker engine; None for a remote provider, whose
    sandboxes use none of this host's CPUs and whose account bound its adapter holds itself
    (:mod:`deepgym.sandbox.quota`)."""
    attaches: ClassVar[bool] = False
    """Whether :meth:`start_attached` works here: a sandbox's main process with its stdio on one stream."""
    streams: ClassVar[bool] = False
    """Whether its sandboxes' :meth:`Sandbox.stream` works: a command whose stdio stays open for many requests."""
    mounts: ClassVar[bool] = False
    """Whether it makes a spec's :attr:`SandboxSpec.mounts` (an episode's own workspace, the script verifier's
    folders). Elsewhere the episode makes them itself when :attr:`writable_root`, and is refused otherwise."""
    writable_root: ClassVar[bool] = False
    """Whether root may write its sandboxes' root file system (a remote provider's VM or container), so that an
    episode can make the folders a spec's mounts would give, and prove them, before the agent acts
    (:mod:`deepgym.session.mounts`). A provider with this must refuse a spec with :attr:`SandboxSpec.mounts`."""
    late_network: ClassVar[bool] = False
    """Whether it makes :attr:`SandboxSpec.network_later` sandboxes, whose :meth:`Sandbox.set_network` works."""
    process_isolation: ClassVar[bool] = False
    """Whether a sample may ask for ``isolation="process"`` here: the provider has warm sandboxes
    (:meth:`warm_pool`), or isolates nothing either way."""
    registers_images: ClassVar[bool] = False
    """Whether sandboxes start from images registered with the provider under deepgym's content-hash names
    (``deepgym images register``): :meth:`image` is then given that name, never an image reference."""
    host_image: ClassVar[str | None] = None
    """The image a spec names when this provider runs the host's own files instead of an environment's image
    (no image is resolved then); None for a provider that starts images."""
    awaits: ClassVar[bool] = False
    """Whether :meth:`arun` and its sandboxes' :meth:`Sandbox.aexec` work here: a sample, or an episode's step, can
    be awaited on an event loop with no thread waiting for it (the async API then skips its executor,
    :mod:`deepgym.aio`)."""
    pulls: ClassVar[bool] = False
    """Whether :meth:`pull` works here: an image fetched by its digest from the registry its reference names."""
    images_elsewhere: ClassVar[bool] = False
    """Whether the images live where the sandboxes run and not where deepgym is called (Ray's nodes, each with
    an engine of its own): the caller then names an image by reference and the labels it must carry
    (:attr:`SandboxSpec.image_labels`), never by an id, and the provider resolves and checks it on the machine
    that makes the sandbox, reporting that machine's id (:attr:`ExecResult.image_id`)."""

    @abstractmethod
    def image(self, ref: str) -> Image:
        """Resolve ``ref`` (a tag or a digest reference) to the image a sandbox would start from. Raises
        ImageMissing or ProviderUnavailable."""

    @abstractmethod
    def create(self, spec: SandboxSpec) -> Sandbox:
        """A new, started sandbox. Raises ImageMissing, StartFailure or ProviderUnavailable."""

    def run(self, spec: SandboxSpec, argv: Sequence[str], options: ExecOptions) -> ExecResult:
        """``argv`` in a fresh sandbox that is removed afterwards: one-shot judging. A provider that can make
        ``argv`` the sandbox's main process (Docker's attach) overrides this when it is measurably faster;
        both ways must pass the same conformance and hostile suites."""
        with self.create(spec) as box:
            return box.exec(argv, options)

    async def arun(self, spec: SandboxSpec, argv: Sequence[str], options: ExecOptions) -> ExecResult:
        """:meth:`run` awaited without a thread of its own: a capability of the providers whose :attr:`awaits`
        is true (Ray's object refs). Elsewhere a sample's blocking calls run in the client's executor."""
        raise NotImplementedError(f"mode {self.name!r} cannot await a sandbox; call run() in a thread")

    def episode_runner(self) -> EpisodeRunner:
        """How this provider's sandboxes run a shell episode: the image's runner, unless the provider says
        otherwise."""
        return EpisodeRunner()

    def runner_argv(self, tests_dir: str) -> list[str]:
        """The runner's command line in this provider's sandboxes, for an environment whose hidden tests are in
        ``tests_dir`` on this host: the image's own runner, which has the tests baked in."""
        return list(IMAGE_RUNNER)

    def start_attached(self, spec: SandboxSpec, argv: Sequence[str], options: ExecOptions) -> AttachedRun:
        """A sandbox whose main process is ``argv`` (as ``options``' user, in its cwd, with its env), started with
        its stdio attached: a capability of the providers whose :attr:`attaches` is true. Raises StartFailure,
        ImageMissing or ProviderUnavailable (nothing is left behind then)."""
        raise NotImplementedError(f"the {self.name} provider cannot attach to a sandbox's main process")

    def pull(self, ref: str, timeout_s: float) -> Image:
        """Fetch ``ref``, a digest-pinned reference (``registry/name@sha256:...``), from its registry, within
        ``timeout_s``: a capability of the providers whose :attr:`pulls` is true. Only a digest is pulled, so
        what arrives is byte for byte what the caller resolved. Raises ImageMissing when it cannot be had."""
        raise NotImplementedError(f"the {self.name} provider cannot pull an image")

    def warm_pool(self) -> WarmRuns | None:
        """This provider's warm sandboxes, made on first use; None when it has none."""
        return None

    def admit_ahead(self, admission: Admission) -> None:  # noqa: B027 - most providers make nothing ahead of need
        """Take ``admission``'s slots (the client's, of :attr:`admission_key`) for the work this provider does ahead
        of a sample's need, such as starting strict mode's ready containers, so that it waits for the host's
        bound like a sample."""

    @abstractmethod
    def sweep(self, labels: Mapping[str, str]) -> int:
        """Remove every sandbox carrying all of ``labels``; returns how many. Raises ProviderUnavailable."""

    def close(self) -> None:  # noqa: B027 - most providers hold nothing to release
        """Release connections. Sandboxes still open are the caller's to close."""


def awaited(provider: Provider) -> bool:
    """Whether the async API awaits ``provider``'s samples and steps on its event loop, with no thread waiting:
    the provider :attr:`~Provider.awaits` and takes no admission slot of this host (its nodes take their own)."""
    return provider.awaits and provider.admission_key is None
