"""Shell episodes: one fresh container per episode, shell actions as an unprivileged agent, and a final verifier
that reads the state the agent left.

::

    with gym.session("shell_repair_script", variant=1) as session:
        first = session.start()                       # Observation: the task and the workspace
        step = session.step("cat calc.py")            # StepResult(observation, reward, done)
        ...
        verdict = session.score()                     # a Verdict, or raises NoVerdictError

**Who runs what.** The container is the environment's own image, locked down like a judging sandbox, and
lives only for the episode: :meth:`Session.close` removes it on every outcome, and its init ends it at its
lifetime even if this process dies (the provider's reaper removes what a dead owner left). Each action is a
fresh ``bash -c`` run as the agent's uid (:data:`AGENT_UID`, no capabilities) in its workspace; the final
verification runs as root with three capabilities (:mod:`deepgym.runner.episode.verify`), kills every process of the
agent and proves none is left, runs the environment's probes of the agent's code as the agent, then the hidden
verifier as another uid (:data:`VERIFIER_UID`) in a fresh folder the agent never could reach. How a provider
runs all this is its :class:`~deepgym.sandbox.base.EpisodeRunner`.

**Budgets** (the manifest's ``session:``, :class:`~deepgym.environments.SessionLimits`): a timed-out action
returns its partial output and ``[timed out after N s]`` and the episode goes on; after ``max_steps`` actions,
or ``episode_s`` after the first observation (the model's own thinking time included), the episode is done.
deepgym enforces them, because verl's loop has no timeout anywhere. Admission: :mod:`deepgym.session.episode`.

**Services** an environment declares (a server the task asks for) are started by a trusted supervisor at
the agent's request, survive the kill of the agent's processes, and are checked at grading
(:mod:`deepgym.runner.episode.services`). **Local mode** (``DeepGym(mode="local", allow_local=True)``) runs an
episode on the host with none of this isolation, for developing an environment only (docs/sessions.md).
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import posixpath
import secrets
import time
from typing import Any, Callable

from ..environments import Environment
from ..runner.episode.script import LOGS_DIR, SOLUTION_DIR, TESTS_DIR
from ..runner.protocol import IN_PLAY, REPORT, parse_events
from ..sandbox import ExecOptions, ExecResult, Mount, Sandbox, SandboxLost
from ..session_limits import SessionLimits
from .episode import HOST_GRACE_S, Context, Episode
from .mounts import make_folders, makes_folders
from .results import Observation, Reply, Verification
from .rules import cut_output, invalid_action, not_started

AGENT_UID = 10000
VERIFIER_UID = 10002
# What the agent's commands may hold beyond the manifest's limits: the session runner and the file helper.
RUNNER_MEMORY_MB = 128
RUNNER_PIDS = 16
# A probe's wall-clock limit when session.json gives none (deepgym.runner.episode.verify's default too).
PROBE_TIMEOUT_S = 10.0
# Stopping a session's service supervisor (up to twice deepgym.runner.episode.services.STOP_WAIT_S) and starting its
# health check (deepgym.runner.episode.verify.HEALTH_GRACE_S).
SERVICE_STOP_S = 20.0
ACTION_STDOUT_BYTES = 1 << 20
TIMED_OUT = "[timed out after {seconds:g} s]"
# The limit of each of a networked verification's calls around test.sh's: the agent's kill and the tampering
# scan before it, the reward's read after it (ShellActions.verify_online).
STAGE_S = 2 * HOST_GRACE_S
START_ATTEMPTS = 3
START_RETRY_S = 0.2


class ShellActions:
    """Shell commands as the agent, and the in-sandbox session runner that prepares and verifies."""

    def __init__(self, context: Context):
        self.runner = context.provider.episode_runner()
        self.cwd = ""
        """The agent's working directory inside the sandbox (``session.workspace``), once open."""
        self.workspace = ""
        """The agent's working directory as its commands see it (the host's path in local mode), once open."""
        self.agent_env: dict[str, str] = {}
        """The task's own variables for every action (session.json's ``script.agent_env``: an imported task's
        ``[environment].env``)."""

    def refusal(self, episode: Episode) -> str | None:
        env = episode.env
        if env.session is None:
            return f"{env.id} is a {env.kind} environment, not a session one; use DeepGym.run for it"
        if not self.runner.own_uids and env.services:
            return (f"{env.id} has services, which need a sandbox's uids; mode={episode.context.runtime!r} has "
                    f"none. Use mode='docker'")
        if verifier_network(env) and not episode.context.provider.late_network:
            return (f"{env.id}'s verifier asks for a network (task.toml's verifier.network_mode = \"public\"), "
                    f"which mode={episode.context.runtime!r} cannot attach to a running sandbox; judged offline, "
                    f"its test.sh could score the agent 0 for the missing network. Use mode='docker', or set "
                    f"[verifier] network_mode = \"no-network\" in task.toml and import it again if test.sh works "
                    f"offline")
        if episode_mounts(env.session) and not makes_folders(episode.context.provider):
            return (f"{env.id} needs folders of its own in its sandbox (session.workspace {env.session.workspace}, "
                    f"verifier {env.session.verifier}); mode={episode.context.runtime!r} cannot make them. "
                    f"Use mode='docker', or a provider whose sandboxes have a writable root (daytona, e2b, modal, "
                    f"apple)")
        return None

    def open(self, episode: Episode, keep: Callable[[Any], None]) -> Observation | str:
        """Create the episode's container and the agent's workspace."""
        context, env = episode.context, episode.env
        image = context.provider.host_image
        if image is None:  # a provider on the host's own files (docs/sessions.md) resolves no image
            episode.image_id, episode.image_status = context.images.resolve(context.provider, env)
            image = episode.image_id
        mounts = episode_mounts(env.session)
        # A provider that makes no mounts has a writable root (refusal): the folders are made in it before anything.
        spec = episode.sandbox_spec(image, memory_mb=RUNNER_MEMORY_MB, pids=RUNNER_PIDS,
                                    mounts=mounts if context.provider.mounts else ())
        sandbox = context.provider.create(dataclasses.replace(spec, network_later=verifier_network(env)))
        keep(sandbox)
        if mounts and not context.provider.mounts:
            problem = make_folders(sandbox, mounts, (AGENT_UID, VERIFIER_UID))
            if problem is not None:
                return f"the episode's folders could not be made: {problem}"
        self.cwd = env.session.workspace
        self.workspace = self.runner.path(sandbox, self.cwd)
        self.agent_env = dict(script_config(env).get("agent_env", {}))
        report, _, timed_out = self.session_runner(episode, sandbox, "setup", timeout_s=HOST_GRACE_S + 30)
        if report is None or not report.get("ok"):
            said = "the session runner gave no report" if timed_out else "the session runner gave no single report"
            return f"the workspace could not be prepared: {(report or {}).get('details', said)}"
        task = env.path / "start" / str(episode.variant) / "TASK.md"
        text = env.prompt.rstrip() + (f"\n\n{task.read_text().rstrip()}" if task.is_file() else "")
        return Observation(f"{text}\n\nYour working directory is {self.workspace}.")

    def parse(self, episode: Episode, action: Any) -> tuple[Any, str | None]:
        return action, invalid_action(action)

    def exchange(self, sandbox: Sandbox, parsed: str, timeout_s: float) -> ExecResult:
        """Run the shell command as the agent; stdout and stderr together."""
        argv, options = self.action(parsed, timeout_s)
        for attempt in range(START_ATTEMPTS):
            # A command the engine could not start ran nothing, so trying again replays nothing: a busy
            # engine's hiccup is not the agent's fault. A sandbox whose pids the agent took fails every try.
            result = sandbox.exec(argv, options)
            if not not_started(result) or attempt == START_ATTEMPTS - 1:
                break
            time.sleep(START_RETRY_S)
        return started_action(result)

    async def aexchange(self, sandbox: Sandbox, parsed: str, timeout_s: float) -> ExecResult:
        """:meth:`exchange` awaited on the sandbox (a provider that awaits, Ray): the step holds no thread."""
        argv, options = self.action(parsed, timeout_s)
        for attempt in range(START_ATTEMPTS):
            result = await sandbox.aexec(argv, options)
            if not not_started(result) or attempt == START_ATTEMPTS - 1:
                break
            await asyncio.sleep(START_RETRY_S)
        return started_action(result)

    def action(self, command: str, timeout_s: float) -> tuple[list[str], ExecOptions]:
        """The agent's shell command as the sandbox runs it: as the agent, in the workspace, output merged."""
        options = ExecOptions(timeout_s=timeout_s, user=self.runner.user(AGENT_UID), cwd=self.cwd,
                              env={"TERM": "dumb", "LANG": "C.UTF-8", "PATH": "/usr/local/bin:/usr/bin:/bin",
                                   **self.agent_env, "HOME": self.workspace, "TMPDIR": self.workspace},
                              stdout_limit=ACTION_STDOUT_BYTES)
        return ["bash", "-c", "exec 2>&1\n" + command], options

    def observe(self, episode: Episode, parsed: str, reply: ExecResult, timeout_s: float, took_s: float) -> Reply:
        text = reply.stdout.decode("utf-8", "replace")
        if reply.stdout_truncated:
            text += "\n[output beyond 1 MiB dropped]"
        if reply.timed_out:
            text += ("\n" if text and not text.endswith("\n") else "") + TIMED_OUT.format(seconds=round(timeout_s, 1))
        elif reply.exit_code:
            text += f"\n[exit status {reply.exit_code}]"
        return Reply(Observation(cut_output(text, episode.limits.output_chars)))

    def verify(self, episode: Episode, sandbox: Sandbox) -> Verification:
        if verifier_network(episode.env):
            return self.verify_online(episode, sandbox)
        report, in_play, timed_out = self.session_runner(episode, sandbox, "verify",
                                                          timeout_s=self.verify_deadline_s(episode))
        return Verification(report, deadline_hit=timed_out, in_play=in_play,
                            said="" if timed_out else "the session runner gave no single report")

    def verify_online(self, episode: Episode, sandbox: Sandbox) -> Verification:
        """A script verifier with a network, in the runner's three stages (:func:`deepgym.runner.episode.script.verify`):
        the agent killed and proved gone, the tampering check and the tests copied in, all offline; then the
        network attached for test.sh alone and detached once every process of the verifier is gone; then the
        reward read. A stage that ends the verification early (tampering, a failure) gives its report."""
        report, in_play, timed_out = self.session_runner(episode, sandbox, "verify", timeout_s=STAGE_S,
                                                          stage="prepare")
        if report is not None and report.get("prepared") is True:
            sandbox.set_network(True)
            try:
                report, in_play, timed_out = self.session_runner(episode, sandbox, "verify", stage="run",
                                                                  timeout_s=self.verify_deadline_s(episode)
                                                                  - 2 * STAGE_S)
            finally:
                sandbox.set_network(False)
            if report is not None and isinstance(report.get("ran"), dict):
                report, in_play, timed_out = self.session_runner(episode, sandbox, "verify", timeout_s=STAGE_S,
                                                                  stage="reward", ran=report["ran"])
        return Verification(report, deadline_hit=timed_out, in_play=in_play,
                            said="" if timed_out else "the session runner gave no single report")

    def verify_deadline_s(self, episode: Episode) -> float:
        """The verifier's limit, every probe's, and slack. The probes run the agent's code, so each may take its
        whole limit; the deadline never cuts them short."""
        env = episode.env
        config = session_config(env)  # one read for the probes and the script's health (only a script has one)
        probes = config.get("probes", {}).get(str(episode.variant), [])
        services = sum(service.check_timeout_s for service in env.services) + (SERVICE_STOP_S if env.services else 0.0)
        services += float(config.get("script", {}).get("health_s", 0.0))  # an imported image's entrypoint
        staged = 2 * STAGE_S if verifier_network(env) else 0.0  # verify_online's two more calls
        return (env.session.verify_timeout_s + sum(float(p.get("timeout_s", PROBE_TIMEOUT_S)) for p in probes)
                + services + HOST_GRACE_S + staged)

    def runner_argv(self) -> tuple[str, ...]:
        """The in-sandbox session runner's command line (``setup`` or ``verify`` follows it)."""
        return self.runner.argv

    def runner_request(self, episode: Episode, nonce: str) -> dict[str, Any]:
        """The session runner's request (:class:`deepgym.runner.episode.verify.SessionRequest`)."""
        env = episode.env
        return {"nonce": nonce, "agent_uid": AGENT_UID, "verifier_uid": VERIFIER_UID, "workspace": self.workspace,
                "variant": episode.variant, "verify_timeout_s": episode.limits.verify_timeout_s,
                "probe_timeout_s": PROBE_TIMEOUT_S, "services": [service.to_request() for service in env.services],
                **self.runner.request_fields(str(env.tests_dir), str(env.path / "start"))}

    def session_runner(self, episode: Episode, sandbox: Sandbox, command: str, *, timeout_s: float,
                       **fields: Any) -> tuple[dict[str, Any] | None, bool, bool]:
        """Run the in-sandbox session runner, with ``fields`` added to its request: (its one report or None,
        whether it said ``in_play``, whether the host's deadline killed it). Raises SandboxError when the sandbox
        had no room to run it."""
        nonce = secrets.token_hex(16)
        options = ExecOptions(stdin=json.dumps({**self.runner_request(episode, nonce), **fields}).encode(),
                              timeout_s=timeout_s, user=self.runner.user(0))
        result = sandbox.exec([*self.runner_argv(), command], options)
        if result.exit_code is None and not result.timed_out:
            raise SandboxLost("the session runner vanished without an exit status")
        events = parse_events(result.stdout, nonce)
        reports = [e.get("report") for e in events if e.get("event") == REPORT]
        in_play = any(e.get("event") == IN_PLAY for e in events)
        if len(reports) == 1 and isinstance(reports[0], dict):
            return reports[0], in_play, False
        if not result.timed_out and (result.exit_code not in (0, None) or not_started(result)):
            # The exec could not start the runner at all: the sandbox has no room for a process.
            raise SandboxLost(f"the session runner could not run (exit status {result.exit_code}): "
                              f"{result.stderr_tail.strip()[-300:]}")
        return None, in_play, result.timed_out


def started_action(result: ExecResult) -> ExecResult:
    """An action's result, once it started; a command the sandbox could not start at all is its failure."""
    if not_started(result):
        said = result.stdout[:300].decode(errors="replace")
        raise SandboxLost(f"the action could not start in the sandbox: {said}")
    return result


def session_config(env: Environment) -> dict[str, Any]:
    """The environment's tests/session.json, as the in-sandbox session runner reads it too: its probes per
    variant, or its script verifier (``script``)."""
    return json.loads((env.tests_dir / "session.json").read_text())


def script_config(env: Environment) -> dict[str, Any]:
    """session.json's ``script`` mapping, which only an environment with a script verifier (an imported Harbor
    task) has: the verifier's network and the agent's environment variables; empty for every other one."""
    if env.session is None or env.session.verifier != "script":
        return {}
    return session_config(env).get("script", {})


def verifier_network(env: Environment) -> bool:
    """Whether the environment's script verifier asks for a network while it verifies (``script.network``: an
    imported task's ``verifier.network_mode = "public"``)."""
    return bool(script_config(env).get("network", False))


def episode_mounts(limits: SessionLimits) -> tuple[Mount, ...]:
    """The writable folders an episode needs beyond ``/tmp``: a workspace of its own (the agent's, where programs
    may run), and for a script verifier ``/solution`` (the agent's: a reference unpacks there), ``/logs`` (the
    verifier's, so the agent can never write a reward file) and ``/tests`` (root's, empty until the
    verification copies the tests in once the agent is gone)."""
    mounts = []
    if posixpath.dirname(limits.workspace) != "/tmp":
        mounts.append(Mount(limits.workspace, AGENT_UID, exec=True))
    if limits.verifier == "script":
        mounts += [Mount(SOLUTION_DIR, AGENT_UID, exec=True), Mount(LOGS_DIR, VERIFIER_UID),
                   Mount(TESTS_DIR, 0, exec=True)]
    return tuple(mounts)


class Session(Episode):
    """One episode of a ``session`` environment in its own container: an :class:`Episode` acted on with shell
    commands, each a fresh ``bash -c`` (:class:`ShellActions`); a subclass acts through another
    :attr:`actions_class` (:class:`~deepgym.session.terminal.TerminalSession`: a persistent terminal)."""

    actions_class: type[ShellActions] = ShellActions

    def __init__(self, context: Context, env: str | Environment, variant: int = 0):
        super().__init__(context, env, variant, self.actions_class(context))

    @property
    def workspace(self) -> str:
        """The agent's working directory as its commands see it: the host's path in local mode."""
        return self.actions.workspace
