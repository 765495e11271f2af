"""The action daemon: one X client that injects input through XTest and captures the screen with GetImage,
in this process (no program is started per action), and waits for the screen to settle after each action.

Run by the supervisor as its own unprivileged user (it can signal or trace none of the display, browser or
recorder processes), with one JSON action per line on stdin (already checked by
``deepgym_runner.episode.computer.parse_action``) and one JSON reply per line on stdout::

    {"settle_ms": 140, "settled": true, "png": "<base64>", "width": 1024, "height": 768}

**Settling.** After an action the screen is captured every :data:`POLL_S`; it has settled once
:data:`QUIET_S` passed without a change (successive captures compared byte for byte, which costs a memcmp),
or at the cap :data:`SETTLE_CAP_S` (``settled`` false then). The reply's ``settle_ms`` is how long that took.
"""

from __future__ import annotations

import base64
import json
import struct
import sys
import time
import zlib

from Xlib import X, XK, display
from Xlib.ext import xtest

POLL_S = 0.03
QUIET_S = 0.12
SETTLE_CAP_S = 3.0
CONNECT_S = 10.0
# A pause between the events of one action: the browser reads input in batches, and a press and release in
# the same batch can be coalesced into nothing (a double click needs them apart too).
EVENT_GAP_S = 0.008
TYPE_GAP_S = 0.004
PNG_LEVEL = 1


def png(width: int, height: int, bgrx: bytes) -> bytes:
    """A PNG (8-bit RGB, no filter) of a 32-bit ZPixmap in the X server's BGRX order."""
    rgb = bytearray(width * height * 3)
    rgb[0::3] = bgrx[2::4]
    rgb[1::3] = bgrx[1::4]
    rgb[2::3] = bgrx[0::4]
    stride = width * 3
    raw = b"".join(b"\x00" + bytes(rgb[row * stride:(row + 1) * stride]) for row in range(height))

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xffffffff)

    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(raw, PNG_LEVEL))
            + chunk(b"IEND", b""))


class Screen:
    """The X display as the agent drives it."""

    def __init__(self, name: str = ":0"):
        give_up = time.monotonic() + CONNECT_S
        while True:
            try:
                self.display = display.Display(name)
                break
            except Exception:  # noqa: BLE001 - the server may not listen yet; retried until the deadline
                if time.monotonic() > give_up:
                    raise
                time.sleep(0.02)
        if not self.display.query_extension("XTEST"):
            raise RuntimeError("the X server has no XTEST extension")
        self.root = self.display.screen().root
        geometry = self.root.get_geometry()
        self.width, self.height = geometry.width, geometry.height

    def capture(self) -> bytes:
        return self.root.get_image(0, 0, self.width, self.height, X.ZPixmap, 0xffffffff).data

    def _fake(self, kind: int, detail: int = 0, x: int = 0, y: int = 0) -> None:
        if kind == X.MotionNotify:
            xtest.fake_input(self.display, kind, x=x, y=y)
        else:
            xtest.fake_input(self.display, kind, detail)
        self.display.sync()

    def move(self, x: int, y: int) -> None:
        self._fake(X.MotionNotify, x=x, y=y)

    def click(self, button: int, count: int = 1) -> None:
        for _ in range(count):
            self._fake(X.ButtonPress, button)
            time.sleep(EVENT_GAP_S)
            self._fake(X.ButtonRelease, button)
            time.sleep(EVENT_GAP_S)

    def keycode(self, keysym: int) -> tuple[int, bool]:
        """The keycode of ``keysym`` and whether shift is needed for it."""
        code = self.display.keysym_to_keycode(keysym)
        if not code:
            raise ValueError(f"the keyboard has no key for keysym {keysym:#x}")
        return code, self.display.keycode_to_keysym(code, 0) != keysym

    def press(self, keysyms: list[int]) -> None:
        """Press ``keysyms`` in order (a combination: modifiers first), then release them in reverse."""
        codes = []
        for keysym in keysyms:
            code, shifted = self.keycode(keysym)
            if shifted and len(keysyms) == 1:
                codes.append(self.keycode(XK.string_to_keysym("Shift_L"))[0])
            codes.append(code)
        for code in codes:
            self._fake(X.KeyPress, code)
            time.sleep(TYPE_GAP_S)
        for code in reversed(codes):
            self._fake(X.KeyRelease, code)
            time.sleep(TYPE_GAP_S)

    def type(self, text: str) -> None:
        for char in text:
            name = {"\n": "Return", "\t": "Tab"}.get(char)
            self.press([XK.string_to_keysym(name) if name else ord(char)])

    def settle(self, since: float) -> tuple[bytes, float, bool]:
        """The screen once it stopped changing: (pixels, seconds waited since ``since``, settled)."""
        last = self.capture()
        changed = time.monotonic()
        while True:
            now = time.monotonic()
            if now - changed >= QUIET_S:
                return last, now - since, True
            if now - since >= SETTLE_CAP_S:
                return last, now - since, False
            time.sleep(POLL_S)
            current = self.capture()
            if current != last:
                last, changed = current, time.monotonic()

    def act(self, action: dict) -> None:
        kind = action["action_type"]
        if kind in ("click", "double_click", "right_click", "move", "drag"):
            self.move(action["x"], action["y"])
            time.sleep(EVENT_GAP_S)
        if kind == "click":
            self.click(1)
        elif kind == "double_click":
            self.click(1, 2)
        elif kind == "right_click":
            self.click(3)
        elif kind == "drag":
            self._fake(X.ButtonPress, 1)
            steps = 8
            for step in range(1, steps + 1):
                time.sleep(EVENT_GAP_S)
                self.move(action["x"] + (action["to_x"] - action["x"]) * step // steps,
                          action["y"] + (action["to_y"] - action["y"]) * step // steps)
            time.sleep(EVENT_GAP_S)
            self._fake(X.ButtonRelease, 1)
        elif kind == "type":
            self.type(action["content"])
        elif kind == "key":
            self.press([XK.string_to_keysym(name) if len(name) > 1 else ord(name) for name in action["keys"]])
        elif kind == "scroll":
            if action.get("x") is not None:
                self.move(action["x"], action["y"])
                time.sleep(EVENT_GAP_S)
            self.click(4 if action["content"] == "up" else 5, action["amount"])
        elif kind == "wait":
            time.sleep(action.get("amount") or 1)


def main() -> int:
    screen = Screen()
    out = sys.stdout
    out.write(json.dumps({"ready": True, "width": screen.width, "height": screen.height}) + "\n")
    out.flush()
    for line in sys.stdin:
        action = json.loads(line)
        started = time.monotonic()
        problem = None
        try:
            screen.act(action)
        except ValueError as exc:
            problem = str(exc)
        acted = time.monotonic()
        pixels, waited, settled = screen.settle(acted)
        encoded = png(screen.width, screen.height, pixels)
        out.write(json.dumps({"act_ms": round((acted - started) * 1000, 1), "settle_ms": round(waited * 1000, 1),
                              "settled": settled, "problem": problem,
                              "png_ms": round((time.monotonic() - acted - waited) * 1000, 1),
                              "png": base64.b64encode(encoded).decode()}) + "\n")
        out.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
