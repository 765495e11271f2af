"""``deepgym verl ...``: write verl dataset rows, and print the packaged agent-loop config's path.

    deepgym verl rows coin_change two_sum --repeat 64 -o train.parquet
    deepgym verl agent-loop-config
    deepgym verl session-tool-config
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path


def cmd_rows(args: argparse.Namespace) -> int:
    from .verl import verl_rows

    if args.repeat < 1:
        print(f"deepgym: --repeat must be at least 1, got {args.repeat}", file=sys.stderr)
        return 2
    rows = verl_rows(args.environments, repeat=args.repeat, variant=args.variant or [0], split=args.split,
                     agent_name=args.agent_name)
    out = Path(args.output)
    try:
        import pandas as pd
    except ImportError:
        print("deepgym: writing rows needs pandas and pyarrow: pip install 'deepgym[verl]'", file=sys.stderr)
        return 1
    frame = pd.DataFrame(rows)
    if out.parent != Path(""):
        out.parent.mkdir(parents=True, exist_ok=True)
    if out.suffix == ".jsonl":
        frame.to_json(out, orient="records", lines=True)
    elif out.suffix == ".parquet":
        try:
            frame.to_parquet(out, index=False)
        except ImportError:
            print("deepgym: writing parquet needs pyarrow: pip install 'deepgym[verl]'", file=sys.stderr)
            return 1
    else:
        print(f"deepgym: -o {out}: use a .parquet or .jsonl file (verl reads both)", file=sys.stderr)
        return 2
    names = ", ".join(dict.fromkeys(row["data_source"] for row in rows))
    print(f"wrote {len(rows)} rows ({names}) to {out}", file=sys.stderr)
    return 0


def cmd_agent_loop_config(args: argparse.Namespace) -> int:
    from .verl import agent_loop_config_path

    print(agent_loop_config_path())
    return 0


def cmd_session_tool_config(args: argparse.Namespace) -> int:
    from .verl import session_tool_config_path

    print(session_tool_config_path())
    return 0


def add_verl_commands(subparsers: argparse._SubParsersAction) -> None:
    """Add ``deepgym verl`` and its subcommands to the top-level parser's subparsers."""
    verl = subparsers.add_parser("verl", help="train with verl: dataset rows and the agent-loop config")
    commands = verl.add_subparsers(dest="verl_command", required=True, metavar="COMMAND")

    p = commands.add_parser("rows", help="write verl dataset rows (parquet or jsonl), one per environment",
                            description="Write verl dataset rows: each row names its environment, so one file can "
                                        "mix environments; --repeat weights them.")
    p.add_argument("environments", nargs="+", metavar="ENV")
    p.add_argument("--repeat", type=int, default=1, metavar="N", help="copies of each row (default 1)")
    p.add_argument("--variant", type=int, action="append", metavar="V",
                   help="variant to write; repeat the option for several (default 0)")
    p.add_argument("--split", default="train", help="extra_info.split (default train)")
    p.add_argument("--agent-name", metavar="NAME",
                   help="write an agent_name column, e.g. deepgym_single_turn, to pick the agent loop per row")
    p.add_argument("-o", "--output", required=True, metavar="FILE", help="a .parquet or .jsonl file")
    p.set_defaults(func=cmd_rows)

    p = commands.add_parser("agent-loop-config",
                            help="print the absolute path of deepgym's agent-loop YAML for "
                                 "actor_rollout_ref.rollout.agent.agent_loop_config_path")
    p.set_defaults(func=cmd_agent_loop_config)

    p = commands.add_parser("session-tool-config",
                            help="print the absolute path of deepgym's session tool YAML for "
                                 "actor_rollout_ref.rollout.multi_turn.tool_config_path")
    p.set_defaults(func=cmd_session_tool_config)
