"""Patch probes are generated, not typed: each environment's committed tests/probes.json is exactly what its
generator computes from the reference fix, and the generator's rules hold (deepgym/probes.py)."""

import importlib.util
import json

import pytest

from deepgym.environments import list_environments, load_environment
from deepgym.probes import compute

PATCH_ENVS = [name for name in list_environments() if load_environment(name).kind == "patch"]


def generator(env):
    spec = importlib.util.spec_from_file_location(f"make_probes_{env.id}", env.path / "generator" / "make_probes.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("name", PATCH_ENVS)
def test_committed_probes_are_what_the_generator_computes(name):
    env = load_environment(name)
    module = generator(env)
    content, report = compute(env.path, module.SETUP.lstrip("\n"), module.PROBES)
    assert content == json.loads((env.tests_dir / "probes.json").read_text()), \
        f"run python3 environments/{name}/generator/make_probes.py"
    wrong = [label for label, failed in report if label.startswith("wrong_")]
    assert wrong and all(failed for _, failed in report), "every known-wrong fix fails a probe"
