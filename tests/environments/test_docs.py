"""The docs say what the code does: every error type and every environment, nothing stale."""

import re
from pathlib import Path

from deepgym.environments import list_environments
from deepgym.runner.protocol import ERROR_TYPES, is_scored

DOCS = Path(__file__).resolve().parents[2] / "docs"
VERDICTS = (DOCS / "verdicts.md").read_text()
ENVIRONMENTS = (DOCS / "environments.md").read_text()


def documented_types(heading: str) -> set[str]:
    section = VERDICTS.split(heading, 1)[1].split("\n\n", 2)[1]
    return set(re.findall(r"^\| `([a-z_]+)` \|", section, re.M))


def test_every_error_type_is_documented_on_its_side():
    assert documented_types("Scored (the submission's fault") == {t for t in ERROR_TYPES if is_scored(t)}
    assert documented_types("No verdict (`NoVerdictError`") == {t for t in ERROR_TYPES if not is_scored(t)}


def test_the_catalogue_table_lists_every_environment():
    table = ENVIRONMENTS.split("| kind | environments |", 1)[1].split("\n\n", 1)[0]
    assert set(re.findall(r"`([a-z0-9_]+)`", table)) == set(list_environments())
    count = re.search(r"(\d+) environments ship", ENVIRONMENTS)
    assert count and int(count.group(1)) == len(list_environments())


def test_every_error_type_is_produced_somewhere():
    """A documented outcome that no code can produce is a promise the docs cannot keep: each type must appear as
    a string literal in deepgym's own code outside the vocabulary itself."""
    package = Path(__file__).resolve().parents[2] / "deepgym"
    sources = "\n".join(path.read_text() for path in package.rglob("*.py") if path.name != "protocol.py")
    unproduced = [t for t in ERROR_TYPES if not re.search(rf"[\"']{t}[\"']", sources)]
    assert unproduced == []
