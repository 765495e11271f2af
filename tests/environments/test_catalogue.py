"""The environment catalogue against its real images: every environment proves itself (deepgym check), every
patch environment enforces the patch rules, program tasks score what the program does, variants work."""

import subprocess
import sys

import pytest

from support import fenced, solution
from deepgym.authoring.check import check, table
from deepgym.environments import list_environments, load_environment

pytestmark = pytest.mark.docker
PATCH_ENVS = [name for name in list_environments() if load_environment(name).kind == "patch"]


def test_every_environment_passes_its_self_check(gym, built_images):
    # Desktop environments take seconds per episode: tests/session/test_desktop.py checks them once each.
    rows = check([name for name in list_environments() if load_environment(name).kind != "desktop"], gym)
    assert len(rows) >= 20 and {row.env.kind for row in rows} == {"function", "program", "patch", "session"}
    assert all(row.ok for row in rows), "\n" + table(rows)


def test_check_command_prints_a_table_and_exits_zero(built_images):
    result = subprocess.run([sys.executable, "-m", "deepgym.cli", "check", "coin_change", "patch_csv_quoting",
                             "--reruns", "1"], capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "environment" in result.stdout and "margin" in result.stdout and "2/2 environments pass" in result.stdout


def first_line(env, path: str) -> str:
    return (load_environment(env).tests_dir / "repo" / path).read_text().splitlines()[0]


def source_module(env: str) -> str:
    """A module of the repository's package (not a test), to aim diffs at."""
    repo = load_environment(env).tests_dir / "repo"
    return next(str(p.relative_to(repo)) for p in sorted(repo.glob("*/__init__.py")))


def visible_test_file(env: str) -> str:
    repo = load_environment(env).tests_dir / "repo"
    return next(str(p.relative_to(repo)) for p in sorted(repo.glob("tests/test_*.py")))


def add_lines(path: str, first: str, lines: list[str], new: bool = False) -> str:
    body = "".join(f"+{line}\n" for line in lines)
    if new:
        return (f"diff --git a/{path} b/{path}\nnew file mode 100644\n--- /dev/null\n+++ b/{path}\n"
                f"@@ -0,0 +1,{len(lines)} @@\n{body}")
    return f"diff --git a/{path} b/{path}\n--- a/{path}\n+++ b/{path}\n@@ -1,1 +1,{len(lines) + 1} @@\n{body} {first}\n"


@pytest.mark.parametrize("env", PATCH_ENVS)
def test_patch_rules(gym, env):
    module, tests = source_module(env), visible_test_file(env)
    force_pass = ["import pytest", "@pytest.hookimpl(hookwrapper=True)", "def pytest_runtest_makereport(item, call):",
                  "    outcome = yield", "    outcome.get_result().outcome = 'passed'"]
    cases = {
        "reference": (fenced(solution(env, "reference"), "diff"), 1.0, None),
        "edits a test": (fenced(add_lines(tests, first_line(env, tests), ["# harmless?"]), "diff"), 0.0,
                         "test_infra_tampering"),
        "conftest forcing passes": (fenced(solution(env, "reference") + add_lines("conftest.py", "", force_pass, new=True),
                                           "diff"), 0.0, "test_infra_tampering"),
        "os._exit(0) at import": (fenced(solution(env, "reference") + add_lines(module, first_line(env, module),
                                          ["import os", "os._exit(0)"]), "diff"), 0.0, "solution_error"),
        "wrong hunk": (fenced(f"--- a/{module}\n+++ b/{module}\n@@ -3,2 +3,2 @@\n-this line is not there\n+x = 1\n"
                              " nor is this\n", "diff"), 0.0, "patch_apply_failed"),
        "garbage": ("I would change the parser so that it handles quotes.", 0.0, "invalid_patch"),
        "malformed": (fenced(f"--- a/{module}\n+++ b/{module}\n@@ garbage @@\n+x\n", "diff"), 0.0, "invalid_patch"),
    }
    outcomes = {name: gym.judge(env, response) for name, (response, _, _) in cases.items()}
    for name, (_, score, error_type) in cases.items():
        outcome = outcomes[name]
        assert outcome.has_verdict, f"{name}: {outcome}"
        assert (outcome.score, outcome.error_type) == (score, error_type), f"{name}: {outcome.details}"


@pytest.mark.parametrize("code,error_type", [
    ("import sys\ndata = sys.stdin.buffer.read().split()\nprint(sum(map(int, data[1:])))", "wrong_answer"),
    ("import sys\nsys.stdin.read()\nprint(input())", "solution_error"),  # reading past the end of stdin
    ("import sys\nwhile True:\n    sys.stdout.write('9' * 65536)", "output_limit_exceeded"),
    ("import sys\nsys.stdin.read()\nsys.exit(3)", "solution_error"),
], ids=["wrong-output", "read-past-stdin", "huge-output", "exit-status"])
def test_program_outcomes(gym, code, error_type):
    assert gym.run("prog_max_subarray", fenced(solution("prog_max_subarray", "reference"))).score == 1.0
    verdict = gym.run("prog_max_subarray", fenced(code))
    assert (verdict.score, verdict.passed, verdict.error_type) == (0.0, False, error_type), verdict.details


def test_variants_change_the_hidden_cases_and_are_reported(gym):
    env = load_environment("coin_change")
    assert env.variants > 1
    reference = fenced(solution("coin_change", "reference"))
    first, other = gym.run(env, reference, variant=0), gym.run(env, reference, variant=env.variants - 1)
    assert first.score == other.score == 1.0 and (first.variant, other.variant) == (0, env.variants - 1)
    assert [c.input for c in first.cases if c.id.startswith("random")] != \
           [c.input for c in other.cases if c.id.startswith("random")]
    with pytest.raises(ValueError, match="out of range"):
        gym.run(env, reference, variant=env.variants)
