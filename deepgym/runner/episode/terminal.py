"""The in-sandbox side of a persistent terminal: one interactive bash on a pseudo-terminal for the whole episode.

``python3 -I -B -m deepgym_runner.episode.terminal``, as root (the container's three capabilities), through one
exec whose stdin and stdout stay open for the episode: JSON lines in, JSON lines out, so an action costs one
round trip on a stream that is already open instead of an exec per action. The first line is the start
(:class:`TerminalRequest`), answered ``{"ready": true, "screen": ...}``; then each line is one action:

- ``{"op": "type", "data": TEXT, "timeout_s": S}``: TEXT and Enter are typed (pasted, when the shell is at its
  prompt: a tab stays a tab, not a completion, and several lines are one input), and the action ends when
  the shell is back at its prompt with nothing of TEXT left unread, or at ``S``. When a program held the
  terminal as it was typed (a REPL, a pager), the action also ends once the output has been quiet for
  :data:`pty_shell.QUIET_S`: such a program has no prompt of the shell's to wait for.
- ``{"op": "keys", "data": KEYS, "wait_s": S}``: raw keys, then exactly ``S`` of waiting (Terminus's shape).

Each reply is ``{"output", "screen", "alternate", "timed_out", "exited"}``: the new output since the last reply
as plain text (:func:`screen.plain`), the screen as a terminal shows it (:class:`screen.Screen`), whether a
full-screen program holds the alternate screen, whether the wait hit its limit, and the shell's exit status
once it has exited. A timed-out action is not interrupted: it goes on running, as in any terminal.

**Who runs what.** This process drops to the runner's three capabilities, then forks the shell as the agent's
uid (no capability, its own session, the terminal as its controlling tty) in the workspace, with a clean
environment. The agent's processes share nothing with this process but the terminal: not its stdout, which
only the host reads. This process is root's, so the agent can neither signal nor trace it; everything the
agent starts runs as its uid and dies in the verification's kill (:mod:`verify`), which the host starts only
after it closed this stream (its end: this process exits, and the terminal hangs up).

The shell's side (its pseudo-terminal, the prompt, the output kept) is :mod:`pty_shell`.
"""

from __future__ import annotations

import json
import os
import select
import sys
import time
import traceback
from typing import Any, Callable

from ..confine.container import Container
from ..protocol import MIN_UID
from .pty_shell import READ_BYTES, Terminal, TerminalRequest

# How long the shell may take to show its first prompt.
START_S = 10.0


def problem(request: TerminalRequest) -> str | None:
    """Why the terminal cannot start for ``request``, or None."""
    if isinstance(request.agent_uid, bool) or not isinstance(request.agent_uid, int) or request.agent_uid < MIN_UID:
        return f"the agent's uid {request.agent_uid!r} must be an integer of at least {MIN_UID}"
    if not os.path.isabs(request.workspace) or not os.path.isdir(request.workspace):
        return f"the workspace {request.workspace!r} is not a folder"
    if not (4 <= request.rows <= 500 and 20 <= request.cols <= 1000):
        return f"a screen of {request.rows}x{request.cols} is out of range"
    return None


def start(request: TerminalRequest) -> tuple[Terminal | None, dict]:
    """The terminal, its shell at its first prompt, and the reply that says so (or why not)."""
    said = problem(request) or Container().drop_privileges()
    if said is not None:
        return None, {"error": said}
    terminal = Terminal(request)
    deadline = time.monotonic() + START_S
    while terminal.prompts == 0 and terminal.exited is None and time.monotonic() < deadline:
        terminal.wait(b"", deadline - time.monotonic())
    if terminal.exited is not None or terminal.prompts == 0:
        output = terminal.reply(False)["output"][-1000:]
        terminal.close()
        return None, {"error": f"the shell did not reach its prompt (exit status {terminal.exited}): {output}"}
    return terminal, {"ready": True, **terminal.reply(False)}


def perform(terminal: Terminal, action: dict) -> dict:
    """One action (see the module's docstring) and its reply."""
    data = str(action["data"]).encode("utf-8", "replace")  # a lone surrogate is the agent's: typed as ?
    if action["op"] == "type":
        terminal.drain()
        timed_out = terminal.act(terminal.command(data), timeout_s=float(action["timeout_s"]), until_prompt=True)
    elif action["op"] == "keys":
        timed_out = terminal.act(data, timeout_s=float(action["wait_s"]), until_prompt=False)
    else:
        return {"error": f"unknown op {action['op']!r}"}
    return terminal.reply(timed_out)


def serve(terminal: Terminal, requests: int, emit: Callable[[dict], None], buffer: bytes) -> None:
    """Answer each action line on ``requests`` (``buffer``: what was read of them already) until it ends,
    draining the terminal in between."""
    while True:
        while b"\n" in buffer:
            line, buffer = buffer.split(b"\n", 1)
            emit(perform(terminal, json.loads(line)))
        readable = select.select([requests, *terminal.watched()], [], [])[0]
        if terminal.pidfd in readable:
            terminal.reap()
        if terminal.master in readable:
            terminal.drain()
        if requests not in readable:
            continue
        data = os.read(requests, READ_BYTES)
        if not data:
            return
        buffer += data


def main() -> int:
    out = sys.stdout.buffer

    def emit(reply: dict[str, Any]) -> None:
        out.write(json.dumps(reply).encode() + b"\n")
        out.flush()

    requests = sys.stdin.fileno()
    terminal = None
    try:
        first = b""
        while not first.endswith(b"\n"):
            chunk = os.read(requests, READ_BYTES)
            if not chunk:
                return 2
            first += chunk
        line, _, rest = first.partition(b"\n")
        terminal, reply = start(TerminalRequest(**json.loads(line)))
        emit(reply)
        if terminal is None:
            return 1
        serve(terminal, requests, emit, rest)
    except Exception:  # noqa: BLE001 - a failure of ours is never the agent's: the host says so
        emit({"error": "the terminal failed:\n" + traceback.format_exc(limit=8)})
        return 1
    finally:
        if terminal is not None:
            terminal.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
