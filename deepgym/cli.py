"""The ``deepgym`` command.

Exit statuses: 0 success (for ``run``: the response was scored, whatever the score), 1 a failed check or
build, 2 bad usage (an unknown environment, a malformed manifest, a missing file, a malformed input line),
3 no verdict (for ``run-batch``: at least one response had none) or, for a command that judges nothing
(``cleanup``), no container engine; 128 + the signal for ``run`` and ``run-batch`` stopped by SIGTERM or SIGINT
(after printing every outcome, the unjudged ones as no verdict ``cancelled``). ``replay`` exits 1 when the
verdict differs and 3 when the replay had no verdict (:mod:`deepgym.replay`).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import signal
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from .errors import (DeepGymError, EngineUnavailableError, EnvironmentNotFoundError, LocalModeNotAllowedError,
                     ManifestError)
from .harbor.cli import add_harbor_commands
from .integrations.verl_cli import add_verl_commands
from .pushed import DEFAULT_MANIFEST
from .replay import add_replay_command
from .registration import REGISTERING_PROVIDERS
from .runner.protocol import ENVIRONMENT_KINDS
from .sandbox import MODES

EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_NO_VERDICT = 0, 1, 2, 3
EXIT_NO_ENGINE = EXIT_NO_VERDICT


def _read_response(source: str) -> str:
    if source == "-":
        return sys.stdin.read()
    path = Path(source)
    if not path.is_file():
        raise FileNotFoundError(f"--response {source}: no such file (use - to read standard input)")
    return path.read_text()


def cmd_list(args: argparse.Namespace) -> int:
    from .environments import list_environments, load_environment

    names = list_environments()
    width = max((len(name) for name in names), default=0)
    for name in names:
        print(f"{name:<{width}}  {load_environment(name).kind}")
    return EXIT_OK


@contextlib.contextmanager
def _graceful() -> Iterator[list[int]]:
    """SIGTERM and SIGINT end a judging command gracefully rather than at once: deepgym removes its containers
    (:mod:`deepgym.shutdown`), the samples not judged yet come back as no verdict (``cancelled``), and the
    command prints what it has. The list holds the signals received; the command then exits 128 + the signal."""
    from . import shutdown

    received: list[int] = []

    def stop(signum: int, frame: object) -> None:
        received.append(signum)
        shutdown.shutdown(f"{signal.Signals(signum).name} received")

    previous = {signum: signal.signal(signum, stop) for signum in shutdown.HANDLED}
    try:
        yield received
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)


def _exit_status(received: list[int], judged: bool) -> int:
    if received:
        return 128 + received[0]
    return EXIT_OK if judged else EXIT_NO_VERDICT


def cmd_run(args: argparse.Namespace) -> int:
    from .client import DeepGym
    from .environments import load_environment

    env = load_environment(args.environment)
    response = _read_response(args.response)
    with _graceful() as received, DeepGym(mode=args.mode) as gym:
        outcome = gym.judge(env, response, variant=args.variant)
    print(json.dumps(outcome.to_dict(), indent=None if args.compact else 2))
    return _exit_status(received, outcome.has_verdict)


def _response_line(number: int, line: str) -> str:
    """The response on one ``--responses`` line: a JSON string, or an object whose "response" is one. All
    lines are read before anything is judged, so a bad line costs no sample."""
    try:
        item = json.loads(line)
    except ValueError:
        item = None
    if isinstance(item, dict):
        item = item.get("response")
    if not isinstance(item, str):
        raise ValueError(f"--responses line {number} is not a JSON string or an object with a string "
                         f"\"response\": {line[:80]!r}")
    return item


def cmd_run_batch(args: argparse.Namespace) -> int:
    """One JSON line per response, in order, each printed as soon as it and those before it are judged, then a
    summary line counting outcomes by error type."""
    from .client import DeepGym
    from .environments import load_environment

    env = load_environment(args.environment)
    responses = [_response_line(number, line) for number, line in
                 enumerate(_read_response(args.responses).splitlines(), 1) if line.strip()]
    with _graceful() as received, DeepGym(mode=args.mode) as gym:
        batch = asyncio.run(_stream_batch(gym, env, responses, args.variant))
    print(json.dumps({"summary": batch.summary()}), flush=True)
    return _exit_status(received, batch.no_verdict == 0)


async def _stream_batch(gym: Any, env: Any, responses: list[str], variant: int) -> Any:
    """Judge every response at once through the async API (admission bounds how many run), printing each
    outcome in order as it is known, so that an interrupted run has printed everything already judged."""
    from .client import BatchResult

    jobs = [asyncio.ensure_future(gym.ajudge(env, response, variant=variant)) for response in responses]
    batch = BatchResult()
    try:
        for job in jobs:
            batch.append(await job)
            print(json.dumps(batch[-1].to_dict()), flush=True)
    finally:
        for job in jobs:
            job.cancel()
    return batch


def cmd_images_build(args: argparse.Namespace) -> int:
    from .environments import load_environment
    from .images import RUNTIME_IMAGES, build

    names = [name if name in RUNTIME_IMAGES else load_environment(name).id for name in args.environments] or None
    build(names, rebuild=args.rebuild, debian_image=args.debian_image)
    return EXIT_OK


def cmd_images_list(args: argparse.Namespace) -> int:
    from .environments import list_environments
    from .images import BASE, RUNTIME_IMAGES, image_name, image_status

    names = [BASE, *list_environments(), *RUNTIME_IMAGES]
    width = max(len(name) for name in names)
    for name in names:
        print(f"{name:<{width}}  {image_status(name):<11} {image_name(name)}")
    return EXIT_OK


def cmd_images_push(args: argparse.Namespace) -> int:
    from .environments import load_environment
    from .push import push

    names = [load_environment(name).id for name in args.environments] or None
    pushed = push(args.registry, names, manifest=args.manifest)
    for name, image in pushed.items():
        print(f"{name}  {image.ref}")
    print(f"deepgym: {len(pushed)} image(s) pushed; their digests are in {args.manifest}", file=sys.stderr)
    return EXIT_OK


def cmd_cleanup(args: argparse.Namespace) -> int:
    from .sandbox import ProviderUnavailable, make_provider

    provider = make_provider(args.provider)
    try:
        removed = provider.sweep({})
    except ProviderUnavailable as exc:
        fix = ("start the Docker engine (scripts/install-docker-engine.sh on Debian) or point DOCKER_HOST at it"
               if args.provider == "docker" else f"check the {args.provider} credentials and API address")
        what = "containers" if args.provider == "docker" else f"{args.provider} sandboxes"
        raise EngineUnavailableError(f"cannot remove deepgym's {what}: {exc.reason}. Fix: {fix}") from None
    finally:
        provider.close()
    print(f"removed {removed} deepgym {'container' if args.provider == 'docker' else args.provider + ' sandbox'}(s)")
    return EXIT_OK


def cmd_images_register(args: argparse.Namespace) -> int:
    from .registration import register

    for env, name, outcome in register(args.provider, args.environments, args.manifest):
        print(f"{env}: {name} {outcome}")
    return EXIT_OK


def cmd_check(args: argparse.Namespace) -> int:
    from .authoring.check import check, table
    from .client import DeepGym
    from .environments import list_environments, load_environment
    from .images import build

    names = [load_environment(name).id for name in args.environments] or list_environments()
    if args.mode != "local":
        build(names)
    with DeepGym(mode=args.mode) as gym:
        rows = check(names, gym, reruns=args.reruns)
    print(table(rows))
    failed = [row.env.id for row in rows if not row.ok]
    print(f"\n{len(rows) - len(failed)}/{len(rows)} environments pass" + (f"; failing: {', '.join(failed)}" if failed else ""))
    return EXIT_OK if not failed else EXIT_FAILED


def cmd_new(args: argparse.Namespace) -> int:
    from .scaffold import new_environment

    folder = new_environment(args.name, args.kind, Path(args.dir) if args.dir else None)
    print(f"created {folder} from the {args.kind} template, a working example that passes `deepgym check`.\n"
          f"Replace the task (prompt.md, tests/, solutions/, manifest.yaml), then run:\n"
          f"  deepgym check {args.name}")
    return EXIT_OK


def cmd_demo(args: argparse.Namespace) -> int:
    """Build what is missing, then score each environment's reference and one known-wrong solution, sent as
    model responses (prose around a fenced block)."""
    from .authoring.check import as_response
    from .client import DeepGym
    from .environments import load_environment
    from .images import build

    envs = [load_environment(name) for name in args.environments]
    build([env.id for env in envs])
    with DeepGym(mode=args.mode) as gym:
        for env in envs:
            solutions = env.solutions()
            for name in ["reference", sorted(n for n in solutions if n.startswith("wrong_"))[0]]:
                outcome = gym.judge(env, as_response(env, solutions[name].read_text())).to_dict()
                shown = {k: outcome.get(k) for k in ("score", "passed", "error_type", "has_verdict", "details")}
                print(f"{env.id} / {name}: {json.dumps(shown)}")
    return EXIT_OK


def cmd_images_layer(args: argparse.Namespace) -> int:
    from .swe_images import build

    for name in build(args.instance_images):
        print(name)
    return EXIT_OK


def cmd_datasets(args: argparse.Namespace) -> int:
    from .datasets import load, write_parquet

    episode = None
    if args.episodes:
        from .integrations.verl import SESSION_AGENT_NAME, SESSION_TOOL_NAME
        from .swe import EpisodeLoop

        episode = EpisodeLoop(SESSION_AGENT_NAME, SESSION_TOOL_NAME)
    count = write_parquet(load(args.source, args.split, args.file, episode), args.output)
    print(f"deepgym: wrote {count} rows to {args.output}", file=sys.stderr)
    return EXIT_OK


def cmd_report(args: argparse.Namespace) -> int:
    from .report import write

    print(f"deepgym: wrote {write(args.source, args.output)}", file=sys.stderr)
    return EXIT_OK


def parser() -> argparse.ArgumentParser:
    top = argparse.ArgumentParser(prog="deepgym", description="Trustworthy rewards for RL on code.")
    sub = top.add_subparsers(dest="command", required=True, metavar="COMMAND")

    p = sub.add_parser("list", help="list environments: name, then kind")
    p.set_defaults(func=cmd_list)

    p = sub.add_parser("run", help="score one model response (extraction applied) and print the verdict as JSON")
    p.add_argument("environment")
    p.add_argument("--response", required=True, metavar="FILE", help="the raw model response; - for stdin")
    p.add_argument("--mode", default="docker", choices=MODES)
    p.add_argument("--variant", type=int, default=0)
    p.add_argument("--compact", action="store_true", help="print the JSON on one line")
    p.set_defaults(func=cmd_run)

    p = sub.add_parser("run-batch", help="score many responses (JSON lines) in parallel; prints one JSON line each "
                                         "and a summary of outcomes by error type")
    p.add_argument("environment")
    p.add_argument("--responses", required=True, metavar="FILE", help="JSON lines: a string or {\"response\": ...}; "
                                                                      "- for stdin")
    p.add_argument("--mode", default="docker", choices=MODES)
    p.add_argument("--variant", type=int, default=0)
    p.set_defaults(func=cmd_run_batch)

    images = sub.add_parser("images", help="build and inspect the verifier images").add_subparsers(
        dest="images_command", required=True, metavar="COMMAND")
    p = images.add_parser("build", help="build missing or stale images with docker buildx bake")
    p.add_argument("environments", nargs="*", metavar="ENV", help="default: every environment")
    p.add_argument("--rebuild", action="store_true", help="rebuild even the images that are current")
    p.add_argument("--debian-image", help="Debian image to build the base on (default: debian:bookworm-slim, "
                                          "or a debootstrapped one when no registry is reachable)")
    p.set_defaults(func=cmd_images_build)
    p = images.add_parser("layer", help="layer deepgym's runner onto SWE-style instance images now, rather than at "
                                        "their first sample (docs/swe.md)")
    p.add_argument("instance_images", nargs="+", metavar="IMAGE", help="an instance image, as a row's image_name")
    p.set_defaults(func=cmd_images_layer)
    p = images.add_parser("list", help="every image and whether it is current, stale or missing")
    p.set_defaults(func=cmd_images_list)
    p = images.add_parser("push", help="build what is missing, push to a registry tagged by content hash, and "
                                       "record each digest in a manifest")
    p.add_argument("environments", nargs="*", metavar="ENV", help="default: every environment")
    p.add_argument("--registry", required=True, metavar="R",
                   help="host[:port][/path], e.g. 127.0.0.1:5000 or ghcr.io/acme (`docker login` it first if it "
                        "wants credentials)")
    p.add_argument("--manifest", default=DEFAULT_MANIFEST, metavar="FILE",
                   help=f"the pushed-images manifest to write, merged with what it lists (default: {DEFAULT_MANIFEST})")
    p.set_defaults(func=cmd_images_push)
    p = images.add_parser("register", help="make a provider's snapshot, template or image of each pushed image, "
                                           "named by its content hash (idempotent; one whose pull or build "
                                           "failed is made again)")
    p.add_argument("provider", choices=REGISTERING_PROVIDERS)
    p.add_argument("environments", nargs="+", metavar="ENV")
    p.add_argument("--manifest", default=DEFAULT_MANIFEST, help="the manifest `deepgym images push` wrote "
                                                                f"(default: {DEFAULT_MANIFEST})")
    p.set_defaults(func=cmd_images_register)

    p = sub.add_parser("cleanup", help="remove every sandbox deepgym created, on this engine or provider account")
    p.add_argument("--provider", default="docker", choices=["docker", "daytona", "e2b", "modal", "apple", "ray"],
                   help="sweep this provider by deepgym's labels (default: docker)")
    p.set_defaults(func=cmd_cleanup)

    p = sub.add_parser("check", help="prove environments judge correctly: reference, known-wrong, empty and stub "
                                     "answers, CPU margin (exit 0 only if all pass)")
    p.add_argument("environments", nargs="*", metavar="ENV", help="default: every environment")
    p.add_argument("--mode", default="docker", choices=["docker", "local"])
    p.add_argument("--reruns", type=int, default=3, help="times the reference must score 1.0 (default: 3)")
    p.set_defaults(func=cmd_check)

    p = sub.add_parser("new", help="create an environment from a working template of its kind")
    p.add_argument("name")
    p.add_argument("--kind", required=True, choices=ENVIRONMENT_KINDS)
    p.add_argument("--dir", help="create it here (a folder on DEEPGYM_ENVIRONMENTS) instead of environments/")
    p.set_defaults(func=cmd_new)

    p = sub.add_parser("demo", help="build what is missing and score a right and a wrong answer")
    p.add_argument("environments", nargs="*", metavar="ENV", default=["coin_change", "two_sum"])
    p.add_argument("--mode", default="docker", choices=MODES)
    p.set_defaults(func=cmd_demo)

    p = sub.add_parser("datasets", help="write verl rows (parquet) from a named dataset or a JSONL/parquet file "
                                        "in the APPS, CodeContests or MBPP shape, or of SWE-bench instances")
    p.add_argument("source", metavar="NAME|FILE", help="humaneval, swe (then FILE), or a .jsonl or .parquet file")
    p.add_argument("file", nargs="?", metavar="FILE", help="for swe: a .jsonl or .parquet file of SWE-bench instances")
    p.add_argument("-o", "--output", required=True, metavar="FILE", help="the parquet file to write")
    p.add_argument("--split", help="extra_info.split of every row (default: test for humaneval, else train)")
    p.add_argument("--episodes", action="store_true", help="for swe: rows that verl's deepgym_agent loop plays as "
                                                           "episodes in a persistent terminal (docs/swe.md)")
    p.set_defaults(func=cmd_datasets)

    p = sub.add_parser("report", help="one self-contained HTML page from run-batch output, a log of verl's reward "
                                      "extras, or a recorded episode")
    p.add_argument("source", metavar="FILE", help="JSON lines of outcomes, or an episode deepgym.report.Recorder saved")
    p.add_argument("-o", "--output", required=True, metavar="HTML", help="the page to write")
    p.set_defaults(func=cmd_report)

    add_verl_commands(sub)
    add_harbor_commands(sub)
    add_replay_command(sub)
    return top


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    try:
        return args.func(args)
    except (EnvironmentNotFoundError, ManifestError, FileNotFoundError, LocalModeNotAllowedError, ValueError) as exc:
        # ValueError: bad input such as a variant out of range or a malformed --responses line.
        print(f"deepgym: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except EngineUnavailableError as exc:
        print(f"deepgym: {exc}", file=sys.stderr)
        return EXIT_NO_ENGINE
    except DeepGymError as exc:
        print(f"deepgym: {exc}", file=sys.stderr)
        return EXIT_FAILED


if __name__ == "__main__":
    sys.exit(main())
