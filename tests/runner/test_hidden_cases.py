"""Hidden cases stored at image build (deepgym/runner/kinds/hidden_cases.py): every function environment stores them,
a sample gets exactly what ``cases()`` returns, and a stale or unstorable variant is computed at run time."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from deepgym.environments import list_environments, load_environment
from deepgym.runner.kinds import hidden_cases

ROOT = Path(__file__).resolve().parents[2]
FUNCTION_ENVS = [name for name in list_environments() if load_environment(name).kind == "function"]
TEMPLATE = ROOT / "deepgym" / "templates" / "function"


@pytest.mark.parametrize("folder", [ROOT / "environments" / name for name in FUNCTION_ENVS] + [TEMPLATE],
                         ids=lambda folder: folder.name)
def test_every_function_image_stores_every_variant_before_hiding_them(folder: Path):
    dockerfile = (folder / "Dockerfile").read_text()
    assert "python3 -I -B -m deepgym_runner.kinds.hidden_cases /opt/deepgym/env /tmp/manifest.yaml" in dockerfile
    assert "source=manifest.yaml" in dockerfile
    assert dockerfile.index("deepgym_runner.kinds.hidden_cases") < dockerfile.index("chmod -R go-rwx /opt/deepgym/env")
    manifest = (folder / "manifest.yaml").read_text()
    if folder != TEMPLATE:
        assert hidden_cases.manifest_variants(manifest) == load_environment(folder.name).variants


def _copy(tmp_path: Path, env: str) -> str:
    target = tmp_path / env
    shutil.copytree(ROOT / "environments" / env / "tests", target)
    return str(target)


def test_stored_cases_are_the_computed_ones_and_cases_py_is_not_run(tmp_path: Path):
    env_dir = _copy(tmp_path, "coin_change")
    computed = hidden_cases.load_cases_module(env_dir).cases(1)
    assert hidden_cases.bake(env_dir, 2) == 2
    cases, check, tolerance = hidden_cases.load(env_dir, 1)
    assert cases == computed and check is None and tolerance is None
    # Proof that the stored file answered: its cases are what load returns, even when edited here.
    path = Path(env_dir) / "cases-1.json"
    stored = json.loads(path.read_text())
    stored["cases"] = stored["cases"][:3]
    path.write_text(json.dumps(stored))
    assert hidden_cases.load(env_dir, 1)[0] == computed[:3]


def test_a_variant_not_stored_or_a_changed_cases_py_is_computed(tmp_path: Path):
    env_dir = _copy(tmp_path, "coin_change")
    module = hidden_cases.load_cases_module(env_dir)
    hidden_cases.bake(env_dir, 1)
    assert hidden_cases.load(env_dir, 5)[0] == module.cases(5)
    source = Path(env_dir) / "cases.py"
    source.write_text(source.read_text().replace("range(40)", "range(2)"))
    assert len(hidden_cases.load(env_dir, 0)[0]) == len(module.cases(0)) - 38


def test_a_checker_and_a_tolerance_come_from_cases_py(tmp_path: Path):
    env_dir = tmp_path / "env"
    env_dir.mkdir()
    (env_dir / "cases.py").write_text(
        "FLOAT_TOLERANCE = 1e-6\n"
        "def cases(variant):\n    return [{'id': 'a', 'args': [variant], 'expected': 0.5}]\n"
        "def check(args, expected, actual):\n    return actual == 'checked'\n")
    assert hidden_cases.bake(str(env_dir), 2) == 2
    cases, check, tolerance = hidden_cases.load(str(env_dir), 1)
    assert cases == [{"id": "a", "args": [1], "expected": 0.5}] and check(None, None, "checked") and tolerance == 1e-6


def test_cases_that_json_would_change_are_never_stored(tmp_path: Path):
    env_dir = tmp_path / "env"
    env_dir.mkdir()
    (env_dir / "cases.py").write_text(
        "def cases(variant):\n    return [{'id': 'a', 'args': [(1, 2)] if variant else [[1, 2]], 'expected': 3}]\n")
    assert hidden_cases.bake(str(env_dir), 2) == 1
    assert not (env_dir / "cases-1.json").exists()
    assert hidden_cases.load(str(env_dir), 1)[0] == [{"id": "a", "args": [(1, 2)], "expected": 3}]


def test_manifest_variants_reads_the_top_level_key_only():
    assert hidden_cases.manifest_variants("id: x\nvariants: 8  # seeded\n") == 8
    assert hidden_cases.manifest_variants("id: x\nlimits:\n  variants: 3\n") == 1
