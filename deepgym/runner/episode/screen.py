"""What a persistent terminal shows: the screen a terminal would display, and the plain text of its output.

A terminal's output is text mixed with control sequences (the cursor moved, a line erased, colours, a
full-screen program switching to the alternate screen). The agent is shown two readings of it
(:mod:`deepgym.runner.episode.terminal`): :class:`Screen`, the rows a VT100/xterm-like display holds after
the bytes (what ``less``, an editor or a REPL leave visible), and :func:`plain`, the new output as lines of
text with every control sequence removed and carriage returns applied (a progress bar's last state, not its
every frame). Standard library only, and bounded: nothing here grows with the output beyond the screen.

Unknown sequences are skipped whole, never shown: a program can only make its own screen wrong.
"""

from __future__ import annotations

import re

# ESC [ ... final, ESC ] ... BEL or ESC \, ESC P/X/^/_ ... ESC \, ESC ( x and friends, any other ESC x.
_ESCAPES = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b[\]PX^_][^\x07\x1b]*(?:\x07|\x1b\\)?|\x1b[()*+#%][ -~]?"
                      r"|\x1b[ -~]?|\x9b[0-?]*[ -/]*[@-~]")
_CONTROLS = re.compile(r"[\x00-\x07\x0b-\x0c\x0e-\x1f\x7f]")
# An escape sequence cut off at the end of what was fed: the rest comes with the next feed.
_PARTIAL = re.compile(r"(?:\x1b(?:\[[0-?]*[ -/]*|[\]PX^_][^\x07\x1b]*\x1b?|[()*+#%])?|\x9b[0-?]*[ -/]*)\Z")
MAX_SEQUENCE = 4096
TAB = 8


def plain(text: str) -> str:
    """``text`` as the lines it leaves in a scrolling terminal: escape sequences removed, ``\\r`` returning to
    the start of its line (what follows overwrites), backspace stepping back, other control characters
    dropped."""
    lines = []
    for raw in _ESCAPES.sub("", text).replace("\r\n", "\n").split("\n"):
        line: list[str] = []
        col = 0
        for char in raw:
            if char == "\r":
                col = 0
            elif char == "\b":
                col = max(0, col - 1)
            elif char == "\t":
                col = (col // TAB + 1) * TAB
                line.extend(" " * (col - len(line)))
            elif not _CONTROLS.match(char):
                if col < len(line):
                    line[col] = char
                else:
                    line.extend(" " * (col - len(line)))
                    line.append(char)
                col += 1
        lines.append("".join(line).rstrip())
    return "\n".join(lines)


class Screen:
    """A ``rows`` by ``cols`` display fed with a terminal's output (:meth:`feed`): the subset of xterm that
    shells, readline, REPLs, pagers and editors use. :meth:`text` is what it shows."""

    def __init__(self, rows: int, cols: int):
        self.rows, self.cols = rows, cols
        self.reset()

    def reset(self) -> None:
        self.lines = self._blank(self.rows)
        self.x = self.y = 0
        self.top, self.bottom = 0, self.rows - 1
        self.saved = (0, 0)
        self.main: list[list[str]] | None = None  # the main screen while the alternate one shows
        self.wrap_next = False
        self._state = ""  # the unfinished escape sequence carried over from the last feed

    @property
    def alternate(self) -> bool:
        """Whether a full-screen program switched to the alternate screen (its output is not a transcript)."""
        return self.main is not None

    def text(self) -> str:
        """The screen's rows, trailing spaces and trailing empty rows removed."""
        return "\n".join("".join(row).rstrip() for row in self.lines).rstrip("\n")

    def feed(self, text: str) -> None:
        text = self._state + text
        self._state = ""
        i, n = 0, len(text)
        while i < n:
            char = text[i]
            if char == "\x1b" or char == "\x9b":
                if _PARTIAL.match(text, i) and n - i < MAX_SEQUENCE:
                    self._state = text[i:]  # finished by the next feed
                    return
                match = _ESCAPES.match(text, i)
                end = match.end() if match else i + 1
                self._escape(text[i:end])
                i = end
                continue
            self._char(char)
            i += 1

    def _blank(self, count: int) -> list[list[str]]:
        return [[" "] * self.cols for _ in range(count)]

    def _char(self, char: str) -> None:
        if char == "\n" or char == "\x0b" or char == "\x0c":
            self._index()
        elif char == "\r":
            self.x, self.wrap_next = 0, False
        elif char == "\b":
            self.x, self.wrap_next = max(0, self.x - 1), False
        elif char == "\t":
            self.x = min(self.cols - 1, (self.x // TAB + 1) * TAB)
        elif not _CONTROLS.match(char):
            if self.wrap_next:
                self.x, self.wrap_next = 0, False
                self._index()
            self.lines[self.y][self.x] = char
            if self.x == self.cols - 1:
                self.wrap_next = True
            else:
                self.x += 1

    def _index(self) -> None:
        """Down a line, scrolling the region when at its bottom."""
        self.wrap_next = False
        if self.y == self.bottom:
            self._scroll(1)
        elif self.y < self.rows - 1:
            self.y += 1

    def _scroll(self, count: int) -> None:
        """Scroll the region up by ``count`` (down when negative)."""
        count = max(-self.rows, min(self.rows, count))
        region = self.lines[self.top:self.bottom + 1]
        if count > 0:
            region = region[count:] + self._blank(min(count, len(region)))
        elif count < 0:
            region = self._blank(min(-count, len(region))) + region[:count]
        self.lines[self.top:self.bottom + 1] = region[:self.bottom + 1 - self.top]

    def _escape(self, sequence: str) -> None:
        if sequence.startswith(("\x1b[", "\x9b")):
            body = sequence[2:] if sequence[0] == "\x1b" else sequence[1:]
            if body and "@" <= body[-1] <= "~":  # a CSI cut short by another escape is dropped
                self._csi(body[:-1], body[-1])
        elif sequence == "\x1bD":
            self._index()
        elif sequence == "\x1bE":
            self.x = 0
            self._index()
        elif sequence == "\x1bM":
            if self.y == self.top:
                self._scroll(-1)
            elif self.y > 0:
                self.y -= 1
        elif sequence == "\x1b7":
            self.saved = (self.x, self.y)
        elif sequence == "\x1b8":
            self.x, self.y = self.saved
        elif sequence == "\x1bc":
            self.reset()

    def _csi(self, params: str, final: str) -> None:
        private = params[:1] in ("?", ">", "=", "<")
        # At most 9 digits a parameter: int() refuses over 4300, and a screen is far smaller anyway.
        numbers = [int(p[:9]) if p.isascii() and p.isdigit() else 0
                   for p in (params[1:] if private else params).split(";")]
        first = numbers[0] or 1
        self.wrap_next = False
        if private:
            if final in "hl" and any(n in (47, 1047, 1049) for n in numbers):
                self._alternate(final == "h")
            return
        if final == "A":
            self.y = max(self.top if self.y >= self.top else 0, self.y - first)
        elif final in "Be":
            self.y = min(self.bottom if self.y <= self.bottom else self.rows - 1, self.y + first)
        elif final in "Ca":
            self.x = min(self.cols - 1, self.x + first)
        elif final == "D":
            self.x = max(0, self.x - first)
        elif final in "EF":
            self.x, self.y = 0, max(0, min(self.rows - 1, self.y + (first if final == "E" else -first)))
        elif final in "G`":
            self.x = min(self.cols - 1, first - 1)
        elif final == "d":
            self.y = min(self.rows - 1, first - 1)
        elif final in "Hf":
            self.y = min(self.rows - 1, first - 1)
            self.x = min(self.cols - 1, (numbers[1] if len(numbers) > 1 and numbers[1] else 1) - 1)
        elif final == "J":
            self._erase_display(numbers[0])
        elif final == "K":
            row = self.lines[self.y]
            start, end = {0: (self.x, self.cols), 1: (0, self.x + 1)}.get(numbers[0], (0, self.cols))
            row[start:end] = [" "] * (end - start)
        elif final in "LM" and self.top <= self.y <= self.bottom:
            top, self.top = self.top, self.y
            self._scroll(-first if final == "L" else first)
            self.top = top
        elif final in "@P":
            row = self.lines[self.y]
            count = min(first, self.cols - self.x)
            if final == "@":
                row[self.x:] = ([" "] * count + row[self.x:])[:self.cols - self.x]
            else:
                row[self.x:] = row[self.x + count:] + [" "] * count
        elif final == "X":
            end = min(self.cols, self.x + first)
            self.lines[self.y][self.x:end] = [" "] * (end - self.x)
        elif final in "ST":
            self._scroll(first if final == "S" else -first)
        elif final == "r":
            top = (numbers[0] or 1) - 1
            bottom = (numbers[1] if len(numbers) > 1 and numbers[1] else self.rows) - 1
            if 0 <= top < bottom < self.rows:
                self.top, self.bottom = top, bottom
                self.x = self.y = 0
        elif final == "s":
            self.saved = (self.x, self.y)
        elif final == "u":
            self.x, self.y = self.saved

    def _erase_display(self, how: int) -> None:
        if how == 0:
            self.lines[self.y][self.x:] = [" "] * (self.cols - self.x)
            self.lines[self.y + 1:] = self._blank(self.rows - self.y - 1)
        elif how == 1:
            self.lines[:self.y] = self._blank(self.y)
            self.lines[self.y][:self.x + 1] = [" "] * (self.x + 1)
        else:
            self.lines = self._blank(self.rows)

    def _alternate(self, on: bool) -> None:
        """Switch to the alternate screen (saving the main one and the cursor) or back."""
        if on and self.main is None:
            self.main, self.saved = self.lines, (self.x, self.y)
            self.lines = self._blank(self.rows)
        elif not on and self.main is not None:
            self.lines, self.main = self.main, None
            self.x, self.y = self.saved
