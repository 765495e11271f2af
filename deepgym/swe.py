"""SWE-style instances: rows in the SWE-bench format, each judged on its own instance image.

A row (a JSONL line, a parquet record, or the ``ground_truth`` of a verl row whose ``data_source`` is
``swe``) carries SWE-bench's fields:

==================  =============================================================================================
field               meaning
==================  =============================================================================================
``instance_id``     the instance's name (required)
``repo``            the repository's name, for people (optional)
``base_commit``     the commit the repository in the image is at (required, hex)
``patch``           the gold fix, a unified diff (optional: only the tests and the reference use it)
``test_patch``      the instance's new and changed tests, applied over the model's patch (required, may be "")
``FAIL_TO_PASS``    test ids that must pass after the fix (a list, or a JSON string of a list; not empty)
``PASS_TO_PASS``    test ids that must keep passing (same form; may be empty)
``problem_statement``  the issue text, the model's prompt (required)
``image_name``      the instance image (SWE-smith's name for it; ``docker_image`` is SWE-rebench's); required
``test_cmd``        a shell command that runs the tests and prints pytest's ``-rA`` summary (optional: by default
                    pytest runs the ids through deepgym's trusted plugin)
``repo_dir``        where the repository is in the image (optional, default ``/testbed``)
==================  =============================================================================================

Other fields are kept and ignored. A malformed row raises :class:`~deepgym.errors.ConfigurationError` naming the
field. Options (verl's ``reward_kwargs``): ``scoring`` (``all_or_nothing``, or ``partial``: the fraction of
listed tests passing) and the limits of :func:`deepgym.rows.row_options`, with :data:`SWE_LIMITS` as defaults.
"""

from __future__ import annotations

import hashlib
import json
import posixpath
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from .bundle import bundle_root
from .environments import Environment
from .errors import ConfigurationError
from .rows import RowTask, row_options
from .runner.protocol import Limits
from .session_limits import SessionLimits

DATA_SOURCE = "swe"
DEFAULT_REPO_DIR = "/testbed"
# A real repository's test run takes seconds to minutes and two copies of its tree sit in the sandbox's /tmp.
SWE_LIMITS = Limits(case_cpu_s=120.0, total_cpu_s=240.0, memory_mb=2048, pids=256, nofile=1024, output_kb=4096,
                    tmpfs_mb=2048, cpus=1.0)
# The episode way in (deepgym.session.swe): a persistent terminal in the repository.
SWE_SESSION = SessionLimits(max_steps=50, step_timeout_s=120.0, episode_s=1800.0, verify_timeout_s=600.0,
                            output_chars=16000, terminal="persistent")
_COMMIT = re.compile(r"^[0-9a-f]{7,64}$")
# A Docker image reference: [registry/]name[:tag][@digest], no spaces or control characters.
_IMAGE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._/:@+-]{0,511}$")


def _bad(field_name: str, problem: str, fix: str) -> ConfigurationError:
    return ConfigurationError(f"{field_name}: {problem}. Fix: {fix}")


@dataclass(frozen=True)
class SweInstance:
    """One instance, checked. ``extra`` holds the row's other fields, untouched."""

    instance_id: str
    base_commit: str
    test_patch: str
    fail_to_pass: tuple[str, ...]
    pass_to_pass: tuple[str, ...]
    problem_statement: str
    image: str
    repo: str = ""
    patch: str = ""
    test_cmd: str | None = None
    repo_dir: str = DEFAULT_REPO_DIR
    extra: Mapping[str, Any] = field(default_factory=dict, compare=False)

    @property
    def layer_id(self) -> str:
        """The name of deepgym's image on top of the instance image (one per instance image, not per instance:
        SWE-smith's instances share their repository's image)."""
        return layer_id(self.image)

    def tests(self) -> dict[str, Any]:
        """What the runner receives (deepgym/runner/kinds/swe.py)."""
        return {"repo_dir": self.repo_dir, "base_commit": self.base_commit, "test_patch": self.test_patch,
                "fail_to_pass": list(self.fail_to_pass), "pass_to_pass": list(self.pass_to_pass),
                "test_cmd": self.test_cmd}


def layer_id(image: str) -> str:
    """deepgym's image name for ``image`` with the runner layered on (``swe_`` and 12 hex digits of its name)."""
    return "swe_" + hashlib.sha256(image.encode()).hexdigest()[:12]


def _plain(value: Any) -> Any:
    """Parquet readers hand lists back as numpy arrays: make them lists again."""
    return value.tolist() if hasattr(value, "tolist") and not isinstance(value, (str, bytes)) else value


def _string(row: Mapping[str, Any], name: str, *, required: bool = True, empty: bool = False) -> str | None:
    value = _plain(row.get(name))
    if value is None and not required:
        return None
    if not isinstance(value, str):
        raise _bad(name, "is missing" if value is None else f"is a {type(value).__name__}, not a string",
                   f"give the instance's {name} as a string")
    if not empty and not value.strip():
        raise _bad(name, "is empty", f"give the instance's {name}")
    return value


def _ids(row: Mapping[str, Any], name: str, *, empty: bool) -> tuple[str, ...]:
    value = _plain(row.get(name))
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError as exc:
            raise _bad(name, f"is a string but not JSON ({exc})", "give a list of test ids, or its JSON text") from None
    if not isinstance(value, list):
        raise _bad(name, "is missing" if value is None else f"is a {type(value).__name__}, not a list",
                   "give a list of test ids, or its JSON text")
    for index, item in enumerate(value):
        if not isinstance(item, str) or not item.strip():
            raise _bad(f"{name}[{index}]", f"{item!r} is not a test id", "give each test id as a non-empty string")
    if not value and not empty:
        raise _bad(name, "is empty", "list at least one test the fix makes pass")
    if len(set(value)) != len(value):
        raise _bad(name, "lists a test id twice", "list each test once")
    return tuple(value)


def instance(row: Mapping[str, Any]) -> SweInstance:
    """The instance in ``row`` (a mapping of SWE-bench fields). Raises ConfigurationError naming the field."""
    if not isinstance(row, Mapping):
        raise _bad("row", f"is a {type(row).__name__}, not an object", "give the instance's fields as an object")
    names = [name for name in ("image_name", "docker_image") if row.get(name) is not None]
    if not names:
        raise _bad("image_name", "is missing (and so is docker_image)",
                   "name the instance's Docker image in image_name or docker_image")
    image = _string(row, names[0])
    if not _IMAGE.match(image):
        raise _bad(names[0], f"{image!r} is not a Docker image reference", "give a name such as org/repo:tag")
    base_commit = _string(row, "base_commit")
    if not _COMMIT.match(base_commit):
        raise _bad("base_commit", f"{base_commit!r} is not a commit hash", "give the hex hash of the base commit")
    repo_dir = _string(row, "repo_dir", required=False) or DEFAULT_REPO_DIR
    if not posixpath.isabs(repo_dir) or posixpath.normpath(repo_dir) != repo_dir or repo_dir == "/":
        raise _bad("repo_dir", f"{repo_dir!r} is not a normalized absolute folder", "give e.g. /testbed")
    fail_to_pass = _ids(row, "FAIL_TO_PASS", empty=False)
    pass_to_pass = _ids(row, "PASS_TO_PASS", empty=True)
    both = set(fail_to_pass) & set(pass_to_pass)
    if both:
        raise _bad("PASS_TO_PASS", f"also lists FAIL_TO_PASS's {sorted(both)[0]!r}", "list each test in one group")
    known = {"instance_id", "repo", "base_commit", "patch", "test_patch", "FAIL_TO_PASS", "PASS_TO_PASS",
             "problem_statement", "image_name", "docker_image", "test_cmd", "repo_dir"}
    return SweInstance(
        instance_id=_string(row, "instance_id"), base_commit=base_commit,
        test_patch=_string(row, "test_patch", empty=True), fail_to_pass=fail_to_pass, pass_to_pass=pass_to_pass,
        problem_statement=_string(row, "problem_statement"), image=image,
        repo=_string(row, "repo", required=False, empty=True) or "",
        patch=_string(row, "patch", required=False, empty=True) or "",
        test_cmd=_string(row, "test_cmd", required=False), repo_dir=repo_dir,
        extra={key: value for key, value in row.items() if key not in known})


PROMPT = ("{problem_statement}\n\nThe repository {repo} is checked out at commit {base_commit}. Fix the issue "
          "above. Answer with a unified diff (as `git diff` writes it, paths relative to the repository's root) in "
          "a single fenced block that starts with ```diff. Do not change the tests.\n")


EPISODE_PROMPT = ("{problem_statement}\n\nThe repository {repo} is checked out at commit {base_commit} in your "
                  "working directory. Fix the issue above by editing the code with the {tool} tool; do not change "
                  "the tests. Your changes are graded when you stop calling the tool.\n")


@dataclass(frozen=True)
class EpisodeLoop:
    """How a trainer's agent loop plays an instance as an episode: the loop's name (``agent_name``) and its
    tool's, whose ``create_kwargs`` carry the instance (``swe_instance``)."""

    agent_name: str
    tool_name: str


def verl_row(row: Mapping[str, Any], index: int, split: str = "train",
             episode: EpisodeLoop | None = None) -> dict[str, Any]:
    """The instance in ``row`` as a verl row (``data_source: swe``, the instance's fields as JSON text in
    ``ground_truth``): single-turn, or with ``episode`` an episode of that agent loop. Raises
    ConfigurationError naming the malformed field."""
    row = {key: _plain(value) for key, value in row.items()}
    spec = instance(row)
    truth = json.dumps(row, default=str)
    fields = {"problem_statement": spec.problem_statement, "repo": spec.repo or "in the image",
              "base_commit": spec.base_commit}
    prompt = PROMPT.format(**fields) if episode is None else EPISODE_PROMPT.format(**fields, tool=episode.tool_name)
    verl = {"data_source": DATA_SOURCE, "prompt": [{"role": "user", "content": prompt}], "ability": "coding",
            "reward_model": {"style": "rule", "ground_truth": truth},
            "extra_info": {"split": split, "index": index, "source_id": spec.instance_id}}
    if episode is not None:
        verl["agent_name"] = episode.agent_name
        verl["extra_info"]["tools_kwargs"] = {episode.tool_name: {"create_kwargs": {"swe_instance": truth}}}
    return verl


def parse_ground_truth(ground_truth: Any) -> Mapping[str, Any]:
    """A verl row's ``ground_truth`` for ``data_source: swe``: the instance as JSON text, or the object."""
    ground_truth = _plain(ground_truth)
    if isinstance(ground_truth, (str, bytes)):
        try:
            ground_truth = json.loads(ground_truth)
        except ValueError as exc:
            raise _bad("ground_truth", f"is not valid JSON ({exc})", "write it as json.dumps of the instance") from None
    if not isinstance(ground_truth, Mapping):
        raise _bad("ground_truth", f"is a {type(ground_truth).__name__}, not an object", "give the instance's fields")
    return ground_truth


def swe_task(row: Mapping[str, Any] | str, reward_kwargs: Mapping[str, Any] | None = None) -> RowTask:
    """The instance of ``row`` ready to judge, either way in: single-turn, ``DeepGym.run(swe_task(row),
    response)``, or as an episode, ``DeepGym.session(swe_task(row))``. ``row`` is the instance's fields, or
    their JSON text. Raises ConfigurationError naming the malformed field."""
    spec = instance(parse_ground_truth(row))
    scoring, limits = row_options(reward_kwargs or {}, SWE_LIMITS)
    if scoring not in ("all_or_nothing", "partial"):
        raise _bad("reward_kwargs.scoring", f"{scoring!r} does not apply to SWE instances",
                   "use all_or_nothing or partial")
    environment = Environment(id=spec.layer_id, kind="swe", prompt=spec.problem_statement,
                              path=bundle_root() / "images" / "swe", scoring=scoring, limits=limits,
                              instance_image=spec.image, session=SWE_SESSION)
    return RowTask(data_source=DATA_SOURCE, format="swe", environment=environment, tests=spec.tests())
