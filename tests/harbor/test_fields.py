"""task.toml against the field table: every refused field stops the import with an error that names the field
and the fix, every ignored one warns, malformed files and values are errors naming the file and the field,
network follows only what task.toml asks for, and the table covers Harbor 0.25.0's schema and the docs."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

from deepgym.errors import ConfigurationError
from deepgym.harbor.importer import import_task, prepare
from deepgym.harbor.schema import FIELDS, IGNORED, KNOWN, REFUSED, read_task_toml

TASKS = Path(__file__).parent / "tasks"
DOCS = Path(__file__).parents[2] / "docs" / "harbor.md"
# Every field of Harbor 0.25.0's TaskConfig (harbor/models/task/config.py in its wheel), the deprecated
# environment spellings included.
HARBOR_0_25_FIELDS = {
    "schema_version", "source", "metadata", "multi_step_reward_strategy", "steps", "artifacts",
    "task.name", "task.version", "task.description", "task.authors", "task.keywords",
    "verifier.timeout_sec", "verifier.env", "verifier.user", "verifier.network_mode", "verifier.allowed_hosts",
    "verifier.environment_mode", "verifier.environment", "verifier.collect",
    "agent.timeout_sec", "agent.user", "agent.network_mode", "agent.allowed_hosts",
    "environment.build_timeout_sec", "environment.docker_image", "environment.os", "environment.cpus",
    "environment.memory_mb", "environment.storage_mb", "environment.gpus", "environment.gpu_types",
    "environment.tpu", "environment.mcp_servers", "environment.env", "environment.skills_dir",
    "environment.healthcheck", "environment.workdir", "environment.network_mode", "environment.allowed_hosts",
    "environment.allow_internet", "environment.memory", "environment.storage", "solution.env",
}


def task_with(tmp_path: Path, toml: str, name: str = "probe-task") -> Path:
    """hello-world with ``toml`` as its task.toml."""
    task = tmp_path / name
    shutil.copytree(TASKS / "hello-world", task)
    (task / "task.toml").write_text(toml)
    return task


# (task.toml, the field the error must name, words of the fix it must give)
REFUSALS = [
    ('[[steps]]\nname = "one"\n', "steps", "each step as a task directory"),
    ('[verifier]\nnetwork_mode = "allowlist"\nallowed_hosts = ["pypi.org"]\n', "verifier.allowed_hosts",
     "network_mode to \"public\""),
    ('[verifier.environment]\ncpus = 1\n', "verifier.environment", "remove [verifier.environment]"),
    ('[verifier]\nenvironment_mode = "separate"\n', "verifier.environment_mode", "remove [verifier.environment]"),
    ('[[verifier.collect]]\ncommand = "true"\n', "verifier.collect", "remove [[verifier.collect]]"),
    ('[verifier]\nnetwork_mode = "allowlist"\n', "verifier.network_mode", "use \"public\" or \"no-network\""),
    ('[agent]\nallowed_hosts = ["x.org"]\n', "agent.allowed_hosts", "network_mode to \"public\""),
    ('[agent]\nnetwork_mode = "public"\n', "agent.network_mode", "set it to \"no-network\""),
    ('[environment]\nnetwork_mode = "public"\n', "environment.network_mode", "[agent] network_mode = \"no-network\""),
    ('[environment]\nallow_internet = true\n', "environment.network_mode", "[agent] network_mode = \"no-network\""),
    ('[environment]\nallowed_hosts = ["x.org"]\n', "environment.allowed_hosts", "network_mode to \"public\""),
    ('[environment]\ngpus = 2\n', "environment.gpus", "remove gpus, or set it to 0"),
    ('[environment]\ngpu_types = ["H100"]\n', "environment.gpu_types", "remove gpu_types"),
    ('[environment.tpu]\ntype = "v6e"\ntopology = "2x4"\n', "environment.tpu", "remove the [environment.tpu]"),
    ('[[environment.mcp_servers]]\nname = "fs"\ntransport = "stdio"\ncommand = "fs"\n', "environment.mcp_servers",
     "remove [[environment.mcp_servers]]"),
    ('[environment]\nos = "windows"\n', "environment.os", "Linux containers only"),
    ('[environment.env]\nTOKEN = "${API_TOKEN}"\n', "environment.env.TOKEN", "write the literal value"),
    ('[verifier.env]\nKEY = "${KEY:-x}"\n', "verifier.env.KEY", "write the literal value"),
    ('[solution.env]\nA = "pre-${B}"\n', "solution.env.A", "write the literal value"),
    ('schema_version = "2.0"\n', "schema_version", "Harbor's task.toml 1.x"),
]


@pytest.mark.parametrize(("toml", "field", "fix"), REFUSALS, ids=[r[1] + f"-{i}" for i, r in enumerate(REFUSALS)])
def test_a_refused_field_names_itself_and_the_fix(tmp_path: Path, toml: str, field: str, fix: str) -> None:
    task = task_with(tmp_path, toml)
    with pytest.raises(ConfigurationError) as caught:
        import_task(task, tmp_path / "envs")
    said = str(caught.value)
    assert said.startswith(f"{task / 'task.toml'}: {field}: ") and "Fix: " in said and fix in said, said
    assert not (tmp_path / "envs").exists()


def test_every_refused_field_of_the_table_has_a_test() -> None:
    refused = {f.path for f in FIELDS if f.treatment == REFUSED}
    tested = {re.sub(r"\.[A-Z_]+$", "", field) for _, field, _ in REFUSALS}
    assert refused <= tested, refused - tested


@pytest.mark.parametrize("toml", ['[environment]\ngpus = 0\ngpu_types = []\nmcp_servers = []\n',
                                  '[verifier]\nenvironment_mode = "shared"\n'])
def test_the_harmless_values_of_refused_fields_are_accepted(tmp_path: Path, toml: str) -> None:
    assert import_task(task_with(tmp_path, toml), tmp_path / "envs").warnings == []


def test_a_compose_task_is_refused(tmp_path: Path) -> None:
    task = task_with(tmp_path, "")
    (task / "environment" / "docker-compose.yaml").write_text("services: {main: {build: .}, db: {image: pg}}\n")
    with pytest.raises(ConfigurationError, match=r"environment/docker-compose.yaml: multi-container .* Fix: fold"):
        import_task(task, tmp_path / "envs")


@pytest.mark.parametrize(("toml", "match"), [
    ("[verifier\ntimeout_sec = 1\n", r"task.toml: is not valid TOML \(.*\)\. Fix: correct the syntax"),
    ("verifier = 3\n", r"task.toml: verifier: must be a table, got int"),
    ('[verifier]\ntimeout_sec = "long"\n', r"verifier.timeout_sec: 'long' is not a number from 1 to 3600"),
    ("[verifier]\ntimeout_sec = 0\n", r"verifier.timeout_sec: 0 is not a number from 1 to 3600"),
    ("[agent]\ntimeout_sec = 1e9\n", r"agent.timeout_sec: 1000000000.0 is not a number from 1 to 86400"),
    ("[environment]\ncpus = 0.1\n", r"environment.cpus: 0.1 is not a number from 0.5 to 64"),
    ("[environment]\nmemory_mb = 1000000\n", r"environment.memory_mb: 1000000 is not a number from 32 to 65536"),
    ('[environment]\nmemory = "lots"\n', r"environment.memory: 'lots' is not a size like 2G"),
    ('[environment]\nmemory = "1G"\nmemory_mb = 512\n', r"environment.memory_mb: 512 disagrees with memory = '1G'"),
    ("[environment]\ngpus = -1\n", r"environment.gpus: -1 is not a whole number of GPUs"),
    ('[environment]\nallow_internet = "yes"\n', r"environment.allow_internet: 'yes' is not true or false"),
    ('[environment]\nworkdir = "app"\n', r"environment.workdir: 'app' is not an absolute path"),
    ('[environment]\ndocker_image = "a b"\n', r"environment.docker_image: 'a b' is not an image reference"),
    ("[environment.healthcheck]\ninterval_sec = 1\n", r"environment.healthcheck: must be a table with a string"),
    ("[environment]\nnetwork_mode = \"open\"\n", r"environment.network_mode: 'open' is not one of"),
    ("[verifier]\nenv = { A = 1 }\n", r"verifier.env: must be a table of string values"),
    ("[task]\nkeywords = \"a, b\"\n", r"task.keywords: must be a list of strings"),
    ('[verifier]\nenvironment_mode = "both"\n', r"verifier.environment_mode: 'both' is not shared or separate"),
])
def test_a_malformed_task_toml_names_the_file_and_the_field(tmp_path: Path, toml: str, match: str) -> None:
    task = task_with(tmp_path, toml)
    with pytest.raises(ConfigurationError, match=match) as caught:
        import_task(task, tmp_path / "envs")
    assert str(caught.value).startswith(str(task / "task.toml")) and "Fix: " in str(caught.value)


@pytest.mark.parametrize(("missing", "match"), [
    ("task.toml", "is not a Harbor task directory"),
    ("instruction.md", "instruction.md is missing"),
    ("tests/test.sh", "tests/test.sh is missing"),
    ("solution/solve.sh", "solution/solve.sh is missing. Fix: add solution/solve.sh .*reference solution"),
    ("environment/Dockerfile", "environment/Dockerfile is missing and task.toml sets no environment.docker_image"),
])
def test_a_missing_file_is_an_error(tmp_path: Path, missing: str, match: str) -> None:
    task = task_with(tmp_path, "")
    (task / missing).unlink()
    with pytest.raises(ConfigurationError, match=match):
        prepare(task, tmp_path / "envs")


def test_a_symlink_out_of_the_task_is_refused(tmp_path: Path) -> None:
    task = task_with(tmp_path, "")
    (task / "tests" / "secret").symlink_to("/etc/passwd")
    with pytest.raises(ConfigurationError, match=r"tests/secret is a symlink to /etc/passwd, outside the task"):
        prepare(task, tmp_path / "envs")


IGNORED_CASES = {
    "multi_step_reward_strategy": 'multi_step_reward_strategy = "mean"\n',
    "artifacts": 'artifacts = ["/app/out"]\n',
    "verifier.user": '[verifier]\nuser = "root"\n',
    "agent.user": '[agent]\nuser = 0\n',
    "environment.build_timeout_sec": "[environment]\nbuild_timeout_sec = 60\n",
    "environment.storage_mb": "[environment]\nstorage_mb = 10\n",
    "environment.storage": '[environment]\nstorage = "1G"\n',
    "environment.skills_dir": '[environment]\nskills_dir = "/skills"\n',
}


@pytest.mark.parametrize("field", sorted(IGNORED_CASES))
def test_an_ignored_field_warns_by_name(tmp_path: Path, field: str) -> None:
    result = import_task(task_with(tmp_path, IGNORED_CASES[field]), tmp_path / "envs")
    assert [w for w in result.warnings if w.startswith(f"probe-task: {field}: ")], result.warnings


def test_every_ignored_field_of_the_table_has_a_test() -> None:
    assert {f.path for f in FIELDS if f.treatment == IGNORED} <= set(IGNORED_CASES)


def test_an_unknown_key_warns_instead_of_failing_as_harbor_ignores_it(tmp_path: Path) -> None:
    result = import_task(task_with(tmp_path, "[verifier]\ntimeout_secs = 5\n[extra]\na = 1\n"), tmp_path / "envs")
    assert "probe-task: verifier.timeout_secs: not a field of Harbor 0.25.0's task.toml; ignored" in result.warnings
    assert "probe-task: extra: not a field of Harbor 0.25.0's task.toml; ignored" in result.warnings


@pytest.mark.parametrize(("toml", "network"), [
    ("", False),  # Harbor's implicit default is public; deepgym's is none
    ('[verifier]\nnetwork_mode = "public"\n', True),
    ('[verifier]\nnetwork_mode = "no-network"\n', False),
    ('[environment]\nnetwork_mode = "public"\n[agent]\nnetwork_mode = "no-network"\n', True),
    ('[environment]\nnetwork_mode = "public"\n[agent]\nnetwork_mode = "no-network"\n'
     '[verifier]\nnetwork_mode = "no-network"\n', False),
    ('[environment]\nallow_internet = true\n[agent]\nnetwork_mode = "no-network"\n', True),
    ('[environment]\nallow_internet = false\n', False),
])
def test_the_verifier_gets_a_network_only_when_task_toml_asks(tmp_path: Path, toml: str, network: bool) -> None:
    path = task_with(tmp_path, toml) / "task.toml"
    assert read_task_toml(path).verifier_network is network


def test_the_table_covers_harbors_schema_and_the_docs_list_it() -> None:
    assert HARBOR_0_25_FIELDS == KNOWN
    docs = DOCS.read_text()
    for field in FIELDS:
        assert re.search(rf"^\| `{re.escape(field.path)}` \| {field.treatment} \|", docs, re.M), field.path
