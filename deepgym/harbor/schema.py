"""Every ``task.toml`` field of Harbor 0.25.0 and what deepgym does with it, and the parser that applies it.

The table (:data:`FIELDS`) is the single source: the parser walks it, ``docs/harbor.md`` lists it, and a test
checks that the two agree and that it covers Harbor's schema. Each field is

- ``supported``: it changes the environment deepgym writes (a budget, a limit, the verifier's network);
- ``ignored``: it has no meaning in a deepgym episode, so the import goes on and says so in a warning;
- ``refused``: the task depends on something deepgym cannot give yet (several containers, GPUs, a verifier
  in a container of its own), so the import stops with a :class:`~deepgym.errors.ConfigurationError` that names
  the field and the fix. Refusing is the honest outcome: an environment that silently lost what its verifier
  needs would score the reference 0 and look like a bad task.

Harbor's models ignore keys they do not know, so do we, with a warning (a typo is visible, not fatal).
The schema is read with :mod:`tomllib`; the ``harbor`` package is never imported (it needs Python 3.12).
"""

from __future__ import annotations

import re
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import ConfigurationError

SUPPORTED, IGNORED, REFUSED = "supported", "ignored", "refused"
DIFFICULTIES = ("easy", "medium", "hard")
# A ${VAR} or ${VAR:-default} template: Harbor fills it from the host at run time. deepgym passes nothing of
# the host into a sandbox (no credentials reach an agent's container), so a templated value is refused.
_TEMPLATE = re.compile(r"\$\{[^}]*\}")
NETWORK_MODES = ("no-network", "public", "allowlist")


@dataclass(frozen=True)
class Field:
    """One ``task.toml`` key: ``path`` as ``section.key``, its treatment and what deepgym does with it."""

    path: str
    treatment: str
    meaning: str


FIELDS: tuple[Field, ...] = (
    Field("schema_version", SUPPORTED, "1.x accepted (also the old spelling `version`); another major is refused"),
    Field("source", SUPPORTED, "recorded in harbor.json"),
    Field("task.name", SUPPORTED, "recorded; the environment is named after the task's directory, not this"),
    Field("task.version", SUPPORTED, "recorded in harbor.json"),
    Field("task.description", SUPPORTED, "the manifest's `title` (first line)"),
    Field("task.authors", SUPPORTED, "recorded in harbor.json"),
    Field("task.keywords", SUPPORTED, "added to the manifest's `tags`"),
    Field("metadata", SUPPORTED, "recorded; `difficulty` (easy, medium, hard) sets the manifest's, `category` "
                                 "and `tags` add tags"),
    Field("multi_step_reward_strategy", IGNORED, "only meaningful with `steps`, which are refused"),
    Field("steps", REFUSED, "multi-step tasks: import each step as a task of its own"),
    Field("artifacts", IGNORED, "deepgym collects no files after an episode; the verdict carries the cases"),
    Field("verifier.timeout_sec", SUPPORTED, "`session.verify_timeout_s` (1 to 3600 s)"),
    Field("verifier.env", SUPPORTED, "literal values passed to test.sh; a `${VAR}` from the host is refused"),
    Field("verifier.user", IGNORED, "test.sh runs as deepgym's verifier uid, never root nor a uid the agent had"),
    Field("verifier.network_mode", SUPPORTED, "`public`: the verifier, and only it, gets a network while it "
                                              "verifies (docker only); `no-network` or unset: none; `allowlist` "
                                              "is refused"),
    Field("verifier.allowed_hosts", REFUSED, "deepgym has no egress allowlist; use network_mode public or "
                                             "no-network"),
    Field("verifier.environment_mode", SUPPORTED, "`shared` (the default) only; `separate` is refused"),
    Field("verifier.environment", REFUSED, "a verifier in a container of its own is not supported yet"),
    Field("verifier.collect", REFUSED, "collect hooks run in compose services, which are refused"),
    Field("agent.timeout_sec", SUPPORTED, "`session.episode_s` (1 to 86400 s; default 600)"),
    Field("agent.user", IGNORED, "the agent is always deepgym's unprivileged uid 10000"),
    Field("agent.network_mode", SUPPORTED, "`no-network` (deepgym's only agent network); `public` and "
                                           "`allowlist` are refused"),
    Field("agent.allowed_hosts", REFUSED, "deepgym has no egress allowlist"),
    Field("environment.build_timeout_sec", IGNORED, "bake builds have no per-image timeout"),
    Field("environment.docker_image", SUPPORTED, "the image to start from when set (as Harbor does without "
                                                 "--force-build); environment/Dockerfile is then ignored"),
    Field("environment.os", SUPPORTED, "`linux` only; `windows` is refused"),
    Field("environment.cpus", SUPPORTED, "`limits.cpus` (0.5 to 64)"),
    Field("environment.memory_mb", SUPPORTED, "`limits.memory_mb` (32 to 65536)"),
    Field("environment.memory", SUPPORTED, "deprecated size string (`2G`): as memory_mb, with a warning"),
    Field("environment.storage_mb", IGNORED, "deepgym sets no disk quota on the image's layers"),
    Field("environment.storage", IGNORED, "deprecated; as storage_mb"),
    Field("environment.gpus", REFUSED, "above 0: deepgym sandboxes have no GPUs yet; 0 is accepted"),
    Field("environment.gpu_types", REFUSED, "GPUs are refused; an empty list is accepted"),
    Field("environment.tpu", REFUSED, "deepgym sandboxes have no TPUs"),
    Field("environment.mcp_servers", REFUSED, "an agent's MCP servers are not part of a deepgym episode; an "
                                              "empty list is accepted"),
    Field("environment.env", SUPPORTED, "literal values exported into every action of the agent (fresh shell and "
                                        "terminal), the ENTRYPOINT's runs and test.sh; a `${VAR}` from the host is "
                                        "refused"),
    Field("environment.skills_dir", IGNORED, "agent-harness configuration"),
    Field("environment.healthcheck", SUPPORTED, "waited for after each run of the image's ENTRYPOINT (before the "
                                                "first observation, before test.sh), at most 30 s"),
    Field("environment.workdir", SUPPORTED, "the agent's working directory (else the Dockerfile's last WORKDIR)"),
    Field("environment.network_mode", SUPPORTED, "the default of agent.network_mode and verifier.network_mode "
                                                 "when they are unset (explicitly only: unset means no network, "
                                                 "unlike Harbor's implicit public)"),
    Field("environment.allowed_hosts", REFUSED, "deepgym has no egress allowlist"),
    Field("environment.allow_internet", SUPPORTED, "deprecated: true as network_mode public, false as no-network"),
    Field("solution.env", SUPPORTED, "literal values exported before solution/solve.sh runs; `${VAR}` refused"),
)
KNOWN = {f.path for f in FIELDS}


@dataclass
class HarborTask:
    """A parsed and checked ``task.toml``: what the importer needs, plus the warnings it must print."""

    toml_path: Path
    schema_version: str = "1.4"
    package: dict[str, Any] = field(default_factory=dict)
    metadata: dict[str, Any] = field(default_factory=dict)
    source: str | None = None
    title: str = ""
    difficulty: str | None = None
    tags: list[str] = field(default_factory=list)
    agent_timeout_s: float | None = None
    verifier_timeout_s: float = 600.0
    verifier_network: bool = False
    verifier_env: dict[str, str] = field(default_factory=dict)
    solution_env: dict[str, str] = field(default_factory=dict)
    task_env: dict[str, str] = field(default_factory=dict)
    cpus: float | None = None
    memory_mb: int | None = None
    docker_image: str | None = None
    workdir: str | None = None
    healthcheck: dict[str, Any] | None = None
    warnings: list[str] = field(default_factory=list)

    def refuse(self, path: str, problem: str, fix: str) -> ConfigurationError:
        """The error for ``path`` (``section.key``): the file, the field, the problem and the fix."""
        return ConfigurationError(f"{self.toml_path}: {path}: {problem}. Fix: {fix}")

    def warn(self, path: str, said: str) -> None:
        self.warnings.append(f"{self.toml_path.parent.name}: {path}: {said}")


def read_task_toml(path: Path) -> HarborTask:
    """Parse ``path`` (a ``task.toml``) with tomllib and apply :data:`FIELDS`. Raises ConfigurationError for a
    file that is not TOML, a value of the wrong type or range, and every refused field that is set."""
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise ConfigurationError(f"{path}: is not valid TOML ({exc}). Fix: correct the syntax") from None
    task = HarborTask(toml_path=path)
    _root(task, data)
    return task


def _table(task: HarborTask, data: dict[str, Any], name: str) -> dict[str, Any]:
    value = data.get(name, {})
    if not isinstance(value, dict):
        raise task.refuse(name, f"must be a table, got {type(value).__name__}", f"write it as a [{name}] section")
    return value


def _unknown(task: HarborTask, section: str, table: dict[str, Any], handled: set[str]) -> None:
    for key in sorted(set(table) - handled):
        path = f"{section}.{key}" if section else key
        task.warn(path, "not a field of Harbor 0.25.0's task.toml; ignored")


def _number(task: HarborTask, path: str, value: Any, low: float, high: float) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not low <= value <= high:
        raise task.refuse(path, f"{value!r} is not a number from {low:g} to {high:g}",
                          f"give a value between {low:g} and {high:g}")
    return float(value)


def _literal_env(task: HarborTask, path: str, value: Any) -> dict[str, str]:
    if not isinstance(value, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in value.items()):
        raise task.refuse(path, "must be a table of string values", f"write [{path}] with KEY = \"value\" lines")
    for key, item in value.items():
        if _TEMPLATE.search(item):
            raise task.refuse(f"{path}.{key}", f"{item!r} takes a value from the host's environment, which deepgym "
                              "never passes into a sandbox", "write the literal value into task.toml, or bake it "
                              "into environment/Dockerfile")
    return dict(value)


def _root(task: HarborTask, data: dict[str, Any]) -> None:
    version = data.get("schema_version", data.get("version", "1.4"))
    if not isinstance(version, str) or not version.split(".")[0] == "1":
        raise task.refuse("schema_version", f"{version!r} is not a 1.x schema",
                          "import tasks written for Harbor's task.toml 1.x (Harbor 0.25.0 writes 1.4)")
    task.schema_version = version
    if data.get("steps"):
        raise task.refuse("steps", "multi-step tasks are not supported yet",
                          "import each step as a task directory of its own")
    if data.get("multi_step_reward_strategy") is not None:
        task.warn("multi_step_reward_strategy", "applies to multi-step tasks only; ignored")
    if data.get("artifacts"):
        task.warn("artifacts", "deepgym collects no files after an episode; ignored")
    source = data.get("source")
    task.source = source if isinstance(source, str) else None
    _package(task, _table(task, data, "task"))
    _metadata(task, _table(task, data, "metadata"))
    environment = _table(task, data, "environment")
    baseline = _environment(task, environment)
    _agent(task, _table(task, data, "agent"), baseline)
    _verifier(task, _table(task, data, "verifier"), baseline)
    solution = _table(task, data, "solution")
    task.solution_env = _literal_env(task, "solution.env", solution.get("env", {}))
    _unknown(task, "solution", solution, {"env"})
    _unknown(task, "", data, {"schema_version", "version", "source", "task", "metadata", "verifier", "agent",
                              "environment", "solution", "multi_step_reward_strategy", "steps", "artifacts"})


def _package(task: HarborTask, package: dict[str, Any]) -> None:
    task.package = dict(package)
    description = package.get("description")
    if isinstance(description, str) and description.strip():
        task.title = description.strip().splitlines()[0][:200]
    keywords = package.get("keywords", [])
    if not isinstance(keywords, list) or not all(isinstance(k, str) for k in keywords):
        raise task.refuse("task.keywords", "must be a list of strings", "write keywords = [\"a\", \"b\"]")
    task.tags += keywords
    _unknown(task, "task", package, {"name", "version", "description", "authors", "keywords"})


def _metadata(task: HarborTask, metadata: dict[str, Any]) -> None:
    task.metadata = dict(metadata)
    difficulty = metadata.get("difficulty")
    if isinstance(difficulty, str) and difficulty.lower() in DIFFICULTIES:
        task.difficulty = difficulty.lower()
    elif difficulty is not None:
        task.warn("metadata.difficulty", f"{difficulty!r} is not easy, medium or hard; not carried over")
    category = metadata.get("category")
    if isinstance(category, str) and category:
        task.tags.append(category)
    tags = metadata.get("tags", [])
    if isinstance(tags, list):
        task.tags += [t for t in tags if isinstance(t, str)]


def _network(task: HarborTask, section: str, table: dict[str, Any]) -> bool | None:
    """The section's explicit network choice (True: public), or None when it sets none."""
    if table.get("allowed_hosts") is not None:
        raise task.refuse(f"{section}.allowed_hosts", "deepgym has no egress allowlist",
                          "remove allowed_hosts and set network_mode to \"public\" or \"no-network\"")
    mode = table.get("network_mode")
    if mode is None:
        return None
    if mode not in NETWORK_MODES:
        raise task.refuse(f"{section}.network_mode", f"{mode!r} is not one of {', '.join(NETWORK_MODES)}",
                          "use \"public\" or \"no-network\"")
    if mode == "allowlist":
        raise task.refuse(f"{section}.network_mode", "deepgym has no egress allowlist",
                          "use \"public\" or \"no-network\"")
    return mode == "public"


def _environment(task: HarborTask, env: dict[str, Any]) -> bool | None:
    """Check ``[environment]``; returns its explicit network baseline (None when it sets none)."""
    os_name = env.get("os", "linux")
    if not isinstance(os_name, str) or os_name.lower() != "linux":
        raise task.refuse("environment.os", f"{os_name!r} is not supported", "deepgym runs Linux containers only")
    gpus = env.get("gpus")
    if gpus is not None and (isinstance(gpus, bool) or not isinstance(gpus, int) or gpus < 0):
        raise task.refuse("environment.gpus", f"{gpus!r} is not a whole number of GPUs", "give 0 or remove it")
    if gpus:
        raise task.refuse("environment.gpus", f"the task asks for {gpus} GPU(s); deepgym sandboxes have none yet",
                          "import only tasks that run on CPUs (remove gpus, or set it to 0)")
    if env.get("gpu_types"):
        raise task.refuse("environment.gpu_types", "the task asks for GPU types; deepgym sandboxes have no GPUs",
                          "remove gpu_types")
    if env.get("tpu") is not None:
        raise task.refuse("environment.tpu", "deepgym sandboxes have no TPUs", "remove the [environment.tpu] table")
    if env.get("mcp_servers"):
        raise task.refuse("environment.mcp_servers", "a deepgym episode gives its agent shell actions only, no MCP "
                          "servers", "remove [[environment.mcp_servers]] if the task can be done without them")
    if "cpus" in env:
        task.cpus = _number(task, "environment.cpus", env["cpus"], 0.5, 64)
    if "memory" in env:
        task.memory_mb = _size_mb(task, "environment.memory", env["memory"])
        task.warn("environment.memory", "deprecated; read as memory_mb")
    if "memory_mb" in env:
        memory_mb = int(_number(task, "environment.memory_mb", env["memory_mb"], 32, 65536))
        if task.memory_mb is not None and task.memory_mb != memory_mb:
            raise task.refuse("environment.memory_mb", f"{memory_mb} disagrees with memory = {env['memory']!r} "
                              f"({task.memory_mb} MB)", "remove the deprecated memory")
        task.memory_mb = memory_mb
    for key in ("storage_mb", "storage", "build_timeout_sec", "skills_dir"):
        if env.get(key) is not None:
            task.warn(f"environment.{key}", "has no meaning for a deepgym environment; ignored")
    image = env.get("docker_image")
    if image is not None and (not isinstance(image, str) or not image.strip() or any(c.isspace() for c in image)):
        raise task.refuse("environment.docker_image", f"{image!r} is not an image reference", "give e.g. "
                          "\"python:3.12-slim\"")
    task.docker_image = image
    workdir = env.get("workdir")
    if workdir is not None and (not isinstance(workdir, str) or not workdir.startswith("/")):
        raise task.refuse("environment.workdir", f"{workdir!r} is not an absolute path", "give e.g. \"/app\"")
    task.workdir = workdir
    if env.get("healthcheck") is not None:
        if not isinstance(env["healthcheck"], dict) or not isinstance(env["healthcheck"].get("command"), str):
            raise task.refuse("environment.healthcheck", "must be a table with a string `command`",
                              "write [environment.healthcheck] with command = \"...\"")
        task.healthcheck = dict(env["healthcheck"])
    task.task_env = _literal_env(task, "environment.env", env.get("env", {}))
    baseline = _network(task, "environment", env)
    legacy = env.get("allow_internet")
    if legacy is not None:
        if not isinstance(legacy, bool):
            raise task.refuse("environment.allow_internet", f"{legacy!r} is not true or false",
                              "use network_mode = \"public\" or \"no-network\" instead")
        task.warn("environment.allow_internet", "deprecated; read as network_mode")
        baseline = legacy if baseline is None else baseline
    _unknown(task, "environment", env, {f.path.split(".", 1)[1] for f in FIELDS if f.path.startswith("environment.")})
    return baseline


def _size_mb(task: HarborTask, path: str, value: Any) -> int:
    match = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([GMK])\s*", value.upper()) if isinstance(value, str) else None
    if match is None:
        raise task.refuse(path, f"{value!r} is not a size like 2G or 512M", "use memory_mb = 2048")
    number, unit = float(match.group(1)), match.group(2)
    megabytes = int(number * 1024) if unit == "G" else int(number) if unit == "M" else int(number / 1024)
    return int(_number(task, path, megabytes, 32, 65536))


def _agent(task: HarborTask, agent: dict[str, Any], baseline: bool | None) -> None:
    if agent.get("timeout_sec") is not None:
        task.agent_timeout_s = _number(task, "agent.timeout_sec", agent["timeout_sec"], 1, 86400)
    if agent.get("user") is not None:
        task.warn("agent.user", "the agent runs as deepgym's unprivileged uid 10000; ignored")
    network = _network(task, "agent", agent)
    if network is None and baseline:
        raise task.refuse("environment.network_mode", "the agent would get a network (the baseline is public and "
                          "[agent] sets none); deepgym's agent works offline",
                          "set [agent] network_mode = \"no-network\" if the task can be done offline (give the "
                          "verifier its own network_mode = \"public\" if it needs one)")
    if network:
        raise task.refuse("agent.network_mode", "deepgym's agent works offline",
                          "set it to \"no-network\" if the task can be done offline")
    _unknown(task, "agent", agent, {"timeout_sec", "user", "network_mode", "allowed_hosts"})


def _verifier(task: HarborTask, verifier: dict[str, Any], baseline: bool | None) -> None:
    if verifier.get("timeout_sec") is not None:
        task.verifier_timeout_s = _number(task, "verifier.timeout_sec", verifier["timeout_sec"], 1, 3600)
    task.verifier_env = _literal_env(task, "verifier.env", verifier.get("env", {}))
    if verifier.get("user") is not None:
        task.warn("verifier.user", "test.sh runs as deepgym's verifier uid, never root nor the agent's; ignored")
    mode = verifier.get("environment_mode")
    if mode not in (None, "shared", "separate"):
        raise task.refuse("verifier.environment_mode", f"{mode!r} is not shared or separate", "use \"shared\"")
    if mode == "separate" or verifier.get("environment") is not None:
        raise task.refuse("verifier.environment" if mode != "separate" else "verifier.environment_mode",
                          "a verifier in a container of its own is not supported yet",
                          "remove [verifier.environment] and environment_mode; test.sh then runs in the agent's "
                          "container, after every agent process is killed")
    if verifier.get("collect"):
        raise task.refuse("verifier.collect", "collect hooks run in compose services, which deepgym does not "
                          "support", "remove [[verifier.collect]] and let test.sh read the state itself")
    network = _network(task, "verifier", verifier)
    task.verifier_network = bool(baseline) if network is None else network
    _unknown(task, "verifier", verifier, {"timeout_sec", "env", "user", "environment_mode", "environment",
                                          "collect", "network_mode", "allowed_hosts"})
