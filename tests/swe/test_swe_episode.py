"""SWE-style instances as episodes: the agent works in the repository through the persistent terminal, and its
final diff against base_commit is graded as a single-turn diff (deepgym/session/swe.py,
deepgym/runner/episode/swe.py), against the real engine."""

from __future__ import annotations

import pytest

from deepgym.session.swe import SweSession
from deepgym.swe import swe_task

pytestmark = pytest.mark.docker


def test_an_episode_that_fixes_the_bug_through_the_terminal_scores_one(gym, swe_rows):
    row = swe_rows["calc"]
    with gym.session(swe_task(row)) as session:
        assert isinstance(session, SweSession)
        first = session.start()
        assert row["problem_statement"] in first.text
        assert "calc" in session.step("ls").observation.text
        session.step("git log --oneline | head -3")
        session.step("sed -i 's/return a - b/return a + b/' calc/ops.py")
        verdict = session.score()
    assert verdict.score == 1.0 and verdict.passed, verdict.details
    assert {case.id: case.passed for case in verdict.cases} == {"tests/test_ops.py::test_add": True,
                                                                "tests/test_ops.py::test_mul": True}


def test_an_episode_at_an_older_base_commit_edits_nothing_and_scores_zero(gym, swe_rows):
    """The stock image's HEAD is after base_commit: the workspace starts at base_commit (its later file is
    absent), and a workspace left unchanged has an empty diff, a scored 0."""
    row = swe_rows["stock"]
    with gym.session(swe_task(row)) as session:
        session.start()
        listing = session.step("ls; git rev-parse HEAD").observation.text
        assert "NOTES.md" not in listing and row["base_commit"] in listing
        verdict = session.score()
    assert verdict.score == 0.0 and verdict.error_type == "invalid_patch"


def test_an_episode_that_edits_the_tests_is_tampering(gym, swe_rows):
    row = swe_rows["calc"]
    with gym.session(swe_task(row)) as session:
        session.start()
        session.step("sed -i 's/return a - b/return a + b/' calc/ops.py && echo 'X = 1' >> tests/test_ops.py")
        verdict = session.score()
    assert verdict.score == 0.0 and verdict.error_type == "test_infra_tampering"


@pytest.mark.parametrize("damage", [
    "rm -rf .git",
    "chmod 000 .git",
    "echo garbage > .git/index",
    "echo garbage > .git/HEAD",
    "printf '* filter=x\\n' > .gitattributes && git config filter.x.clean false && git config filter.x.required true",
])
def test_an_agent_that_breaks_the_repositorys_git_scores_zero_never_no_verdict(gym, swe_rows, damage):
    """The final diff is taken by the agent's own git in the agent's workspace: whatever the agent did to it is
    the agent's doing, so a diff that cannot be taken is a scored 0, not an infrastructure failure."""
    row = swe_rows["calc"]
    with gym.session(swe_task(row)) as session:
        session.start()
        session.step(f"sed -i 's/return a - b/return a + b/' calc/ops.py && {damage}")
        verdict = session.score()
    assert verdict.has_verdict and verdict.score == 0.0 and not verdict.passed, verdict.to_dict()


def test_the_agents_git_config_cannot_point_the_final_diff_elsewhere(gym, swe_rows):
    """A core.worktree the agent set would make `git add -A` sweep another folder (here, the whole file system):
    the final diff is taken of the workspace, whatever the repository's config says."""
    row = swe_rows["calc"]
    with gym.session(swe_task(row)) as session:
        session.start()
        session.step("sed -i 's/return a - b/return a + b/' calc/ops.py && git config core.worktree /")
        verdict = session.score()
    assert verdict.score == 1.0 and verdict.passed, verdict.to_dict()
