"""Persistent terminals: a shell episode whose actions go to one long-lived interactive shell, so the working
directory, the environment, background jobs and interactive programs (a Python REPL, ``less``, an editor)
carry over from one action to the next. An environment opts in with ``session: {terminal: persistent}``.

::

    with gym.session("term_env") as session:                # its manifest says terminal: persistent
        session.start()
        session.step("cd inbox")                             # typed, then Enter; waits for the prompt
        session.step({"keystrokes": "python3 -q\\n", "duration": 1})   # Harbor's Terminus shape
        session.step({"keystrokes": "C-d", "duration": 0.2})
        verdict = session.score()

Everything but the action channel is a shell episode's (:class:`~deepgym.session.shell.ShellActions`): the
container, the workspace, the services, and the verification, which kills every process of the agent and
proves none is left before anything is read. The channel is one exec kept open for the episode
(:meth:`Sandbox.stream <deepgym.sandbox.base.Sandbox.stream>`) to the in-sandbox terminal
(:mod:`deepgym.runner.episode.terminal`), which holds the shell on a pseudo-terminal as the agent's uid: an
action is one JSON line each way on a stream already open, not an exec (docs/sessions.md measures both).
Actions are checked by :func:`deepgym.session.keys.parse_action`.

**What differs from a fresh shell.** A step that times out is not interrupted (``[timed out after N s; it is
still running]``): the agent can wait more, or send ``C-c``. The observation's text is the new output since the
last one (the echoed command, its output, the next prompt), or the screen while a full-screen program holds
the alternate screen; :attr:`Observation.screen <deepgym.session.results.Observation.screen>` is always the
screen. A shell that exits (``exit``, killed) ends the episode, which is then scored from the state left.
"""

from __future__ import annotations

import secrets
from typing import Any, Callable

from ..sandbox import ExecOptions, Sandbox, SandboxLost
from ..sandbox.base import Stream
from ..verdict import NoVerdictError
from .channel import Channel
from .episode import HOST_GRACE_S, Episode
from .keys import Keys, parse_action
from .results import Observation, Reply, Verification
from .rules import cut_output
from .shell import AGENT_UID, Session, ShellActions

ROWS, COLUMNS = 40, 160
# How long the terminal may take to start its shell and show the first prompt (its own limit is 10 s).
START_S = 10.0 + HOST_GRACE_S
STILL_RUNNING = "[timed out after {seconds:g} s; it is still running: wait, or send C-c]"


class Terminal:
    """The episode's container and, once started, the stream of its terminal. Closing it closes both."""

    def __init__(self, box: Sandbox):
        self.box = box
        self.channel: Channel | None = None
        self._stream: Stream | None = None

    @property
    def id(self) -> str:
        """The container's id, as for any episode's sandbox."""
        return self.box.id

    def attach(self, argv: tuple[str, ...], options: ExecOptions) -> Channel:
        """Start the in-sandbox terminal, ``argv``, on a stream kept open; the channel to it."""
        self._stream = self.box.stream(argv, options)
        self.channel = Channel(self._stream.sock, "the terminal")
        return self.channel

    def hang_up(self) -> None:
        """Close the terminal's stream: it ends, and its shell's session is hung up."""
        if self._stream is not None:
            stream, self._stream, self.channel = self._stream, None, None
            stream.close()

    def close(self) -> None:
        """Hang up, then remove the container (the episode closes its sandbox on every outcome)."""
        self.hang_up()
        self.box.close()


class TerminalActions(ShellActions):
    """Actions typed into one persistent shell (see the module's docstring)."""

    aexchange = None  # type: ignore[assignment]  # the terminal's channel is a socket read in a thread, never awaited

    def refusal(self, episode: Episode) -> str | None:
        refused = super().refusal(episode)
        if refused is None and not episode.context.provider.streams:
            refused = (f"{episode.env.id} asks for a persistent terminal, which needs a provider that keeps a "
                       f"command's stream open; mode={episode.context.runtime!r} has none. Use mode='docker', or "
                       f"act with a fresh shell per action: `terminal: fresh` in its manifest's session (an "
                       f"imported Harbor task: import it again with --terminal fresh)")
        return refused

    def open(self, episode: Episode, keep: Callable[[Any], None]) -> Observation | str:
        """The shell episode's container and workspace, then the terminal, at its first prompt."""
        made: list[Terminal] = []

        def hold(box: Sandbox) -> None:
            made.append(Terminal(box))
            keep(made[0])

        first = super().open(episode, hold)
        if isinstance(first, str):
            return first
        channel = made[0].attach(self.runner.terminal_argv, ExecOptions(timeout_s=episode.lifetime_s,
                                                                         user=self.runner.user(0)))
        channel.send({"nonce": secrets.token_hex(8), "agent_uid": AGENT_UID, "workspace": self.workspace,
                      "rows": ROWS, "cols": COLUMNS, "env": self.agent_env})
        ready = channel.receive(START_S)
        if ready is None or not ready.get("ready"):
            return f"the terminal could not start: {(ready or {}).get('error', 'no answer in time')}"
        return Observation(first.text, screen=ready["screen"])

    def parse(self, episode: Episode, action: Any) -> tuple[Any, str | None]:
        """A command or :class:`~deepgym.session.keys.Keys`, or why the action is neither."""
        try:
            return parse_action(action), None
        except ValueError as exc:
            return None, str(exc)

    def exchange(self, sandbox: Terminal, parsed: str | Keys, timeout_s: float) -> dict:
        """Type the action; the terminal's reply once the shell is back at its prompt, or at the timeout."""
        if sandbox.channel is None:
            raise SandboxLost("the terminal was hung up")
        if isinstance(parsed, Keys):
            sandbox.channel.send({"op": "keys", "data": parsed.data, "wait_s": min(parsed.duration_s, timeout_s)})
        else:
            sandbox.channel.send({"op": "type", "data": parsed, "timeout_s": timeout_s})
        reply = sandbox.channel.receive(timeout_s + HOST_GRACE_S)
        if reply is None:
            raise SandboxLost("the terminal did not answer in time")
        return reply

    def observe(self, episode: Episode, parsed: str | Keys, reply: dict, timeout_s: float, took_s: float) -> Reply:
        if "error" in reply:
            return Reply(Observation("the environment failed; this episode is over"),
                         failure=NoVerdictError("verifier_error", f"the terminal failed: {reply['error']}",
                                                **episode.where()))
        text = reply["screen"] if reply["alternate"] else reply["output"]
        if reply["timed_out"]:
            text += ("\n" if text and not text.endswith("\n") else "") + STILL_RUNNING.format(
                seconds=round(timeout_s, 1))
        over = reply["exited"] is not None
        if over:
            text += f"\n[the shell exited with status {reply['exited']}; the episode is over]"
        return Reply(Observation(cut_output(text, episode.limits.output_chars), screen=reply["screen"]), over=over)

    def verify(self, episode: Episode, sandbox: Terminal) -> Verification:
        """Hang the terminal up, then the shell episode's verification: every process of the agent killed and
        proved gone before anything is read."""
        sandbox.hang_up()
        return super().verify(episode, sandbox.box)


class TerminalSession(Session):
    """One episode of a ``session`` environment acted on through a persistent terminal
    (:class:`TerminalActions`); :meth:`DeepGym.session <deepgym.DeepGym.session>` makes one for an environment
    whose manifest says ``terminal: persistent``, and any shell environment can be run this way."""

    actions_class = TerminalActions
