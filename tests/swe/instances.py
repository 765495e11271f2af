"""Small SWE-style instances made by the tests: a Python repository with git history, a bug, its fix (the gold
patch) and the tests the fix makes pass (the test patch), baked into an instance image on top of deepgym's
local Debian base image (deepgym-base, which has python3, pytest, git and patch), as SWE-bench images hold
their repository in /testbed.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from deepgym.images import image_name


@dataclass
class Spec:
    """An instance's repository: files at the base commit, later commits of the image's history, the fix and
    the tests the fix needs."""

    name: str
    base: dict[str, str]
    fix: dict[str, str]
    new_tests: dict[str, str]
    fail_to_pass: list[str]
    pass_to_pass: list[str]
    repo_dir: str = "/testbed"
    test_cmd: str | None = None
    later: dict[str, str] = field(default_factory=dict)  # a commit after base_commit, so HEAD is not the base


CALC = Spec(
    name="calc",
    base={"calc/__init__.py": "", "calc/ops.py": "def add(a, b):\n    return a - b\n\n\ndef mul(a, b):\n    return a * b\n",
          "tests/__init__.py": "",
          "tests/test_ops.py": "from calc.ops import mul\n\n\ndef test_mul():\n    assert mul(3, 4) == 12\n"},
    fix={"calc/ops.py": "def add(a, b):\n    return a + b\n\n\ndef mul(a, b):\n    return a * b\n"},
    new_tests={"tests/test_ops.py": "from calc.ops import add, mul\n\n\ndef test_mul():\n    assert mul(3, 4) == 12\n\n\n"
                                    "def test_add():\n    assert add(2, 3) == 5\n"},
    fail_to_pass=["tests/test_ops.py::test_add"], pass_to_pass=["tests/test_ops.py::test_mul"])

SLUG = Spec(
    name="slug",
    base={"slug.py": "def slugify(text):\n    return text.lower()\n\n\ndef shout(text):\n    return text.upper()\n",
          "test_shout.py": "from slug import shout\n\n\ndef test_shout():\n    assert shout('a') == 'A'\n"},
    fix={"slug.py": "def slugify(text):\n    return '-'.join(text.lower().replace('[', '').replace(']', '').split())\n\n\n"
                    "def shout(text):\n    return text.upper()\n"},
    new_tests={"test_slug.py": "import pytest\n\nfrom slug import slugify\n\n\n"
                               "@pytest.mark.parametrize('text, want', [('Hello World', 'hello-world'), "
                               "('[a] b', 'a-b'), ('x', 'x')], ids=['two words', 'with [brackets] too', 'x'])\n"
                               "def test_slugify(text, want):\n    assert slugify(text) == want\n"},
    fail_to_pass=["test_slug.py::test_slugify[two words]", "test_slug.py::test_slugify[with [brackets] too]"],
    pass_to_pass=["test_slug.py::test_slugify[x]", "test_shout.py::test_shout"])

STOCK = Spec(
    name="stock",
    base={"stock/__init__.py": "", "stock/shelf.py": "def total(items):\n    return sum(items[1:])\n\n\n"
                                                      "def count(items):\n    return len(items)\n",
          "tests/test_shelf.py": "from stock.shelf import count\n\n\ndef test_count():\n    assert count([1, 2]) == 2\n"},
    fix={"stock/shelf.py": "def total(items):\n    return sum(items)\n\n\ndef count(items):\n    return len(items)\n"},
    new_tests={"tests/test_total.py": "from stock.shelf import total\n\n\ndef test_total():\n"
                                      "    assert total([1, 2, 3]) == 6\n"},
    fail_to_pass=["tests/test_total.py::test_total"], pass_to_pass=["tests/test_shelf.py::test_count"],
    repo_dir="/work/stock", test_cmd="python3 -m pytest -rA -p no:cacheprovider tests",
    later={"NOTES.md": "a commit after the instance's base commit\n"})

SPECS = (CALC, SLUG, STOCK)


# Fixed authors and dates: the same repository, commit hashes included, in every test session, so that two
# sessions on one engine (which share the images' tags) agree on each instance's base_commit.
GIT_ENV = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@t", "GIT_AUTHOR_DATE": "2026-01-01T00:00:00Z",
           "GIT_COMMITTER_DATE": "2026-01-01T00:00:00Z"}


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, text=True,
                          env=GIT_ENV).stdout


def _write(repo: Path, files: dict[str, str]) -> None:
    for path, text in files.items():
        (repo / path).parent.mkdir(parents=True, exist_ok=True)
        (repo / path).write_text(text)


def _diff(repo: Path, files: dict[str, str]) -> str:
    """The diff that writes ``files`` over the base commit (left in the work tree undone)."""
    _write(repo, files)
    _git(repo, "add", "-A")
    diff = _git(repo, "diff", "--cached")
    _git(repo, "reset", "-q", "--hard")
    _git(repo, "clean", "-qfd")
    return diff


FIXTURE_LABEL = "org.deepgym.test-fixture"


def _inspect(image: str, template: str) -> str:
    found = subprocess.run(["docker", "image", "inspect", "-f", template, image], capture_output=True, text=True)
    return found.stdout.strip() if found.returncode == 0 else ""


def build_instance(spec: Spec, folder: Path, tag: str, base_image: str) -> dict[str, Any]:
    """Make ``spec``'s repository under ``folder``, bake it into an instance image named ``tag``, and return the
    instance's SWE-bench row."""
    repo = folder / spec.name
    repo.mkdir(parents=True)
    _git(repo, "init", "-q", "-b", "main")
    _write(repo, {"README.md": f"# {spec.name}\n"})
    _git(repo, "add", "-A")
    _git(repo, "commit", "-qm", "start")
    _write(repo, spec.base)
    _git(repo, "add", "-A")
    _git(repo, "commit", "-qm", "the code, with its bug")
    base_commit = _git(repo, "rev-parse", "HEAD").strip()
    gold = _diff(repo, spec.fix)
    test_patch = _diff(repo, spec.new_tests)
    if spec.later:
        _write(repo, spec.later)
        _git(repo, "add", "-A")
        _git(repo, "commit", "-qm", "later work")
    # Built only when the tag holds another repository or base: the layers deepgym made on it stay current.
    base_id = _inspect(base_image, "{{.Id}}")
    made_of = hashlib.sha256(repr((spec, base_id)).encode()).hexdigest()[:16]
    dockerfile = (f"FROM {base_image}\nCOPY {spec.name} {spec.repo_dir}\nWORKDIR {spec.repo_dir}\n"
                  f"LABEL {FIXTURE_LABEL}={made_of}\nENTRYPOINT []\nCMD [\"sleep\", \"infinity\"]\n")
    (folder / f"{spec.name}.Dockerfile").write_text(dockerfile)
    if _inspect(tag, f'{{{{index .Config.Labels "{FIXTURE_LABEL}"}}}}') != made_of:
        subprocess.run(["docker", "build", "-q", "-t", tag, "-f", str(folder / f"{spec.name}.Dockerfile"),
                        str(folder)], check=True, capture_output=True, text=True)
    row = {"instance_id": f"deepgym__{spec.name}-1", "repo": f"deepgym/{spec.name}", "base_commit": base_commit,
           "patch": gold, "test_patch": test_patch, "FAIL_TO_PASS": spec.fail_to_pass,
           "PASS_TO_PASS": spec.pass_to_pass, "problem_statement": f"{spec.name} has a bug; fix it.",
           "image_name": tag, "created_at": "2026-12-03", "version": "1.0"}
    if spec.repo_dir != "/testbed":
        row["repo_dir"] = spec.repo_dir
    if spec.test_cmd:
        row["test_cmd"] = spec.test_cmd
    return row


_rows: dict[str, dict[str, Any]] = {}


def instance_rows(folder: Path) -> dict[str, dict[str, Any]]:
    """Every fixture instance's row by name, their images built under ``folder`` once per test session (the
    verl and TRL tests share them with tests/swe). The images stay on the engine, tagged with DEEPGYM_TAG, as
    the other test images do; so do the layers deepgym builds on them."""
    if not _rows:
        _rows.update({spec.name: build_instance(spec, folder, fixture_tag(spec.name), base_image()) for spec in SPECS})
    return dict(_rows)


def fixture_tag(name: str) -> str:
    """The instance image of fixture ``name`` under this run's DEEPGYM_TAG."""
    return image_name(f"swe-fixture-{name}")


def base_image() -> str:
    return image_name("base")
