"""`deepgym harbor import` on the six Harbor-format tasks under tests/harbor/tasks, without Docker: the folder it
writes loads as a session environment, maps task.toml's timeouts, resources and network, keeps the task's
Dockerfile verbatim ahead of the runner's layers, replays solution/ as the reference, hashes stably, and is
built from the task's own context by bake."""

from __future__ import annotations

import base64
import gzip
import hashlib
import io
import json
import os
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

from deepgym import images
from deepgym.cli import main
from deepgym.environments import load_environment, parse_manifest
from deepgym.errors import ConfigurationError, ImageBuildError
from deepgym.harbor import bases
from deepgym.harbor.bake import harbor_target
from deepgym.harbor.importer import (SOLUTION_B64, SOLUTION_DIR, environment_name, import_task, import_tasks,
                                     strip_canary)

TASKS = Path(__file__).parent / "tasks"
NAMES = {"hello-world": "hello_world", "csv-report": "csv_report", "kv-service": "kv_service",
         "vault-repl": "vault_repl", "fix-git": "fix_git", "word-count": "word_count"}
OFFLINE = {"debian:bookworm-slim": "base"}  # deepgym's own base image, built by the same bake run


@pytest.fixture
def imported(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Every test task imported into a folder on DEEPGYM_ENVIRONMENTS."""
    into = tmp_path / "envs"
    import_tasks([TASKS / task for task in NAMES], into, base_map=OFFLINE)
    monkeypatch.setenv("DEEPGYM_ENVIRONMENTS", str(into))
    images.content_hash.cache_clear()
    yield into
    images.content_hash.cache_clear()


def record(into: Path, name: str) -> dict:
    return json.loads((into / name / "harbor.json").read_text())


def test_every_task_loads_as_a_session_environment_with_its_budgets(imported: Path) -> None:
    hello = load_environment("hello_world")
    assert hello.kind == "session" and hello.variants == 1 and hello.difficulty == "easy"
    assert (hello.session.episode_s, hello.session.verify_timeout_s, hello.session.step_timeout_s) == (120, 60, 120)
    assert hello.tags == ("harbor", "files", "basics") and hello.title == "Write a greeting to a file"
    csv_report = load_environment("csv_report")
    assert (csv_report.limits.cpus, csv_report.limits.memory_mb) == (1.0, 1024)
    assert csv_report.session.verify_timeout_s == 120 and csv_report.session.episode_s == 600
    word_count = load_environment("word_count")
    assert (word_count.limits.cpus, word_count.limits.memory_mb) == (2.0, 1024)  # memory = "1G"
    assert {p.name for p in imported.iterdir()} == set(NAMES.values())


def test_names_follow_the_task_directory() -> None:
    assert environment_name(Path("tasks/fix-git")) == "fix_git"
    assert environment_name(Path("/x/2048-Game.v2")) == "harbor_2048_game_v2"
    assert environment_name(Path("/x/a")) == "harbor_a"


def test_the_prompt_is_the_instruction_without_its_canary(imported: Path) -> None:
    prompt = (imported / "hello_world" / "prompt.md").read_text()
    assert prompt.startswith("Create the file `/app/hello.txt`") and "canary" not in prompt
    assert strip_canary("# canary abc\n\nbody\n# canary later") == "body\n# canary later"


def test_the_dockerfile_is_the_tasks_then_the_runner_in_layers_of_its_own(imported: Path) -> None:
    original = (TASKS / "kv-service" / "environment" / "Dockerfile").read_text()
    built = (imported / "kv_service" / "Dockerfile").read_text()
    assert built.startswith(original.replace("FROM debian:bookworm-slim", "FROM base"))
    runner = built[len(original) - len("debian:bookworm-slim") + len("base"):]
    assert runner.lstrip().startswith("# ---- deepgym:")
    assert "RUN --mount=type=bind,from=deepgym_runner" in runner and "from=deepgym_tests" in runner
    assert "cp -a /app/. /opt/deepgym/start/0/" in runner  # the task's WORKDIR is the starting workspace
    assert built.rstrip().endswith('ENTRYPOINT ["python3", "-I", "-B", "-m", "deepgym_runner"]\nCMD []')
    assert "cp -a /app/repo/. " in (imported / "fix_git" / "Dockerfile").read_text()
    assert (imported / "word_count" / "Dockerfile").read_text().startswith("FROM base\n")


def test_the_hidden_tests_hold_test_sh_and_the_script_verifier_runs_it(imported: Path) -> None:
    tests = imported / "csv_report" / "tests"
    for name in ("test.sh", "test_outputs.py"):
        assert (tests / "harbor" / name).read_bytes() == (TASKS / "csv-report" / "tests" / name).read_bytes()
    assert json.loads((tests / "session.json").read_text()) == {
        "probes": {}, "script": {"command": ["bash", "/tests/test.sh"], "tests": "harbor",
                                 "env": {"REPORT_PATH": "/app/report.json"}, "agent_env": {}}}
    csv_report = load_environment("csv_report")
    assert (csv_report.session.terminal, csv_report.session.verifier) == ("persistent", "script")
    assert csv_report.session.workspace == "/app"
    # A working directory that cannot be a mount of its own (/tmp, /) leaves the agent deepgym's default one.
    assert load_environment("word_count").session.workspace == "/tmp/work"
    assert load_environment("fix_git").session.workspace == "/app/repo"


def unpack_reference(actions: list[str]) -> dict[str, tuple[int, bytes]]:
    """The files the reference actions would unpack into /solution: {path: (mode, bytes)}."""
    chunks = [a.split("'")[1] for a in actions[:-1]]
    assert all(a.endswith(f"> {SOLUTION_B64}") for a in actions[:-1])
    with tarfile.open(fileobj=io.BytesIO(gzip.decompress(base64.b64decode("".join(chunks))))) as tar:
        return {m.name: (m.mode, tar.extractfile(m).read()) for m in tar.getmembers() if m.isfile()}


def test_the_reference_replays_solution_with_its_env(imported: Path) -> None:
    actions = json.loads((imported / "csv_report" / "solutions" / "reference.json").read_text())["0"]
    files = unpack_reference(actions)
    assert files["solve.sh"] == (0o755, (TASKS / "csv-report" / "solution" / "solve.sh").read_bytes())
    assert files["summarise.py"] == (0o644, (TASKS / "csv-report" / "solution" / "summarise.py").read_bytes())
    assert actions[-1].endswith(f"bash {SOLUTION_DIR}/solve.sh")
    final = json.loads((imported / "word_count" / "solutions" / "reference.json").read_text())["0"][-1]
    assert final.startswith("export SENTENCE='the quick brown fox jumps'\n")
    wrong = sorted(p.stem for p in (imported / "hello_world" / "solutions").glob("wrong_*.json"))
    assert wrong == ["wrong_forged_reward", "wrong_planted_conftest"]  # deepgym check needs two
    for stem in ("reference", *wrong):  # every action is a shell script bash accepts
        for action in json.loads((imported / "hello_world" / "solutions" / f"{stem}.json").read_text())["0"]:
            assert subprocess.run(["bash", "-n", "-c", action], capture_output=True).returncode == 0, action


def test_the_reference_actions_really_run_solve_sh(tmp_path: Path) -> None:
    """The replay, run by bash here with its two fixed paths moved into tmp_path: a solution bigger than one
    action arrives whole in several, and solve.sh runs beside its files with solution.env exported."""
    task = tmp_path / "big-task"
    shutil.copytree(TASKS / "hello-world", task)
    out = tmp_path / "out.txt"
    (task / "task.toml").write_text((task / "task.toml").read_text() + f'\n[solution]\nenv = {{ OUT = "{out}" }}\n')
    blob = os.urandom(150_000)
    (task / "solution" / "blob.bin").write_bytes(blob)
    (task / "solution" / "solve.sh").write_text('sha256sum < "$(dirname "$0")/blob.bin" | cut -c1-64 > "$OUT"\n')
    actions = json.loads((import_task(task, tmp_path / "envs").path / "solutions" / "reference.json").read_text())["0"]
    assert len(actions) >= 5  # 150 kB of random bytes is more than four 48 kB actions of base64
    script = "\n".join(actions).replace(SOLUTION_B64, str(tmp_path / "b64")).replace(SOLUTION_DIR,
                                                                                   str(tmp_path / "solution"))
    (tmp_path / "replay.sh").write_text(script)
    ran = subprocess.run(["bash", str(tmp_path / "replay.sh")], capture_output=True, text=True)
    assert ran.returncode == 0, ran.stderr
    assert out.read_text().strip() == hashlib.sha256(blob).hexdigest()


def test_network_env_and_the_service_are_recorded(imported: Path) -> None:
    fix_git = record(imported, "fix_git")
    assert fix_git["verifier"]["network"] is True and fix_git["agent"]["network"] is False
    assert json.loads((imported / "fix_git" / "tests" / "session.json").read_text())["script"]["network"] is True
    assert record(imported, "hello_world")["verifier"]["network"] is False
    assert "network" not in json.loads((imported / "hello_world" / "tests" / "session.json").read_text())["script"]
    assert record(imported, "csv_report")["verifier"]["env"] == {"REPORT_PATH": "/app/report.json"}
    kv = record(imported, "kv_service")
    assert kv["entrypoint"] == '["/opt/kv/entrypoint.sh"]' and "8765/health" in kv["healthcheck"]["command"]
    assert any("ENTRYPOINT" in w and "again as the verifier's" in w for w in kv["warnings"])
    script = json.loads((imported / "kv_service" / "tests" / "session.json").read_text())["script"]
    assert script["entrypoint"] == ["/opt/kv/entrypoint.sh"] and script["health_s"] == 11.0  # 10 retries, 1 s apart
    assert fix_git["bases"] == ["base"] and fix_git["base_map"] == OFFLINE
    assert fix_git["workdir"] == "/app/repo"


def test_the_content_hash_is_stable_and_covers_the_task(imported: Path, tmp_path: Path) -> None:
    first = images.content_hash("csv_report")
    import_task(TASKS / "csv-report", imported, base_map=OFFLINE, force=True)
    images.content_hash.cache_clear()
    assert images.content_hash("csv_report") == first  # importing again changes nothing
    copy = tmp_path / "task" / "csv-report"
    shutil.copytree(TASKS / "csv-report", copy)
    (copy / "tests" / "test_outputs.py").write_text("def test_nothing():\n    pass\n")
    import_task(copy, imported, base_map=OFFLINE, force=True)
    images.content_hash.cache_clear()
    assert images.content_hash("csv_report") != first


def test_bake_builds_from_the_tasks_context_with_the_runner_and_tests_as_named_contexts(
        imported: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    target = harbor_target("csv_report", imported / "csv_report", Path("/r/deepgym/runner"))
    assert f'context    = "{imported / "csv_report" / "environment"}"' in target
    assert f'dockerfile = "{imported / "csv_report" / "Dockerfile"}"' in target
    assert 'deepgym_runner = "/r/deepgym/runner"' in target and f'{imported / "csv_report" / "tests"}"' in target
    assert 'labels     = environment_labels("csv_report")' in target and "inherits" not in target
    checked = []
    monkeypatch.setattr(bases, "check_bases", lambda name, path: checked.append(name) or [])
    assert images._extra_target(Path("/r"), "csv_report", io.StringIO()) == target
    assert checked == ["csv_report"]


def test_a_base_image_that_cannot_be_had_stops_the_build_with_the_fix(tmp_path: Path) -> None:
    env = import_task(TASKS / "fix-git", tmp_path / "envs").path
    assert bases.check_bases("fix_git", env, has_image=lambda ref: True, pull=lambda ref: (False, "")) == []
    assert bases.check_bases("fix_git", env, has_image=lambda ref: False,
                             pull=lambda ref: (True, "")) == ["debian:bookworm-slim"]
    with pytest.raises(ImageBuildError) as caught:
        bases.check_bases("fix_git", env, has_image=lambda ref: False, pull=lambda ref: (False, "denied"))
    said = str(caught.value)
    assert said.startswith("fix_git: the task's base image debian:bookworm-slim is not on this engine and cannot "
                           "be pulled (denied)")
    assert "--base-map debian:bookworm-slim=LOCAL_IMAGE" in said and str(TASKS / "fix-git") in said
    assert bases.recorded_bases(Path(images.__file__).parent.parent / "environments" / "two_sum") is None


def test_deepgym_base_as_a_mapped_base_is_built_not_pulled(imported: Path) -> None:
    def never(ref: str) -> bool:
        raise AssertionError(f"looked for {ref}")

    assert bases.check_bases("fix_git", imported / "fix_git", has_image=never, pull=never) == []
    assert ', base = "target:base" }' in harbor_target("fix_git", imported / "fix_git", Path("/r"))
    unmapped = import_task(TASKS / "fix-git", imported.parent / "unmapped").path
    assert "target:base" not in harbor_target("fix_git", unmapped, Path("/r"))


def test_base_map_items_are_checked() -> None:
    assert bases.parse_base_map(["a:1=b:2", "c=d"]) == {"a:1": "b:2", "c": "d"}
    for bad in ("ubuntu", "=x", "a=", "a=b c"):
        with pytest.raises(ConfigurationError, match="expected FROM=TO"):
            bases.parse_base_map([bad])
    with pytest.raises(ConfigurationError, match="maps a twice"):
        bases.parse_base_map(["a=b", "a=c"])


def test_a_mapping_no_from_line_uses_is_a_warning(tmp_path: Path) -> None:
    result = import_task(TASKS / "hello-world", tmp_path, base_map={**OFFLINE, "ubuntu:24.04": "x"})
    assert any("--base-map: ubuntu:24.04 named by no FROM line" in w for w in result.warnings)


def test_the_cli_imports_and_refuses_all_or_nothing(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    into = tmp_path / "envs"
    assert main(["harbor", "import", str(TASKS / "hello-world"), str(TASKS / "fix-git"), "--into", str(into)]) == 0
    out, err = capsys.readouterr()
    assert out.splitlines() == [f"hello_world\t{into / 'hello_world'}", f"fix_git\t{into / 'fix_git'}"]
    assert "fix-git: verifier.user" in err and "DEEPGYM_ENVIRONMENTS" in err
    bad = tmp_path / "gpu-task"
    shutil.copytree(TASKS / "word-count", bad)
    toml = (bad / "task.toml").read_text()
    (bad / "task.toml").write_text(toml.replace("[environment]\n", "[environment]\ngpus = 1\n"))
    fresh = tmp_path / "fresh"
    assert main(["harbor", "import", str(TASKS / "hello-world"), str(bad), "--into", str(fresh)]) == 2
    assert "environment.gpus" in capsys.readouterr().err and not fresh.exists()
    # an earlier import is replaced only with --force; a folder deepgym did not write never is
    assert main(["harbor", "import", str(TASKS / "hello-world"), "--into", str(into)]) == 2
    assert "pass --force" in capsys.readouterr().err
    assert main(["harbor", "import", str(TASKS / "hello-world"), "--into", str(into), "--force"]) == 0
    (into / "hello_world" / "harbor.json").unlink()
    assert main(["harbor", "import", str(TASKS / "hello-world"), "--into", str(into), "--force"]) == 2
    assert "was not written by deepgym harbor import" in capsys.readouterr().err


def test_terminal_fresh_gives_a_shell_per_action_for_providers_that_keep_no_stream(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Harbor's persistent terminal needs a stream kept open (docker only); --terminal fresh writes the same
    environment with a fresh shell per action, which every provider that runs sessions has."""
    into = tmp_path / "envs"
    assert main(["harbor", "import", str(TASKS / "hello-world"), "--into", str(into), "--terminal", "fresh"]) == 0
    fresh = parse_manifest(into / "hello_world" / "manifest.yaml")
    assert (fresh.session.terminal, fresh.session.verifier, fresh.session.workspace) == ("fresh", "script", "/app")
    assert import_task(TASKS / "hello-world", tmp_path / "default").path.joinpath("manifest.yaml").read_text() \
        == (into / "hello_world" / "manifest.yaml").read_text().replace("terminal: fresh", "terminal: persistent")
    with pytest.raises(ConfigurationError, match="--terminal 'tmux' is not an action channel"):
        import_task(TASKS / "hello-world", tmp_path / "other", terminal="tmux")
    with pytest.raises(SystemExit):
        main(["harbor", "import", str(TASKS / "hello-world"), "--into", str(into), "--terminal", "tmux"])
    assert "invalid choice: 'tmux'" in capsys.readouterr().err


def test_two_tasks_with_one_name_are_refused_before_anything_is_written(tmp_path: Path) -> None:
    twin = tmp_path / "other" / "hello_world"
    shutil.copytree(TASKS / "hello-world", twin)
    with pytest.raises(ConfigurationError, match="would be written to"):
        import_tasks([TASKS / "hello-world", twin], tmp_path / "envs")
    assert not (tmp_path / "envs").exists()


def test_the_cli_loads_no_importer_until_the_command_runs() -> None:
    code = "import sys, deepgym.cli; sys.exit('deepgym.harbor.importer' in sys.modules)"
    assert subprocess.run([sys.executable, "-c", code]).returncode == 0


@pytest.mark.filterwarnings("ignore:deepgym local mode:RuntimeWarning")
def test_a_mode_that_cannot_mount_the_tasks_folders_refuses_it_with_the_fix(imported: Path) -> None:
    from deepgym import DeepGym

    with DeepGym(mode="local", allow_local=True) as local:
        with pytest.raises(ValueError, match=r"needs folders of its own.*/app.*script.*Use mode='docker', or a "
                                             r"provider whose sandboxes have a writable root"):
            local.session("hello_world")


@pytest.mark.parametrize("mode", ["daytona", "e2b", "modal", "apple"])
def test_a_remote_provider_refuses_a_persistent_terminal_or_a_verifiers_network_with_the_fix(
        mode: str, tmp_path: Path) -> None:
    """A remote sandbox keeps no stream open and cannot attach a network later: the task as Harbor wrote it is
    refused with --terminal fresh as the fix, and a verifier that asks for a network is docker's only. (Their
    folders they make: tests/providers/test_harbor_remote.py judges a task on each.)"""
    import importlib.util

    from deepgym import DeepGym
    from support import unavailable

    if mode != "apple" and importlib.util.find_spec(mode) is None:
        unavailable(f"not run: {mode} not installed (pip install 'deepgym[{mode}]')")
    persistent = import_task(TASKS / "hello-world", tmp_path / "persistent").path
    task = tmp_path / "net-task"
    shutil.copytree(TASKS / "hello-world", task)
    toml = task / "task.toml"
    toml.write_text(toml.read_text().replace("[verifier]\n", '[verifier]\nnetwork_mode = "public"\n'))
    online = import_task(task, tmp_path / "online", terminal="fresh").path
    with DeepGym(mode=mode) as gym:
        with pytest.raises(ValueError, match="persistent terminal.*import it again with --terminal fresh"):
            gym.session(parse_manifest(persistent / "manifest.yaml"))
        with pytest.raises(ValueError, match=f"verifier asks for a network.*mode='{mode}' cannot attach"):
            gym.session(parse_manifest(online / "manifest.yaml"))


def test_a_verifier_that_asks_for_a_network_is_recorded_and_refused_where_none_can_be_attached(
        tmp_path: Path) -> None:
    """A provider that cannot attach a network to a running sandbox never judges such a task: offline, a test.sh
    that needs the network would score the agent 0 for the infrastructure's gap (issue 26, item 2).
    tests/harbor/test_network.py judges one with the network, on docker."""
    from deepgym import DeepGym

    task = tmp_path / "net-task"
    shutil.copytree(TASKS / "hello-world", task)
    toml = task / "task.toml"
    toml.write_text(toml.read_text().replace("[verifier]\n", '[verifier]\nnetwork_mode = "public"\n'))
    env = import_task(task, tmp_path / "envs").path
    assert json.loads((env / "harbor.json").read_text())["verifier"]["network"] is True
    assert json.loads((env / "tests" / "session.json").read_text())["script"]["network"] is True
    with pytest.warns(RuntimeWarning), DeepGym(mode="local", allow_local=True) as local, \
            pytest.raises(ValueError) as refused:
        local.session(parse_manifest(env / "manifest.yaml"))
    said = str(refused.value)
    assert said.startswith("net_task's verifier asks for a network") and "mode='local' cannot attach" in said
    assert "Use mode='docker'" in said and "network_mode = \"no-network\"" in said
