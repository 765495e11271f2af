"""SWE-bench-format rows: every field checked, the forms the datasets ship accepted, malformed rows refused
naming the field (deepgym/swe.py). No engine needed."""

from __future__ import annotations

import json

import pytest

from deepgym.errors import ConfigurationError
from deepgym.runner.kinds.swe import pytest_log
from deepgym.swe import DEFAULT_REPO_DIR, SWE_LIMITS, instance, layer_id, swe_task

ROW = {"instance_id": "acme__widget-12", "repo": "acme/widget", "base_commit": "a" * 40, "patch": "diff --git a/x b/x\n",
       "test_patch": "", "FAIL_TO_PASS": ["tests/test_a.py::test_one"], "PASS_TO_PASS": [],
       "problem_statement": "Widgets break.", "image_name": "acme/widget:12"}


def test_lists_or_json_strings_of_lists_and_both_image_field_names():
    as_lists = instance(ROW)
    as_text = instance(dict(ROW, FAIL_TO_PASS=json.dumps(ROW["FAIL_TO_PASS"]), PASS_TO_PASS="[]",
                            image_name=None, docker_image="acme/widget:12"))
    assert as_lists == as_text
    assert as_lists.fail_to_pass == ("tests/test_a.py::test_one",) and as_lists.pass_to_pass == ()
    assert as_lists.repo_dir == DEFAULT_REPO_DIR and as_lists.test_cmd is None


def test_unknown_fields_are_kept_and_ignored():
    spec = instance(dict(ROW, created_at="2024-01-01", environment_setup_commit="b" * 40))
    assert spec.extra == {"created_at": "2024-01-01", "environment_setup_commit": "b" * 40}
    assert swe_task(dict(ROW, hints_text="none")).tests == swe_task(ROW).tests


def test_task_carries_the_instance_to_the_runner_and_its_options():
    task = swe_task(json.dumps(dict(ROW, test_cmd="pytest -rA", repo_dir="/src/widget")), {"scoring": "partial",
                                                                                           "case_cpu_s": 30})
    assert task.environment.kind == "swe" and task.environment.instance_image == "acme/widget:12"
    assert task.environment.id == layer_id("acme/widget:12") and task.environment.scoring == "partial"
    assert task.environment.limits == SWE_LIMITS.replace(case_cpu_s=30.0)
    assert task.tests == {"repo_dir": "/src/widget", "base_commit": "a" * 40, "test_patch": "",
                          "fail_to_pass": ["tests/test_a.py::test_one"], "pass_to_pass": [], "test_cmd": "pytest -rA"}
    assert layer_id("acme/widget:12") != layer_id("acme/widget:13")


@pytest.mark.parametrize("change, field", [
    ({"FAIL_TO_PASS": "[not json"}, "FAIL_TO_PASS"),
    ({"FAIL_TO_PASS": []}, "FAIL_TO_PASS"),
    ({"FAIL_TO_PASS": ["ok", 3]}, "FAIL_TO_PASS[1]"),
    ({"PASS_TO_PASS": None}, "PASS_TO_PASS"),
    ({"PASS_TO_PASS": ["tests/test_a.py::test_one"]}, "PASS_TO_PASS"),
    ({"image_name": None}, "image_name"),
    ({"image_name": "has space:1"}, "image_name"),
    ({"base_commit": "main"}, "base_commit"),
    ({"instance_id": ""}, "instance_id"),
    ({"problem_statement": 12}, "problem_statement"),
    ({"test_patch": None}, "test_patch"),
    ({"repo_dir": "testbed"}, "repo_dir"),
    ({"test_cmd": ["pytest"]}, "test_cmd"),
])
def test_malformed_rows_name_their_field(change, field):
    with pytest.raises(ConfigurationError) as raised:
        swe_task(dict(ROW, **change))
    assert str(raised.value).startswith(f"{field}:")


def test_ground_truth_that_is_no_object_and_unknown_scoring_are_refused():
    for bad, field in (("[1]", "ground_truth"), ("{", "ground_truth")):
        with pytest.raises(ConfigurationError, match=f"^{field}:"):
            swe_task(bad)
    with pytest.raises(ConfigurationError, match="^reward_kwargs.scoring:"):
        swe_task(ROW, {"scoring": "continuous"})


def test_pytest_summary_lines_match_ids_exactly():
    listed = {"t.py::test_f[a b]", "t.py::test_f[[x] y]", "t.py::test_g", "t.py::test_h"}
    output = ("PASSED t.py::test_f[a b]\nFAILED t.py::test_f[[x] y] - AssertionError: no\n"
              "PASSED t.py::test_f[a  b]\nERROR t.py::test_g - boom\nsome PASSED t.py::test_h\n")
    assert pytest_log(output, listed) == {"t.py::test_f[a b]": "passed", "t.py::test_f[[x] y]": "failed",
                                          "t.py::test_g": "error"}


@pytest.mark.docker
def test_an_swe_episode_is_refused_where_no_persistent_terminal_can_run(swe_rows):
    """A provider whose sandboxes keep no stream open (apple's, like every remote one) cannot host the episode's
    terminal: refused before any sandbox, naming what is missing and the mode that has it, with no advice about
    a manifest that an SWE row does not have."""
    from deepgym import DeepGym
    from deepgym.swe import swe_task

    with DeepGym(mode="apple") as gym:
        with pytest.raises(ValueError, match="persistent terminal whose stream stays open.*Use mode='docker'"):
            gym.session(swe_task(swe_rows["calc"]))
