"""The public surface: the names other tools depend on, and a cheap `import deepgym`."""

import subprocess
import sys

import deepgym


def test_public_names():
    assert sorted(deepgym.__all__) == ["BatchResult", "DeepGym", "DeepGymError", "Environment", "NoVerdictError",
                                       "Verdict", "list_environments", "load_environment"]
    for name in deepgym.__all__:
        assert getattr(deepgym, name) is not None
    from deepgym import DeepGym, NoVerdictError, load_environment  # noqa: F401 - the documented import

    assert issubclass(deepgym.NoVerdictError, deepgym.DeepGymError)


def test_import_is_cheap():
    code = "import sys, deepgym; print(' '.join(sorted(m for m in ('docker', 'yaml', 'verl', 'torch', 'requests', 'ray') if m in sys.modules)))"
    loaded = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    assert loaded == []
