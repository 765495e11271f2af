"""A real browser for the report tests: headless Chromium renders a page to a screenshot and to its DOM, and a
small PNG reader (the standard library's zlib) counts the screenshot's colours."""

from __future__ import annotations

import shutil
import struct
import subprocess
import zlib
from collections import Counter
from pathlib import Path

from support import unavailable

FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--force-color-profile=srgb", "--hide-scrollbars",
         "--allow-file-access-from-files"]


def chromium() -> str:
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    if found is None:
        unavailable("the report tests need Chromium on the host (apt-get install chromium)")
    return found


def screenshot(page: Path, size: tuple[int, int] = (1100, 1400), fragment: str = "") -> Path:
    """The page as the browser draws it (opened at ``#fragment``, if given), in a PNG next to it."""
    shot = page.with_name(f"{page.stem}{'-' + fragment if fragment else ''}.png")
    url = page.resolve().as_uri() + (f"#{fragment}" if fragment else "")
    done = subprocess.run([chromium(), *FLAGS, f"--window-size={size[0]},{size[1]}", f"--screenshot={shot}", url],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and shot.is_file(), f"chromium drew nothing: {done.stderr[-2000:]}"
    return shot


def dom(page: Path) -> str:
    """The page's DOM after the browser parsed and laid it out."""
    done = subprocess.run([chromium(), *FLAGS, "--dump-dom", page.resolve().as_uri()], capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, f"chromium failed: {done.stderr[-2000:]}"
    return done.stdout


def pixels(png: Path) -> Counter[tuple[int, int, int]]:
    """How many pixels of each RGB colour a PNG (8-bit RGB or RGBA, not interlaced) has."""
    data = png.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n", f"{png} is not a PNG"
    offset, chunks, header = 8, [], b""
    while offset < len(data):
        length, kind = struct.unpack(">I4s", data[offset:offset + 8])
        body = data[offset + 8:offset + 8 + length]
        if kind == b"IHDR":
            header = body
        elif kind == b"IDAT":
            chunks.append(body)
        offset += 12 + length
    width, height, depth, color, _, _, interlace = struct.unpack(">IIBBBBB", header)
    assert depth == 8 and color in (2, 6) and not interlace, f"unexpected PNG format {depth=} {color=}"
    channels = 3 if color == 2 else 4
    raw = zlib.decompress(b"".join(chunks))
    stride = width * channels
    previous = bytearray(stride)
    counts: Counter[tuple[int, int, int]] = Counter()
    for row in range(height):
        start = row * (stride + 1)
        kind, line = raw[start], bytearray(raw[start + 1:start + 1 + stride])
        for i in range(stride):
            left = line[i - channels] if i >= channels else 0
            up, corner = previous[i], previous[i - channels] if i >= channels else 0
            if kind == 1:
                line[i] = (line[i] + left) & 0xFF
            elif kind == 2:
                line[i] = (line[i] + up) & 0xFF
            elif kind == 3:
                line[i] = (line[i] + (left + up) // 2) & 0xFF
            elif kind == 4:
                guess = left + up - corner
                near = min((abs(guess - left), 0, left), (abs(guess - up), 1, up), (abs(guess - corner), 2, corner))
                line[i] = (line[i] + near[2]) & 0xFF
        counts.update(zip(line[0::channels], line[1::channels], line[2::channels]))
        previous = line
    return counts


def rgb(hex_color: str) -> tuple[int, int, int]:
    return tuple(int(hex_color[i:i + 2], 16) for i in (1, 3, 5))
