"""Replay: judge a recorded verdict's response again in the image that judged it, and say field by field
whether the verdict still holds.

A verdict's ``provenance`` (:func:`deepgym.verdict.provenance`) names everything that made it: the
environment and its content hash, the image id (and digest, when pushed), the runner's hash, the variant,
the limits, the submission's sha256 and deepgym's version. ``deepgym replay VERDICT.json --response FILE``
pins the environment to the recorded image (or to ``--image REF``, to ask whether another image agrees),
judges the response there with canaries off (a replay reproduces; it does not guard), and compares. The
input is one verdict as ``deepgym run`` prints it, a ``run-batch`` line, or one sample's reward extra info
from verl (:mod:`deepgym.integrations.verl`: ``score``, ``passed``, ``error``, ``error_type`` and the
``provenance`` as a JSON string).

Exit statuses: 0 every field matches, 1 some field differs (each is named), 2 bad usage (no provenance: a
no-verdict record, or a file that is not a verdict), 3 the replay itself had no verdict.
"""

from __future__ import annotations

import argparse
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .outcome import Outcome

# What must agree: the outcome, then what made it. ``image_ref`` is how the image was named, not what it is.
OUTCOME_FIELDS = ("has_verdict", "score", "passed", "error_type", "cases_total", "cases")
PROVENANCE_FIELDS = ("environment", "environment_hash", "image_id", "image_digest", "runner_hash", "variant",
                     "limits", "submission_sha256", "tests_sha256", "deepgym_version")


@dataclass(frozen=True)
class FieldCheck:
    """One compared field: its name, the recorded and the replayed value."""

    name: str
    recorded: Any
    replayed: Any

    @property
    def matches(self) -> bool:
        return self.recorded == self.replayed


def recorded_verdict(path: str | Path) -> dict[str, Any]:
    """The verdict in ``path`` (a JSON object; verl's extras may nest it under ``deepgym``). Raises ValueError
    naming what is missing."""
    try:
        data = json.loads(Path(path).read_text())
    except ValueError as exc:
        raise ValueError(f"{path} is not JSON ({exc}); give one verdict as `deepgym run` prints it") from None
    if isinstance(data, dict) and isinstance(data.get("provenance"), str) and "error" in data:
        # verl's reward extra info: provenance as a JSON string, error 1.0 for a sample kept out, "" for no error.
        data = {**data, "has_verdict": data["error"] == 0.0, "error_type": data.get("error_type") or None,
                "provenance": json.loads(data["provenance"]) if data["provenance"] else None}
    if not isinstance(data, dict) or not data.get("has_verdict"):
        raise ValueError(f"{path} is not a verdict: a no-verdict record has nothing to reproduce, since the "
                         f"infrastructure failed; judge the response again with `deepgym run`")
    provenance = data.get("provenance")
    if not isinstance(provenance, dict) or not provenance.get("environment") or not provenance.get("image_id"):
        raise ValueError(f"{path} has no provenance with an environment and an image id; it was judged without "
                         f"an image (local mode) or by a deepgym before provenance existed")
    if not provenance.get("submission_sha256"):
        raise ValueError(f"{path} is an episode's verdict: its actions were the agent's, turn by turn, so there is "
                         f"no one response to judge again")
    if provenance.get("tests_sha256") is not None:
        raise ValueError(f"{path} is a dataset row's verdict; its tests travel with the row, not the verdict, so "
                         f"judge the row again through verl's compute_score")
    return data


def _cases(outcome: dict[str, Any]) -> list[tuple[str, bool]]:
    return [(case["id"], case["passed"]) for case in outcome.get("cases", [])]


def compare(recorded: dict[str, Any], replayed: dict[str, Any]) -> list[FieldCheck]:
    """Every compared field of a recorded and a replayed verdict (as ``to_dict`` gives them; a recorded one from
    verl's extras has only some outcome fields, and only those are compared; ``passed`` 1.0 equals True)."""
    checks = [FieldCheck(name, _cases(recorded) if name == "cases" else recorded.get(name),
                         _cases(replayed) if name == "cases" else replayed.get(name))
              for name in OUTCOME_FIELDS if name in recorded]
    before, after = recorded["provenance"], replayed.get("provenance") or {}
    return checks + [FieldCheck(f"provenance.{name}", before.get(name), after.get(name)) for name in PROVENANCE_FIELDS]


def replay(recorded: dict[str, Any], response: str, *, mode: str = "docker", image: str | None = None) -> Outcome:
    """``response`` judged again as ``recorded`` was: its environment and variant, in its image (or
    ``image``), canaries off and stale images allowed (the recorded image may predate the host's files)."""
    from .client import DeepGym

    provenance = recorded["provenance"]
    with DeepGym(mode, canaries=False, allow_stale_image=True) as gym:
        pushed = provenance["image_ref"] if provenance.get("image_digest") else None
        gym.images.pinned[provenance["environment"]] = image or pushed or provenance["image_id"]
        return gym.judge(provenance["environment"], response, variant=provenance["variant"])


def cmd_replay(args: argparse.Namespace) -> int:
    recorded = recorded_verdict(args.verdict)
    response = Path(args.response).read_text()
    outcome = replay(recorded, response, mode=args.mode, image=args.image).to_dict()
    checks = compare(recorded, outcome)
    for check in checks:
        state = "matches" if check.matches else f"DIFFERS: recorded {check.recorded!r}, replayed {check.replayed!r}"
        print(f"{check.name}: {state}")
    differing = [check.name for check in checks if not check.matches]
    if not outcome["has_verdict"]:
        print(f"the replay had no verdict ({outcome['error_type']}): {outcome.get('reason', '')}")
        return 3
    print(f"the verdict differs in: {', '.join(differing)}" if differing else "the verdict replays exactly")
    return 1 if differing else 0


def add_replay_command(subparsers: argparse._SubParsersAction) -> None:
    """Add ``deepgym replay`` to the top-level parser's subparsers."""
    p = subparsers.add_parser("replay", help="judge a recorded verdict's response again in the same image and "
                                             "compare field by field (exit 0 same, 1 differs, 3 no verdict)")
    p.add_argument("verdict", metavar="VERDICT.json", help="one verdict: `deepgym run`'s output, a run-batch line")
    p.add_argument("--response", required=True, metavar="FILE", help="the response that verdict judged")
    p.add_argument("--image", metavar="REF", help="judge in this image instead of the recorded one")
    p.add_argument("--mode", default="docker", choices=["docker"], help="the provider (default: docker)")
    p.set_defaults(func=cmd_replay)
