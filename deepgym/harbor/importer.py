"""One Harbor task directory to one deepgym session environment folder (``deepgym harbor import``).

The folder it writes, ``DIR/<name>/`` (``name``: the task directory's name made a valid environment id)::

    manifest.yaml        kind: session; budgets from task.toml's timeouts, limits from its resources; a persistent
                         terminal, the task's working directory as the workspace, the script verifier
    prompt.md            instruction.md (leading canary lines dropped, as Harbor does)
    Dockerfile           the task's Dockerfile (bases mapped), then deepgym's runner (deepgym.harbor.dockerfile)
    environment/         the task's build context, as it was
    tests/verify.py      unused (the session runner requires the file; see _VERIFY)
    tests/session.json   no probes; "script": test.sh's command and env for the script verifier
    tests/harbor/        the task's tests/ (test.sh and what it needs), root-only in the image
    start/0/             empty: the image copies the task's working directory in as the starting workspace
    solutions/           reference.json (replays solution/solve.sh), two generic wrong_* sequences
    solution/            the task's solution/, outside the image
    task.toml            the task's, as it was
    harbor.json          the import record: source, bases, network, env, timeouts, warnings

Why a copy and not a pointer: the content hash covers the environment's folder, so the image is current
exactly when the folder is; a pointer into a task checkout could change under a built image unnoticed.
"""

from __future__ import annotations

import base64
import contextlib
import gzip
import io
import json
import re
import shutil
import tarfile
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from ..errors import ConfigurationError
from ..runner.episode.script import SOLUTION_DIR, TESTS_DIR
from ..session_limits import DEFAULT_WORKSPACE, TERMINALS, workspace_problem
from .bases import RECORD
from .dockerfile import DockerfileFacts, environment_dockerfile, image_dockerfile
from .schema import HarborTask, read_task_toml

COMPOSE_FILES = ("docker-compose.yaml", "docker-compose.yml", "compose.yaml", "compose.yml")
_CANARY = re.compile(r"^(<!--.*canary.*-->|#.*canary.*)$", re.IGNORECASE)
# deepgym's defaults where task.toml says nothing: Harbor's verifier default, and a budget of steps generous
# for a terminal agent (Harbor counts none; deepgym's max_steps must be finite).
DEFAULT_EPISODE_S = 600.0
MAX_STEPS = 200
STEP_TIMEOUT_S = 180.0
# One reference action carries at most this much of the solution (an action is at most 64 KiB).
CHUNK_CHARS = 48_000
SOLUTION_B64 = "/tmp/.deepgym-solution.b64"
# The longest wait for an entrypoint's services to pass their health check (deepgym.runner.episode.entrypoint).
HEALTH_S = 30.0
# Harbor's verifier command; the script verifier copies tests/ to TESTS_DIR first.
VERIFIER_COMMAND = ["bash", f"{TESTS_DIR}/test.sh"]
_VERIFY = '''"""Unused: an environment imported from Harbor is judged by its tests/test.sh, which deepgym's script
verifier runs as the verifier's uid once every process of the agent is gone (session.json's "script",
deepgym/runner/episode/script.py, docs/harbor.md). The session runner never loads this file for it."""
'''


@dataclass
class Imported:
    """What one import wrote: the environment's id and folder, and the warnings to show."""

    name: str
    path: Path
    warnings: list[str] = field(default_factory=list)


def environment_name(task_dir: Path) -> str:
    """The environment id for a task directory: its name lowercased, every run of other characters as ``_``,
    prefixed ``harbor_`` when it would not start with a letter or would be too short (``fix-git`` ->
    ``fix_git``, ``2048-game`` -> ``harbor_2048_game``)."""
    name = re.sub(r"[^a-z0-9]+", "_", task_dir.resolve().name.lower()).strip("_")
    if not re.match(r"^[a-z][a-z0-9_]{1,63}$", name):
        name = f"harbor_{name}".rstrip("_")
    return name[:64].rstrip("_")


def strip_canary(text: str) -> str:
    """``text`` without its leading canary comment lines and the blank lines after them (Harbor shows the
    agent the same: canaries mark benchmark files against training-data contamination)."""
    lines = text.split("\n")
    index = 0
    while index < len(lines) and _CANARY.match(lines[index].strip()):
        index += 1
    while index < len(lines) and not lines[index].strip():
        index += 1
    return "\n".join(lines[index:])


def _fail(task_dir: Path, problem: str, fix: str) -> ConfigurationError:
    return ConfigurationError(f"{task_dir}: {problem}. Fix: {fix}")


def _check_tree(task_dir: Path, folder: Path) -> None:
    """Refuse a symlink that leaves the task directory: copying it would bake a file of this host into the
    image (Harbor refuses the same)."""
    root = task_dir.resolve()
    for path in folder.rglob("*"):
        if path.is_symlink() and not path.resolve().is_relative_to(root):
            raise _fail(task_dir, f"{path.relative_to(task_dir)} is a symlink to {path.resolve()}, outside the "
                        "task", "replace it with the file itself")


def _check_layout(task_dir: Path, task: HarborTask) -> Path | None:
    """The task's Dockerfile (None when it starts from docker_image alone), after checking the layout."""
    if not task_dir.is_dir() or not (task_dir / "task.toml").is_file():
        raise _fail(task_dir, "is not a Harbor task directory (no task.toml)", "give the folder that holds "
                    "task.toml, instruction.md, environment/, tests/ and solution/")
    for required in ("instruction.md", "tests/test.sh", "solution/solve.sh"):
        if not (task_dir / required).is_file():
            raise _fail(task_dir, f"{required} is missing", f"add {required} (deepgym needs "
                        f"{'the reference solution' if required.startswith('solution') else 'it'})")
    environment = task_dir / "environment"
    for compose in COMPOSE_FILES:
        if (environment / compose).is_file():
            raise _fail(task_dir, f"environment/{compose}: multi-container (compose) tasks are not supported yet",
                        "fold what the task needs into environment/Dockerfile and remove the compose file")
    dockerfile = environment / "Dockerfile"
    if task.docker_image is None and not dockerfile.is_file():
        raise _fail(task_dir, "environment/Dockerfile is missing and task.toml sets no environment.docker_image",
                    "add environment/Dockerfile")
    if task.docker_image is not None and dockerfile.is_file():
        task.warn("environment.docker_image", "set beside environment/Dockerfile: Harbor starts from the image "
                  "unless --force-build, and so does deepgym; the Dockerfile is ignored")
    for folder in ("environment", "tests", "solution"):
        if (task_dir / folder).is_dir():
            _check_tree(task_dir, task_dir / folder)
    return None if task.docker_image is not None else dockerfile


def reference_actions(solution_dir: Path, env: dict[str, str]) -> list[str]:
    """Shell actions that replay ``solution/`` as Harbor's oracle does (``bash solve.sh``): the folder as a
    compressed tar in base64 chunks, each appended by one action, then one that unpacks it and runs solve.sh
    with solution.env exported, in the agent's working directory."""
    buffer = io.BytesIO()
    # Deterministic bytes (no timestamps, owners or walk order): the same solution imports to the same
    # reference.json, so importing again leaves the content hash, and so the built image, current.
    with gzip.GzipFile(fileobj=buffer, mode="wb", mtime=0) as packed, \
            tarfile.open(fileobj=packed, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for path in [solution_dir, *sorted(solution_dir.rglob("*"))]:
            info = tar.gettarinfo(str(path), arcname=str(Path(".") / path.relative_to(solution_dir)))
            info.mtime, info.uid, info.gid, info.uname, info.gname = 0, 0, 0, "", ""
            info.mode = 0o755 if path.is_dir() or info.mode & 0o111 else 0o644
            if info.isreg():
                with path.open("rb") as handle:
                    tar.addfile(info, handle)
            else:
                tar.addfile(info)
    encoded = base64.b64encode(buffer.getvalue()).decode()
    chunks = [encoded[i:i + CHUNK_CHARS] for i in range(0, len(encoded), CHUNK_CHARS)] or [""]
    if len(chunks) >= MAX_STEPS:
        raise ConfigurationError(f"{solution_dir}: the solution is {len(buffer.getvalue())} bytes compressed, more "
                                 f"than {MAX_STEPS - 1} actions can carry. Fix: keep large files out of solution/")
    actions = [f"printf %s '{chunk}' {'>' if n == 0 else '>>'} {SOLUTION_B64}" for n, chunk in enumerate(chunks)]
    exports = "".join(f"export {key}={_quote(value)}\n" for key, value in sorted(env.items()))
    unpack = (f"python3 -c 'import base64, io, tarfile; tarfile.open(fileobj=io.BytesIO(base64.b64decode("
              f"open(\"{SOLUTION_B64}\").read()))).extractall(\"{SOLUTION_DIR}\")'")
    actions.append(f"{exports}mkdir -p {SOLUTION_DIR} && {unpack} && bash {SOLUTION_DIR}/solve.sh")
    return actions


def entrypoint_argv(entrypoint: str) -> list[str]:
    """The Dockerfile's ENTRYPOINT as an argv: its exec form (a JSON list) as written, its shell form under
    ``/bin/sh -c`` as Docker runs it."""
    with contextlib.suppress(ValueError):
        argv = json.loads(entrypoint)
        if isinstance(argv, list) and argv and all(isinstance(word, str) for word in argv):
            return argv
    return ["/bin/sh", "-c", entrypoint]


def health_budget_s(check: dict[str, object] | None) -> float:
    """How long the entrypoint's services may take to pass the health check: Harbor's start period and its
    retries at its interval, at most HEALTH_S (the episode's start waits for them)."""
    if not check:
        return 0.0
    period, interval = float(check.get("start_period_sec", 0.0)), float(check.get("interval_sec", 5.0))
    return min(HEALTH_S, period + (int(check.get("retries", 3)) + 1) * interval)


def agent_workspace(workdir: str) -> str:
    """The agent's workspace for the task's working directory: that folder, mounted as the agent's (docs/harbor.md),
    or deepgym's default under /tmp where it cannot be (``/``, /tmp, a system folder)."""
    return DEFAULT_WORKSPACE if workspace_problem(workdir) is not None else workdir


def _quote(value: str) -> str:
    return "'" + value.replace("'", "'\\''") + "'"


def wrong_actions() -> dict[str, list[str]]:
    """Two known-wrong sequences every imported task must score below 1.0: a forged reward file, and a
    planted ``conftest.py`` and ``sitecustomize.py`` that would make any pytest run pass."""
    forged = ("mkdir -p /logs/verifier; echo 1 > /logs/verifier/reward.txt; "
              "echo '{\"reward\": 1.0}' > /logs/verifier/reward.json; echo 1 > reward.txt; echo done")
    conftest = ("cat > conftest.py <<'EOF'\nimport pytest\n\n\n@pytest.hookimpl(hookwrapper=True)\n"
                "def pytest_runtest_makereport(item, call):\n    outcome = yield\n"
                "    outcome.get_result().outcome = \"passed\"\nEOF\n"
                "printf 'import os\\nos.makedirs(\"/logs/verifier\", exist_ok=True)\\n"
                "open(\"/logs/verifier/reward.txt\", \"w\").write(\"1\")\\n' > sitecustomize.py; ls")
    return {"wrong_forged_reward": [forged], "wrong_planted_conftest": [conftest]}


def _manifest(name: str, task: HarborTask, workspace: str, terminal: str) -> dict[str, object]:
    manifest: dict[str, object] = {
        "id": name, "kind": "session",
        "title": task.title or f"Harbor task {task.package.get('name', name)}",
        "variants": 1, "prompt": "prompt.md",
        "session": {"max_steps": MAX_STEPS,
                    "step_timeout_s": min(STEP_TIMEOUT_S, task.agent_timeout_s or DEFAULT_EPISODE_S),
                    "episode_s": task.agent_timeout_s or DEFAULT_EPISODE_S,
                    "verify_timeout_s": task.verifier_timeout_s, "terminal": terminal,
                    "workspace": workspace, "verifier": "script"}}
    if task.difficulty:
        manifest["difficulty"] = task.difficulty
    tags = list(dict.fromkeys(["harbor", *task.tags]))
    manifest["tags"] = tags
    limits: dict[str, object] = {}
    if task.cpus is not None:
        limits["cpus"] = task.cpus
    if task.memory_mb is not None:
        limits["memory_mb"] = task.memory_mb
    if limits:
        manifest["limits"] = limits
    return manifest


@dataclass
class Plan:
    """A task checked and ready to write: nothing is on disk yet (:func:`prepare`, then :func:`write`)."""

    task_dir: Path
    target: Path
    task: HarborTask
    dockerfile: str
    facts: DockerfileFacts
    terminal: str = "persistent"
    """The agent's action channel (session.terminal): Harbor's persistent terminal, or ``fresh`` for a provider
    that keeps no stream open (docs/harbor.md)."""


def prepare(task_dir: Path, into: Path, *, base_map: dict[str, str] | None = None, force: bool = False,
            terminal: str = "persistent") -> Plan:
    """Check the Harbor task ``task_dir`` and work out its environment, writing nothing. Raises
    ConfigurationError for a malformed or refused task, or a destination that exists and was not imported
    from Harbor (``force`` replaces an earlier import, never anything else)."""
    base_map = base_map or {}
    if terminal not in TERMINALS:
        raise _fail(task_dir, f"--terminal {terminal!r} is not an action channel", f"give one of {TERMINALS}")
    toml_path = task_dir / "task.toml"
    if not toml_path.is_file():
        raise _fail(task_dir, "is not a Harbor task directory (no task.toml)", "give the folder that holds task.toml")
    task = read_task_toml(toml_path)
    dockerfile = _check_layout(task_dir, task)
    target = into / environment_name(task_dir)
    if target.exists():
        if not (target / RECORD).is_file():
            raise _fail(task_dir, f"{target} exists and was not written by deepgym harbor import",
                        "choose another --into, or remove that folder yourself")
        if not force:
            raise _fail(task_dir, f"{target} holds an earlier import", "pass --force to replace it")
    task_text = dockerfile.read_text() if dockerfile is not None else image_dockerfile(task.docker_image or "")
    text, facts = environment_dockerfile(task_text, base_map, task.workdir)
    for image in facts.unresolved:
        task.warn("environment/Dockerfile", f"FROM {image} depends on a build argument: it cannot be checked "
                  "before the build, nor mapped")
    if facts.entrypoint:
        task.warn("environment/Dockerfile", f"ENTRYPOINT {facts.entrypoint} runs as the agent's uid when the "
                  "episode starts and again as the verifier's before test.sh, never as root: its services keep "
                  "only what they store in the workspace")
    unused = sorted(set(base_map) - set(facts.mapped))
    if unused:
        task.warn("--base-map", f"{', '.join(unused)} named by no FROM line of this task")
    return Plan(task_dir, target, task, text, facts, terminal)


def write(plan: Plan) -> Imported:
    """Write a prepared environment: into a scratch folder beside the target, renamed into place once whole,
    so an interrupted import never leaves a half-written environment that deepgym would load."""
    into, name = plan.target.parent, plan.target.name
    # Two levels down: deepgym's scan of DIR (DIR/*/manifest.yaml) never sees a folder being written.
    scratch = into / ".deepgym-importing" / name
    scratch.parent.mkdir(parents=True, exist_ok=True)
    shutil.rmtree(scratch, ignore_errors=True)
    try:
        _write(scratch, plan.task_dir, name, plan.task, plan.dockerfile, plan.facts, plan.terminal)
        if plan.target.exists():
            shutil.rmtree(plan.target)
        scratch.rename(plan.target)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
        with contextlib.suppress(OSError):
            scratch.parent.rmdir()
    return Imported(name, plan.target, plan.task.warnings)


def import_task(task_dir: Path, into: Path, *, base_map: dict[str, str] | None = None,
                force: bool = False, terminal: str = "persistent") -> Imported:
    """Write the environment of the Harbor task ``task_dir`` into ``into`` (:func:`prepare`, then
    :func:`write`)."""
    return write(prepare(task_dir, into, base_map=base_map, force=force, terminal=terminal))


def import_tasks(task_dirs: list[Path], into: Path, *, base_map: dict[str, str] | None = None,
                 force: bool = False, terminal: str = "persistent") -> list[Imported]:
    """Import several tasks, all or nothing as far as checking goes: every task is prepared before any is
    written, so one refused task (or two that would share a name) leaves ``into`` untouched."""
    plans = [prepare(task_dir, into, base_map=base_map, force=force, terminal=terminal) for task_dir in task_dirs]
    seen: dict[Path, Path] = {}
    for plan in plans:
        if plan.target in seen:
            raise _fail(plan.task_dir, f"would be written to {plan.target}, as {seen[plan.target]} would",
                        "import them into different --into folders, or rename one task directory")
        seen[plan.target] = plan.task_dir
    return [write(plan) for plan in plans]


def _write(folder: Path, task_dir: Path, name: str, task: HarborTask, dockerfile: str,
           facts: DockerfileFacts, terminal: str) -> None:
    """Write the environment's files into ``folder`` (renamed into place by the caller once whole)."""
    folder.mkdir(parents=True)
    if (task_dir / "environment").is_dir():
        shutil.copytree(task_dir / "environment", folder / "environment")
    else:
        (folder / "environment").mkdir()
    (folder / "Dockerfile").write_text(dockerfile)
    (folder / "prompt.md").write_text(strip_canary((task_dir / "instruction.md").read_text()).rstrip() + "\n")
    workdir = task.workdir or facts.workdir or "/"
    (folder / "manifest.yaml").write_text(yaml.safe_dump(_manifest(name, task, agent_workspace(workdir), terminal),
                                                         sort_keys=False, width=120))
    tests = folder / "tests"
    shutil.copytree(task_dir / "tests", tests / "harbor")
    (tests / "verify.py").write_text(_VERIFY)
    script: dict[str, object] = {"command": VERIFIER_COMMAND, "tests": "harbor",
                                 "env": {**task.task_env, **task.verifier_env}, "agent_env": task.task_env}
    if task.verifier_network:
        script["network"] = True
    if facts.entrypoint:
        script.update(entrypoint=entrypoint_argv(facts.entrypoint), healthcheck=task.healthcheck,
                      health_s=health_budget_s(task.healthcheck))
    (tests / "session.json").write_text(json.dumps({"probes": {}, "script": script}, indent=2) + "\n")
    (folder / "start" / "0").mkdir(parents=True)
    (folder / "start" / "0" / ".gitkeep").write_text("")
    shutil.copytree(task_dir / "solution", folder / "solution")
    solutions = folder / "solutions"
    solutions.mkdir()
    sequences = {"reference": reference_actions(task_dir / "solution", task.solution_env), **wrong_actions()}
    for stem, actions in sequences.items():
        (solutions / f"{stem}.json").write_text(json.dumps({"0": actions}, indent=2) + "\n")
    shutil.copyfile(task_dir / "task.toml", folder / "task.toml")
    record = {
        "source_dir": str(task_dir.resolve()), "schema_version": task.schema_version, "source": task.source,
        "package": task.package, "metadata": task.metadata,
        "bases": facts.bases, "base_map": facts.mapped, "workdir": workdir, "image_user": facts.user,
        "entrypoint": facts.entrypoint,
        "agent": {"timeout_sec": task.agent_timeout_s, "network": False, "env": task.task_env},
        "verifier": {"timeout_sec": task.verifier_timeout_s, "network": task.verifier_network,
                     "env": {**task.task_env, **task.verifier_env}, "command": VERIFIER_COMMAND,
                     "tests": "/opt/deepgym/env/harbor", "reward_files": ["/logs/verifier/reward.txt",
                                                                          "/logs/verifier/reward.json"]},
        "solution": {"env": task.solution_env}, "healthcheck": task.healthcheck, "warnings": task.warnings,
    }
    (folder / RECORD).write_text(json.dumps(record, indent=2, sort_keys=False) + "\n")
