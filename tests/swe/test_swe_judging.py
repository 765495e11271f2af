"""SWE-style instances judged single-turn on their own images (deepgym/swe.py, deepgym/swe_images.py,
deepgym/runner/kinds/swe.py), against the real engine."""

from __future__ import annotations

import subprocess
import sys

import pytest

from deepgym import NoVerdictError
from deepgym.images import image_name
from deepgym.swe import layer_id, swe_task

pytestmark = pytest.mark.docker


def fenced(diff: str) -> str:
    return f"Here is the fix.\n\n```diff\n{diff}```\n"


def test_gold_patch_scores_one_with_each_test_reported(gym, swe_rows):
    for name, row in swe_rows.items():
        verdict = gym.run(swe_task(row), fenced(row["patch"]))
        assert verdict.score == 1.0 and verdict.passed, (name, verdict.details)
        listed = row["FAIL_TO_PASS"] + row["PASS_TO_PASS"]
        assert [case.id for case in verdict.cases] == listed, name
        assert all(case.passed for case in verdict.cases)
        assert {case.input for case in verdict.cases} == {"fail_to_pass", "pass_to_pass"}


def test_empty_patch_scores_zero(gym, swe_rows):
    row = swe_rows["calc"]
    verdict = gym.run(swe_task(row), "I could not find the bug.")
    assert verdict.score == 0.0 and verdict.error_type == "invalid_patch"


def test_unfixed_tree_fails_the_fail_to_pass_tests(gym, swe_rows):
    """A patch that changes nothing the tests see: the FAIL_TO_PASS tests fail, PASS_TO_PASS ones still pass."""
    row = swe_rows["calc"]
    readme = ("diff --git a/README.md b/README.md\n--- a/README.md\n+++ b/README.md\n@@ -1 +1,2 @@\n"
              " # calc\n+Notes.\n")
    verdict = gym.run(swe_task(row), fenced(readme))
    assert verdict.score == 0.0 and verdict.error_type == "tests_failed"
    assert {case.id: case.passed for case in verdict.cases} == {"tests/test_ops.py::test_add": False,
                                                                "tests/test_ops.py::test_mul": True}


def test_breaking_a_pass_to_pass_test_scores_zero_and_partial_gives_the_fraction(gym, swe_rows):
    row = swe_rows["calc"]
    diff = ("diff --git a/calc/ops.py b/calc/ops.py\n--- a/calc/ops.py\n+++ b/calc/ops.py\n"
            "@@ -1,6 +1,6 @@\n def add(a, b):\n-    return a - b\n+    return a + b\n \n \n def mul(a, b):\n"
            "-    return a * b\n+    return a + b\n")
    verdict = gym.run(swe_task(row), fenced(diff))
    assert verdict.score == 0.0 and not verdict.passed and verdict.error_type == "tests_failed"
    assert {case.id: case.passed for case in verdict.cases} == {"tests/test_ops.py::test_add": True,
                                                                "tests/test_ops.py::test_mul": False}
    partial = gym.run(swe_task(row, {"scoring": "partial"}), fenced(diff))
    assert partial.score == 0.5


def test_a_patch_editing_the_tests_is_tampering(gym, swe_rows):
    row = swe_rows["calc"]
    cheat = ("diff --git a/tests/test_ops.py b/tests/test_ops.py\n--- a/tests/test_ops.py\n+++ b/tests/test_ops.py\n"
             "@@ -1,5 +1,5 @@\n from calc.ops import mul\n \n \n def test_mul():\n-    assert mul(3, 4) == 12\n"
             "+    assert True\n")
    verdict = gym.run(swe_task(row), fenced(row["patch"] + cheat))
    assert verdict.score == 0.0 and verdict.error_type == "test_infra_tampering"
    conftest = ("diff --git a/conftest.py b/conftest.py\nnew file mode 100644\n--- /dev/null\n+++ b/conftest.py\n"
                "@@ -0,0 +1 @@\n+import pytest\n")
    assert gym.run(swe_task(row), fenced(conftest)).error_type == "test_infra_tampering"


def test_parametrised_ids_with_spaces_and_brackets_match_exactly(gym, swe_rows):
    row = swe_rows["slug"]
    verdict = gym.run(swe_task(row, {"scoring": "partial"}), fenced(row["patch"]))
    assert {case.id for case in verdict.cases} == {"test_slug.py::test_slugify[two words]",
                                                   "test_slug.py::test_slugify[with [brackets] too]",
                                                   "test_slug.py::test_slugify[x]", "test_shout.py::test_shout"}
    assert verdict.score == 1.0
    # An id that differs only in a space is another test: not run, so not passed.
    near = dict(row, FAIL_TO_PASS=["test_slug.py::test_slugify[two  words]"])
    missed = gym.run(swe_task(near), fenced(row["patch"]))
    assert missed.score == 0.0 and missed.cases[0].actual == "not run"


def test_test_cmd_repo_dir_and_an_older_base_commit(gym, swe_rows):
    """The stock image keeps its repository in /work/stock at a commit after base_commit, and names its own
    test command: the tree is taken at base_commit and the command's -rA summary is read."""
    row = swe_rows["stock"]
    assert gym.run(swe_task(row), fenced(row["patch"])).score == 1.0
    assert gym.run(swe_task(row), fenced("--- a/x\n+++ b/x\n")).score == 0.0


def test_a_missing_instance_image_is_image_missing(gym, swe_rows):
    row = dict(swe_rows["calc"], image_name="localhost:1/deepgym-no-such-instance:never")
    with pytest.raises(NoVerdictError) as raised:
        gym.run(swe_task(row), fenced(row["patch"]))
    assert raised.value.error_type == "image_missing"


def test_an_instance_image_that_cannot_start_has_no_verdict(gym, swe_rows):
    """An instance image without python3: the layer builds, its sandbox cannot run the runner."""
    tag = image_name("swe-fixture-nopython")
    subprocess.run(["docker", "build", "-q", "-t", tag, "-"], check=True, capture_output=True, text=True,
                   input="FROM deepgym/debian-bootstrap:bookworm\nRUN mkdir /testbed\n")
    try:
        row = dict(swe_rows["calc"], image_name=tag)
        with pytest.raises(NoVerdictError) as raised:
            gym.run(swe_task(row), fenced(row["patch"]))
        # tini, the sandbox's init, cannot exec the runner: the runner ends without a report.
        assert raised.value.error_type == "verifier_error" and "python3" in raised.value.reason
    finally:
        subprocess.run(["docker", "image", "rm", "-f", tag, image_name(layer_id(tag))], capture_output=True)


def test_images_layer_command_builds_the_layer_ahead_of_use(swe_rows):
    tag = swe_rows["slug"]["image_name"]
    done = subprocess.run([sys.executable, "-m", "deepgym.cli", "images", "layer", tag], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == [image_name(layer_id(tag))]
