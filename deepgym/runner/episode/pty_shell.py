"""The agent's shell on a pseudo-terminal, for the persistent terminal (:mod:`terminal`, which serves it): how it
is started, how its prompt is known, and what of its output is kept. Standard library only.

**How the prompt is known.** PS1 ends in an OSC sequence carrying a nonce, which :class:`Terminal` removes from
the output and counts. A prompt ends a command's wait when everything typed has been read and the shell is
the terminal's foreground process group again (or a shell the agent started in it, which inherits PS1, was
holding the terminal as the command was typed). The agent can print the same sequence, or change PS1: either
only ends its own waits early or lets them run to the step's limit; nothing it prints reaches the host but as
output.

Output is drained all the time, so a program writing to the terminal never blocks on it, and kept bounded:
:data:`KEEP_BYTES` of the head and of the tail of what came since the last reply, and the screen is fed at most
:data:`SCREEN_BYTES` of it (a flood redraws the screen from its tail).
"""

from __future__ import annotations

import codecs
import fcntl
import os
import select
import struct
import termios
import time
from dataclasses import dataclass, field
from typing import Any

from ..confine.privileges import MAX_FD
from .screen import Screen, plain

KEEP_BYTES = 64 << 10
SCREEN_BYTES = 64 << 10
QUIET_S = 0.5
# A multi-line action's last prompt: how long the output must stay still after it (a later line's echo
# would arrive within it).
SETTLE_S = 0.002
READ_BYTES = 1 << 16
DRAIN_READS = 16
MARK = "\x1b]7770;{nonce}\x07"
PASTE_START, PASTE_END = b"\x1b[200~", b"\x1b[201~"
PASTES_ON, PASTES_OFF = b"\x1b[?2004h", b"\x1b[?2004l"
SHELL = ("/bin/bash", "--noprofile", "--norc", "-i")


@dataclass(frozen=True)
class TerminalRequest:
    """The terminal's start: who the agent is, where it works, and the screen's size."""

    nonce: str
    agent_uid: int
    workspace: str
    rows: int = 40
    cols: int = 160
    env: dict[str, str] = field(default_factory=dict)
    """The task's own variables (an imported task's ``[environment].env``)."""

    def environment(self) -> dict[str, str]:
        """The shell's whole environment: nothing of this process's but the task's ``env``, a prompt that ends in
        the marker, no history file (it would be written into the workspace that the verifier reads), and ``cat``
        as the pager, so that ``git log`` or ``man`` print and return instead of waiting for keys (``less`` still
        pages when asked)."""
        prompt = r"\w\$ \[" + MARK.format(nonce=self.nonce).replace("\x1b", r"\e").replace("\x07", r"\a") + r"\]"
        return {"HOME": self.workspace, "TMPDIR": self.workspace, "TERM": "xterm", "LANG": "C.UTF-8",
                "PATH": "/usr/local/bin:/usr/bin:/bin", "PAGER": "cat", "GIT_PAGER": "cat", "MANPAGER": "cat",
                **{str(key): str(value) for key, value in self.env.items()},
                "PS1": prompt, "PS2": "> ", "HISTFILE": ""}


class Terminal:
    """The shell on its pseudo-terminal, and what it has written since the last reply."""

    def __init__(self, request: TerminalRequest):
        self.request = request
        self.marker = MARK.format(nonce=request.nonce).encode()
        self.master, self.slave = os.openpty()
        fcntl.ioctl(self.master, termios.TIOCSWINSZ, struct.pack("HHHH", request.rows, request.cols, 0, 0))
        os.fchmod(self.slave, 0o666)  # its owner (root) may: the agent reopens it as /dev/tty (less, getpass)
        os.set_blocking(self.master, False)
        self.pid = self._spawn()
        self.pidfd = os.pidfd_open(self.pid)
        self.exited: int | None = None
        self.screen = Screen(request.rows, request.cols)
        self.decoder = codecs.getincrementaldecoder("utf-8")("replace")
        self.prompts = 0
        self.prompter: int | None = None
        """The foreground process group when the last prompt came: a shell that prints the prompt (the agent's
        own, or one it started in it, which inherits PS1)."""
        self.pastes = False
        """Whether the shell's line editor last said it takes bracketed pastes (readline does, at each prompt)."""
        self._carry = b""
        self._head, self._tail, self._dropped = bytearray(), bytearray(), 0
        self._pending, self._overflowed = bytearray(), False
        self.last_output = time.monotonic()

    def _spawn(self) -> int:
        request = self.request
        environment = request.environment()
        pid = os.fork()
        if pid == 0:  # the shell: nothing of this process's may survive the exec
            try:
                os.close(self.master)
                os.setsid()
                fcntl.ioctl(self.slave, termios.TIOCSCTTY, 0)
                for fd in (0, 1, 2):
                    os.dup2(self.slave, fd)
                os.setgroups([])
                os.setgid(request.agent_uid)
                os.setuid(request.agent_uid)
                os.chdir(request.workspace)
                os.closerange(3, MAX_FD)
                os.execve(SHELL[0], list(SHELL), environment)
            finally:
                os._exit(127)
        return pid

    # -- the shell's output -------------------------------------------------------------------------------

    def drain(self) -> bool:
        """Read what the terminal has, at most :data:`DRAIN_READS` reads (a writer as fast as the reads must not
        keep the requests waiting); True when anything came."""
        came = False
        for _ in range(DRAIN_READS):
            try:
                data = os.read(self.master, READ_BYTES)
            except (BlockingIOError, InterruptedError):
                return came
            except OSError:  # EIO: no process holds the terminal any more
                return came
            if not data:
                return came
            came = True
            self.last_output = time.monotonic()
            self._take(data)
        return came

    def _take(self, data: bytes) -> None:
        """Count and remove the prompt's markers, holding back a tail that may begin one."""
        data = self._carry + data
        found = data.count(self.marker)
        if found:
            self.prompts += found
            self.prompter = self.foreground()
            data = data.replace(self.marker, b"")
        on, off = data.rfind(PASTES_ON), data.rfind(PASTES_OFF)
        if on != off:  # both -1 when neither came
            self.pastes = on > off
        start = data.rfind(b"\x1b", max(0, len(data) - len(self.marker) + 1))
        if start >= 0 and self.marker.startswith(data[start:]):
            data, self._carry = data[:start], data[start:]
        else:
            self._carry = b""
        self._keep(data)

    def _keep(self, data: bytes) -> None:
        self._pending += data
        if len(self._pending) > SCREEN_BYTES:
            self._overflowed = True
            del self._pending[:-SCREEN_BYTES]
        room = KEEP_BYTES - len(self._head)
        if room > 0:
            self._head += data[:room]
            data = data[room:]
        self._tail += data
        if len(self._tail) > KEEP_BYTES:
            self._dropped += len(self._tail) - KEEP_BYTES
            del self._tail[:-KEEP_BYTES]

    def new_output(self) -> str:
        """The plain text of everything since the last call, its middle cut beyond :data:`KEEP_BYTES` a side."""
        head, tail, dropped = bytes(self._head), bytes(self._tail), self._dropped
        self._head, self._tail, self._dropped = bytearray(), bytearray(), 0
        text = plain(head.decode("utf-8", "replace"))
        if dropped:
            text += f"\n[... {dropped} bytes of output cut ...]\n"
        return text + plain(tail.decode("utf-8", "replace")) if tail else text

    def render(self) -> str:
        """The screen, after everything the terminal wrote (redrawn from the tail after a flood)."""
        if self._overflowed:
            self.screen.reset()
            self.decoder.reset()
            self._overflowed = False
        self.screen.feed(self.decoder.decode(bytes(self._pending)))
        self._pending = bytearray()
        return self.screen.text()

    # -- the shell's state --------------------------------------------------------------------------------

    def foreground(self) -> int | None:
        """The terminal's foreground process group."""
        try:
            return os.tcgetpgrp(self.master)
        except OSError:
            return None

    def at_prompt(self) -> bool:
        """Whether the shell holds its terminal (it is the foreground process group) and has read everything
        typed."""
        return self.foreground() == self.pid and self.all_read()

    def all_read(self) -> bool:
        """Whether whoever holds the terminal has read everything typed into it."""
        try:
            return struct.unpack("i", fcntl.ioctl(self.slave, termios.FIONREAD, b"\0\0\0\0"))[0] == 0
        except OSError:
            return False

    def reap(self) -> None:
        """Record the shell's exit status once it has exited."""
        if self.exited is None:
            try:
                pid, status = os.waitpid(self.pid, os.WNOHANG)
            except ChildProcessError:
                return
            if pid:
                self.exited = os.waitstatus_to_exitcode(status)

    def watched(self) -> list[int]:
        """What the terminal's waits select on: its output, and the shell's end until it has ended."""
        return [self.master] if self.exited is not None else [self.master, self.pidfd]

    def wait(self, typing: bytes, timeout_s: float) -> bytes:
        """Wait up to ``timeout_s`` for output or the shell's end, typing what the terminal takes of ``typing``;
        returns what is left to type."""
        readable, writable, _ = select.select(self.watched(), [self.master] if typing else [], [],
                                              max(0.0, timeout_s))
        if self.pidfd in readable:
            self.reap()
        if self.master in readable:
            self.drain()
        if writable:
            try:
                typing = typing[os.write(self.master, typing):]
            except BlockingIOError:
                pass
            except OSError:  # no reader at all: the shell is gone, its exit is on its way
                typing = b""
        return typing

    def command(self, text: bytes) -> bytes:
        """``text`` as typed to run it: pasted (bracketed, so a tab is a tab and several lines are one input)
        when the shell is at its prompt and its line editor said it takes pastes, then Enter."""
        if self.pastes and self.at_prompt():
            return PASTE_START + text.replace(PASTE_END, b"") + PASTE_END + b"\r"
        return text + b"\r"

    def act(self, typing: bytes, *, timeout_s: float, until_prompt: bool) -> bool:
        """Type ``typing``, then wait: until the shell is back at its prompt (``until_prompt``, see the
        module's docstring), else for all of ``timeout_s``. Returns whether the wait hit ``timeout_s``."""
        self.drain()
        deadline = time.monotonic() + timeout_s
        held = not self.at_prompt()  # a program holds the terminal, or has not read what was typed before
        # ... and prints no prompt of ours (not a shell in the shell): its output going quiet ends the wait.
        quiet_ends = held and self.foreground() != self.prompter
        several = not typing.startswith(PASTE_START) and typing.rstrip(b"\r").count(b"\r") + typing.count(b"\n") > 0
        self.last_output = time.monotonic()
        back = False  # the latest prompt came with everything typed read
        while self.exited is None:
            now = time.monotonic()
            if until_prompt and not typing:
                if back:
                    if not several:
                        return False
                    # A later line's echo comes right after an earlier line's prompt: wait until it is still.
                    prompts = self.prompts
                    if not select.select([self.master], [], [], SETTLE_S)[0]:
                        return False
                    self.drain()
                    back = self.prompts > prompts and self.back(held)
                    continue
                if quiet_ends and now - self.last_output >= QUIET_S:
                    return False
            if now >= deadline:
                return until_prompt
            limit = deadline - now
            if until_prompt and quiet_ends and not typing:
                limit = min(limit, self.last_output + QUIET_S - now)
            prompts = self.prompts
            typing = self.wait(typing, limit)
            if self.prompts > prompts and not typing:
                back = self.back(held)
        return False

    def back(self, held: bool) -> bool:
        """Whether a prompt that just came ends the action: everything typed was read, and the shell holds the
        terminal, unless a program held it as the action was typed (a shell in the shell prints the prompt
        too). A prompt written as the action was typed cannot end it: the command holds the terminal then, or
        has not been read."""
        return self.all_read() and (held or self.at_prompt())

    def reply(self, timed_out: bool) -> dict[str, Any]:
        """What the host is told after an action: see the module's docstring."""
        self.drain()
        return {"output": self.new_output(), "screen": self.render(), "alternate": self.screen.alternate,
                "timed_out": timed_out, "exited": self.exited}

    def close(self) -> None:
        """Hang up the terminal: its session gets SIGHUP (the verification kills the agent's uid anyway)."""
        for fd in (self.master, self.slave, self.pidfd):
            try:
                os.close(fd)
            except OSError:
                pass
