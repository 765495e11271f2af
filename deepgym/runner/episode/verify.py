"""The in-sandbox side of a session: prepare the agent's workspace, and verify the state the agent left.

``python3 -I -B -m deepgym_runner.episode.verify setup|verify``, as root (the container's three capabilities), with
one JSON request on stdin (:class:`SessionRequest`). Like the runner, it drops every other privilege first and
writes its facts as protocol events on its own stdout (``in_play``, one ``report``, ``done``), which no
process of the agent shares.

``setup`` makes the agent's workspace as the agent's uid and copies the variant's starting files into it
(``/opt/deepgym/start/<variant>``, world-readable: nothing hidden lives there).

``verify`` is one verification, in this order:

1. **Quiescence.** Every process of the agent's uid (and of the verifier's, which should have none) is
   stopped and killed (:meth:`Processes.kill_all`: SIGSTOP then SIGKILL through pidfds, then ``kill(-1)`` as
   the uid, which a fork bomb cannot outrun), and the kill is *proved*: /proc is scanned twice, some time
   apart, and must show no live process of either uid both times. Killing, not a change of ownership, is
   what stops a process that holds an already-open file. If it cannot be proved there is no verdict.
2. ``in_play``: from here on, what goes wrong may be the agent's doing.
3. **Probes** (``session.json``: per variant, commands such as ``python3 fix_me.py 3 4``) run the agent's code
   as the agent's uid in its workspace, each with its stdin, a wall-clock limit and bounded output, and the
   uid is killed and proved quiet again after each, so nothing a probe leaves running survives into step 4.
4. **The verifier** (``verify.py``, root-only in the image) is copied into a fresh folder of the verifier's
   uid, mode 0700, and run there as that uid by the one verifier harness (:mod:`harness`, which the desktop
   supervisor uses too) with ``verify(workspace, variant, probes)`` as its call. It reads the agent's
   files as data and never runs them; its one JSON line is the report (:func:`harness.verifier_report`). The folder is
   removed afterwards, so every verification starts from nothing the last one (or the agent) left.

Attribution inside: a verifier that fails before it prints ``reading`` (it could not start or import) is
ours, ``verifier_error``; one that crashes or times out after reading the agent's state is charged to that
state (``solution_error``, ``solution_timeout``, score 0), as the session's failure table says.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
from dataclasses import dataclass
from typing import Any

from ..confine.container import Container
from ..confine.local import Local
from ..confine.processes import Processes
from ..confine.procfs import process_uid
from ..protocol import IN_PLAY, MIN_UID
from . import entrypoint, script, services
from .harness import no_room, quiesce, release, run, run_verifier, serve_command, verifier_folder, verifier_report

ENV_DIR = "/opt/deepgym/env"
START_DIR = "/opt/deepgym/start"
SCRATCH_ROOT = "/tmp"
PROBE_OUTPUT_BYTES = 64 << 10
# The health check's slack beyond its services' own limits: starting python as the verifier's uid.
HEALTH_GRACE_S = 10.0


@dataclass(frozen=True)
class SessionRequest:
    """One setup or verification. The uids must differ, and be unprivileged."""

    nonce: str
    agent_uid: int
    verifier_uid: int
    workspace: str
    variant: int = 0
    verify_timeout_s: float = 60.0
    probe_timeout_s: float = 10.0
    services: tuple[dict[str, Any], ...] = ()
    """The manifest's services (:meth:`deepgym.environments.ServiceSpec.to_request`), in its order."""
    unconfined: bool = False
    """The host-side ``local`` mode: no uids, no privileges, the environment's files where the host has them
    (``env_dir``, ``start_dir``), and nothing proved about what the agent left running. Unsafe by design."""
    env_dir: str = ENV_DIR
    start_dir: str = START_DIR
    stage: str = ""
    """A script verifier's part when the host attaches its network in between (:func:`script.verify`); empty:
    the whole verification at once."""
    ran: dict[str, Any] | None = None
    """The ``reward`` stage's input: what the ``run`` stage reported of the command's run."""

    @property
    def scratch(self) -> str:
        """The folder the workspace and the verifier's folder live in."""
        return os.path.dirname(self.workspace) if self.unconfined else SCRATCH_ROOT

    def problem(self) -> str | None:
        if self.unconfined:
            if not os.path.isabs(self.workspace) or self.services:
                return "an unconfined session needs an absolute workspace and has no services"
            return None
        uids = (self.agent_uid, self.verifier_uid)
        if any(isinstance(uid, bool) or not isinstance(uid, int) or uid < MIN_UID for uid in uids):
            return f"the session's uids {uids} must be integers of at least {MIN_UID}"
        if self.agent_uid == self.verifier_uid:
            return "the agent and the verifier must be different users"
        if not os.path.isabs(self.workspace) or os.path.normpath(self.workspace) != self.workspace \
                or self.workspace in ("/", SCRATCH_ROOT) or self.workspace.startswith(ENV_DIR.rsplit("/", 1)[0]):
            return f"the workspace {self.workspace!r} is not a folder under {SCRATCH_ROOT} or a mount of its own"
        if set(uids) & {services.service_uid(index) for index in range(len(self.services))}:
            return f"the session's uids {uids} collide with its services' uids"
        return None


def setup(request: SessionRequest, confinement: Container | Local) -> dict[str, Any]:
    """The agent's workspace, with the variant's starting files, owned by the agent."""
    start = os.path.join(request.start_dir, str(request.variant))
    if not os.path.isdir(start):
        return {"ok": False, "error_type": "verifier_error", "details": f"the image has no {start}"}
    problem = _workspace(request, confinement)
    if problem is None and confinement.as_user(request.agent_uid, lambda: _copy(start, request.workspace),
                                               timeout_s=60) != 0:
        problem = f"the starting files {start} could not be copied into {request.workspace}"
    if problem is None and request.services:
        problem = services.start_supervisor(list(request.services), request.workspace)
    if problem is None and not request.unconfined:
        processes = Processes(confinement, uid=request.agent_uid, applier_uid=request.verifier_uid)
        problem = entrypoint.start(processes, _config(request).get("script", {}), uid=request.agent_uid,
                                   cwd=request.workspace, home=request.workspace)
    if problem is not None:
        return {"ok": False, "error_type": "verifier_error", "details": problem}
    return {"ok": True}


def _workspace(request: SessionRequest, confinement: Container | Local) -> str | None:
    """Make the agent's workspace under the scratch folder, or check the one the sandbox mounted for it
    (``session.workspace`` elsewhere: a tmpfs of the agent's, empty); why it cannot be used, or None."""
    if os.path.dirname(request.workspace) == request.scratch:
        return confinement.make_dir(request.agent_uid, request.workspace, 0o755)
    info = os.lstat(request.workspace) if os.path.lexists(request.workspace) else None
    if info is None or not os.path.isdir(request.workspace) or os.path.islink(request.workspace) \
            or info.st_uid != request.agent_uid or os.listdir(request.workspace):
        return f"{request.workspace} is not an empty folder of the agent's: the sandbox did not mount the workspace"
    return None


def _config(request: SessionRequest) -> dict[str, Any]:
    """The environment's session.json: its probes, or its script verifier."""
    with open(os.path.join(request.env_dir, "session.json"), "rb") as f:
        return json.loads(f.read())


def _copy(source: str, target: str) -> int:
    os.umask(0o022)
    shutil.copytree(source, target, symlinks=True, dirs_exist_ok=True)
    return 0


def verify(request: SessionRequest, confinement: Container | Local, emit) -> dict[str, Any]:
    """One verification (see the module's docstring); returns the report."""
    processes = Processes(confinement, uid=request.agent_uid, applier_uid=request.verifier_uid)
    processes.homes = {request.agent_uid: request.workspace}
    problem = quiesce(processes)
    if problem is not None:
        return {"error_type": "verifier_error", "details": problem}
    config = _config(request)
    with open(os.path.join(request.env_dir, "verify.py"), "rb") as f:
        verifier = f.read()
    emit(IN_PLAY)
    if "script" in config:
        if request.unconfined:
            return {"error_type": "verifier_error", "details": "a script verifier needs a sandbox's uids"}
        return script.verify(request, processes, config["script"], _scratch_dirs(request))
    found = None
    if request.services:
        found = check_services(processes, request)
        if "error_type" in found:
            return found
    probes = {}
    for probe in config.get("probes", {}).get(str(request.variant), []):
        probes[probe["id"]] = run(processes, list(probe["argv"]), uid=request.agent_uid, cwd=request.workspace,
                                   stdin=probe.get("stdin", "").encode(), keep=PROBE_OUTPUT_BYTES,
                                   timeout_s=float(probe.get("timeout_s", request.probe_timeout_s)))
        problem = quiesce(processes)
        if problem is not None:
            return {"error_type": "verifier_error", "details": problem}
    folder, refused = verifier_folder(processes, request.verifier_uid, request.scratch, request.nonce)
    if refused is not None:
        return refused
    try:
        given = {"workspace": request.workspace, "variant": request.variant, "probes": probes,
                 **({} if found is None else {"services": found})}
        ran = run_verifier(processes, folder, verifier, given, ("workspace", "variant", "probes"),
                           uid=request.verifier_uid, timeout_s=request.verify_timeout_s)
        if ran is None:
            return no_room("the verifier and its request could not be written to its folder", request.scratch)
    finally:
        release(processes, request.verifier_uid, folder)
    return _with_services(verifier_report(ran, request.verify_timeout_s), found)


def _scratch_dirs(request: SessionRequest) -> list[str]:
    """Every folder the agent could write: its workspace, the scratch file system, the script verifier's
    ``/solution``."""
    return list(dict.fromkeys([request.workspace, request.scratch, script.SOLUTION_DIR]))


def check_services(processes: Processes, request: SessionRequest) -> dict[str, Any]:
    """Stop the supervisor, check every service, then kill them all and prove it (deepgym/runner/episode/services.py).

    Returns what was found, ``{name: {"running", "state", "status", "body", "error", "log"}}``, or a report:
    no verdict when our side failed, a scored 0 (``service_failed``) when a service was not running or did not
    answer its health check with HTTP 200."""
    problem = services.stop_supervisor()
    if problem is not None:
        return {"error_type": "verifier_error", "details": problem}
    declared = list(request.services)
    uids = {services.service_uid(index): service["name"] for index, service in enumerate(declared)}
    box = Processes(Container(), uid=min(uids), applier_uid=max(uids))
    box.uids = set(uids)
    alive = {uids[uid] for uid in (process_uid(pid) for pid in box.alive()) if uid in uids}
    limit = sum(float(service["check_timeout_s"]) for service in declared) + HEALTH_GRACE_S
    try:
        ran = run(processes, [sys.executable, "-I", "-B", "-m", services.__name__, "health",
                             json.dumps(declared)], uid=request.verifier_uid, cwd="/", stdin=b"", timeout_s=limit,
                   keep=PROBE_OUTPUT_BYTES)
    except OSError as exc:
        ran = {"spawn_error": str(exc)}
    finally:
        problem = quiesce(box) or quiesce(processes)
    if problem is not None:
        return {"error_type": "verifier_error", "details": problem}
    if "spawn_error" in ran:
        # Only the services were alive (the agent's uid was killed, the supervisor stopped): they held it all.
        return {"score": 0.0, "passed": False, "error_type": "policy_sandbox_failure",
                "details": f"the services left no room to check them: {ran['spawn_error']}"}
    lines = ran["stdout"].splitlines()
    checking = services.CHECKING in lines
    if ran["timed_out"]:
        if not checking:
            return {"error_type": "verifier_timeout", "details": f"the health check did not start within {limit:g}s"}
        return {"score": 0.0, "passed": False, "error_type": "service_failed",
                "details": f"the services' health check ran past {limit:g}s"}
    try:
        answers = json.loads(lines[-1]) if checking and ran["exit_code"] == 0 else None
    except ValueError:
        answers = None
    if not isinstance(answers, dict):
        return {"error_type": "verifier_error", "details": f"the health check failed: {ran['stderr'][-1500:]}"}
    found = {}
    for service in declared:
        name = service["name"]
        answer = answers.get(name) or {"status": None, "body": "", "error": "not checked"}
        found[name] = {"running": name in alive, "state": services.service_state(name), **answer,
                       "log": services.log_tail(name)}
    failed = [name for name, facts in found.items() if not _healthy(facts)]
    if failed:
        report = {"score": 0.0, "passed": False, "error_type": "service_failed",
                  "details": "; ".join(_service_said(declared, found, name) for name in failed)}
        return _with_services(report, found)
    return found


def _healthy(facts: dict[str, Any]) -> bool:
    return bool(facts["running"]) and facts.get("status") == 200


def _service_said(declared: list[dict[str, Any]], found: dict[str, Any], name: str) -> str:
    facts = found[name]
    path = next(service["health_path"] for service in declared if service["name"] == name)
    if not facts["running"]:
        state = facts["state"]
        how = state.get("state", "unknown") + (f", status {state['exit_code']}" if "exit_code" in state else "") + (
            f": {state['error']}" if "error" in state else "")
        return f"service {name} was not running at grading ({how}); its log ends: {facts['log'][-300:]!r}"
    said = f"HTTP {facts['status']}" if facts["status"] is not None else facts["error"]
    return f"service {name} is running but GET {path} answered {said}: {facts['body'][:300]!r}"


def _with_services(report: dict[str, Any], found: dict[str, Any] | None) -> dict[str, Any]:
    """The report with one case per service: what its health check found."""
    if found is None or "score" not in report:
        return report
    cases = [{"id": f"service:{name}", "passed": _healthy(facts), "expected": "running, HTTP 200",
              "actual": ("running" if facts["running"] else "not running") + ", " +
                        (f"HTTP {facts['status']}" if facts.get("status") is not None else str(facts.get("error")))}
             for name, facts in found.items()]
    return {**report, "cases": cases + list(report.get("cases", []))}


def _act(request: SessionRequest, command: str, emit) -> dict[str, Any]:
    confinement = Local() if request.unconfined else Container()
    problem = request.problem() or confinement.drop_privileges()
    if problem is not None:
        return {"error_type": "verifier_error", "details": problem}
    return setup(request, confinement) if command == "setup" else verify(request, confinement, emit)


def main(argv: list[str] | None = None) -> int:
    return serve_command("deepgym_runner.episode.verify", sys.argv[1:] if argv is None else argv,
                         lambda raw: SessionRequest(**json.loads(raw)), lambda request: request.nonce, _act)


if __name__ == "__main__":
    sys.exit(main())
