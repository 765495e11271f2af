"""``deepgym harbor ...``: import Harbor task directories as session environments (docs/harbor.md).

    deepgym harbor import tasks/fix-git tasks/hello-world --into ~/deepgym-envs
    deepgym harbor import tasks/* --into ~/deepgym-envs --base-map ubuntu:24.04=mirror.local/ubuntu:24.04
    deepgym harbor import tasks/hello-world --into ~/remote-envs --terminal fresh    # for daytona, e2b, modal

This module only adds the parser; the importer is imported when the command runs, so ``deepgym --help`` and
every other command load none of it.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path


def cmd_import(args: argparse.Namespace) -> int:
    """Import every task, all or nothing: the tasks are checked first, so one refused task writes no folder."""
    from .bases import parse_base_map
    from .importer import import_tasks

    into = Path(args.into)
    written = import_tasks([Path(p) for p in args.paths], into, base_map=parse_base_map(args.base_map or []),
                           force=args.force, terminal=args.terminal)
    for result in written:
        for warning in result.warnings:
            print(f"deepgym: warning: {warning}", file=sys.stderr)
        print(f"{result.name}\t{result.path}")
    roots = [r for r in os.environ.get("DEEPGYM_ENVIRONMENTS", "").split(os.pathsep) if r]
    if written and not any(Path(r).resolve() == into.resolve() for r in roots):
        print(f"deepgym: add {into.resolve()} to DEEPGYM_ENVIRONMENTS so that deepgym finds these environments",
              file=sys.stderr)
    return 0


def add_harbor_commands(sub: argparse._SubParsersAction) -> None:
    """Add ``deepgym harbor import`` to the top-level parser's subcommands."""
    harbor = sub.add_parser("harbor", help="import Harbor task directories as session environments").add_subparsers(
        dest="harbor_command", required=True, metavar="COMMAND")
    p = harbor.add_parser("import", help="write one session environment per Harbor task directory into DIR")
    p.add_argument("paths", nargs="+", metavar="PATH", help="Harbor task directories (each holds task.toml)")
    p.add_argument("--into", required=True, metavar="DIR",
                   help="the folder to write the environments into (put it on DEEPGYM_ENVIRONMENTS)")
    p.add_argument("--base-map", action="append", metavar="FROM=TO",
                   help="build from the image TO wherever a task's Dockerfile starts FROM the image FROM "
                        "(repeatable; e.g. a local mirror of a base image this host cannot pull; TO=base: "
                        "deepgym's own Debian base image, built offline in the same run)")
    p.add_argument("--force", action="store_true", help="replace environments an earlier import wrote")
    p.add_argument("--terminal", choices=("persistent", "fresh"), default="persistent",
                   help="the agent's actions: keystrokes into one persistent terminal (Harbor's, the default; "
                        "docker only), or a fresh shell per command (every provider that runs sessions)")
    p.set_defaults(func=cmd_import)
