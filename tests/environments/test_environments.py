"""The environment registry and manifest validation: every bad manifest gets a message naming the file, the
key and the fix; every environment folder is complete and has its bake target."""

import re
import textwrap
from pathlib import Path

import pytest

from deepgym.environments import LIMIT_RANGES, list_environments, load_environment
from deepgym.errors import EnvironmentNotFoundError, ManifestError
from deepgym.images import DESKTOP, RUNTIME_IMAGES, SERVICE_IMAGES
from deepgym.runner.protocol import Limits

ROOT = Path(__file__).resolve().parents[2]
GOOD = """\
id: {name}
kind: function
prompt: prompt.md
entry_point: f
"""


def make_env(root: Path, name: str, manifest: str, *, prompt=True, dockerfile=True, tests=True) -> Path:
    folder = root / name
    folder.mkdir(parents=True)
    (folder / "manifest.yaml").write_text(textwrap.dedent(manifest).replace("{name}", name))
    if prompt:
        (folder / "prompt.md").write_text("Write f.")
    if dockerfile:
        (folder / "Dockerfile").write_text("FROM base\n")
    if tests:
        (folder / "tests").mkdir()
        (folder / "tests" / "cases.py").write_text("def cases(variant):\n    return []\n")
    return folder


@pytest.fixture
def extra_root(tmp_path, monkeypatch):
    monkeypatch.setenv("DEEPGYM_ENVIRONMENTS", str(tmp_path))
    return tmp_path


def test_a_good_extra_environment_loads(extra_root):
    make_env(extra_root, "mine", GOOD + "limits: {case_cpu_s: 0.5, memory_mb: 256}\ntags: [x]\n")
    env = load_environment("mine")
    assert env.kind == "function" and env.entry_point == "f" and env.scoring == "all_or_nothing"
    assert env.limits == Limits(case_cpu_s=0.5, memory_mb=256) and env.tags == ("x",)
    assert "mine" in list_environments()


@pytest.mark.parametrize("manifest,key,words", [
    (GOOD + "colour: blue\n", "colour", "unknown key"),
    ("kind: function\nprompt: prompt.md\nentry_point: f\n", "id", "is missing"),
    (GOOD.replace("id: {name}", "id: other_name"), "id", "differs from the folder name"),
    (GOOD.replace("id: {name}", "id: Bad-Name"), "id", "not a valid name"),
    (GOOD.replace("kind: function", "kind: essay"), "kind", "not a known kind"),
    (GOOD.replace("entry_point: f", "entry_point: 2fast"), "entry_point", "not a Python function name"),
    (GOOD + "scoring: vibes\n", "scoring", "not a known scoring"),
    (GOOD + "difficulty: extreme\n", "difficulty", "is not known"),
    (GOOD + "tags: one\n", "tags", "list of strings"),
    (GOOD + "limits: {case_cpu_s: 5000}\n", "limits.case_cpu_s", "out of range"),
    (GOOD + "limits: {memory_mb: 1.5}\n", "limits.memory_mb", "must be an integer"),
    (GOOD + "limits: {case_cpu_s: fast}\n", "limits.case_cpu_s", "must be a number"),
    (GOOD + "limits: {disk_gb: 1}\n", "limits.disk_gb", "unknown limit"),
    (GOOD + "limits: {case_cpu_s: 5, total_cpu_s: 2}\n", "limits.total_cpu_s", "below case_cpu_s"),
    (GOOD + "limits: [1, 2]\n", "limits", "must be a mapping"),
    (GOOD + "isolation: vm\n", "isolation", "not a known isolation"),
    ("id: [unclosed\n", "(file)", "not valid YAML"),
    ("- a list\n", "(file)", "must be a mapping"),
])
def test_bad_manifests_name_file_key_and_fix(extra_root, manifest, key, words):
    make_env(extra_root, "bad_env", manifest)
    with pytest.raises(ManifestError) as info:
        load_environment("bad_env")
    message = str(info.value)
    assert info.value.key == key and words in message
    assert str(extra_root / "bad_env" / "manifest.yaml") in message and "Fix:" in message


@pytest.mark.parametrize("missing", ["prompt", "dockerfile", "tests"])
def test_missing_files_are_named(extra_root, missing):
    make_env(extra_root, "incomplete", GOOD, **{missing: False})
    with pytest.raises(ManifestError, match="does not exist"):
        load_environment("incomplete")


def test_duplicate_ids_across_folders(extra_root):
    make_env(extra_root, "coin_change", GOOD)
    with pytest.raises(ManifestError, match="also defined by"):
        list_environments()


def test_unknown_environment_lists_the_known_ones():
    with pytest.raises(EnvironmentNotFoundError) as info:
        load_environment("coin_chnage")
    assert "Did you mean 'coin_change'" in str(info.value) and "coin_change" in info.value.known
    assert isinstance(info.value, LookupError)


def test_every_limit_has_a_range():
    assert set(LIMIT_RANGES) == set(Limits.FIELDS)


@pytest.mark.parametrize("name", list_environments())
def test_every_environment_is_complete(name):
    env = load_environment(name)
    solutions = env.solutions()
    assert "reference" in solutions, f"{name} has no solutions/reference.*"
    assert len([s for s in solutions if s.startswith("wrong_")]) >= 2, f"{name} needs two known-wrong solutions"
    assert env.prompt.strip()
    dockerfile = (env.path / "Dockerfile").read_text()
    base = "desktop" if env.kind == "desktop" else "base"
    assert dockerfile.startswith(f"FROM {base}\n"), f"{env.kind} environment images build on the {base} target"
    assert "solutions" not in dockerfile, "solutions stay outside the image"


def test_bake_file_has_one_target_per_environment():
    bake = (ROOT / "docker-bake.hcl").read_text()
    targets = set(re.findall(r'^target "([a-z][a-z0-9_]*)"', bake, re.M)) - {"base", DESKTOP, *SERVICE_IMAGES,
                                                                              *RUNTIME_IMAGES}
    group = re.search(r'group "environments" \{\s*targets = \[([^\]]*)\]', bake).group(1)
    listed = set(re.findall(r'"([a-z0-9_]+)"', group))
    environments = set(list_environments())
    assert targets == environments, "add or remove a target in docker-bake.hcl"
    assert listed == environments, "list every environment in the bake group 'environments'"
    for name in environments:
        block = re.search(r'target "%s" \{(.*?)\n\}' % name, bake, re.S).group(1)
        assert f'context  = "environments/{name}"' in block and f'environment_labels("{name}")' in block
        desktop = load_environment(name).kind == "desktop"
        assert ('inherits = ["_desktop"]' in block) == desktop, f"{name}: a desktop environment builds on _desktop"
    desktops = set(re.findall(r'"([a-z0-9_]+)"', re.search(r'group "desktops" \{\s*targets = \[([^\]]*)\]', bake)[1]))
    assert desktops == {name for name in environments if load_environment(name).kind == "desktop"}


def test_bake_file_has_a_target_per_runtime_image():
    bake = (ROOT / "docker-bake.hcl").read_text()
    group = re.search(r'group "runtimes" \{\s*targets = \[([^\]]*)\]', bake).group(1)
    assert set(re.findall(r'"([a-z0-9_]+)"', group)) == set(RUNTIME_IMAGES)
    for name in RUNTIME_IMAGES:
        block = re.search(r'target "%s" \{(.*?)\n\}' % name, bake, re.S).group(1)
        assert f'context  = "images/{name}"' in block and 'inherits = ["_environment"]' in block
        assert "\nFROM base\n" in (ROOT / "images" / name / "Dockerfile").read_text()
