"""The diff text's boundary (see :mod:`channels`): a unified diff parsed as strictly as git does, into the exact
bytes the patch applier gets and the files they touch, or the :class:`channels.Fault` it is refused as
(``invalid_patch``; ``test_infra_tampering`` for quoted paths). Never raises on any input.

Only patch tasks parse a diff, so only their runner pays for :mod:`re`, here at import. The host's extractor
reads hunks with the same header pattern (:data:`HUNK_HEADER`).
"""

from __future__ import annotations

import re

from .channels import Fault, plain, source
from .protocol import Record

MAX_PATH_PARTS = 16
# A fix touching more files than this is not a fix; the parser would hold them all in memory.
MAX_DIFF_FILES = 1000
# Counts of at most 9 ASCII digits: a longer one is no hunk header (int() would refuse over 4300 digits), and
# \d would also take other scripts' digits. The host's extractor (deepgym/extract.py) reads hunks by this too
# (HUNK_HEADER).
HUNK_HEADER = re.compile(r"^@@ -[0-9]{1,9}(?:,(?P<old>[0-9]{1,9}))? \+[0-9]{1,9}(?:,(?P<new>[0-9]{1,9}))? @@")
GIT_HEADER = re.compile(r"^diff --git (\S+) (\S+)$")
_EXTENDED = ("index ", "similarity index ", "dissimilarity index ", "rename from ", "rename to ", "copy from ",
             "copy to ", "old mode ", "new mode ", "new file mode ", "deleted file mode ")
# Lines that GNU patch would read as file names or another diff format: refused, so that nothing can reach
# the applier that this parser did not see.
_FOREIGN = ("Index: ", "Prereq: ", "*** ", "***************", "==== ")


class _Refused(Exception):
    """Raised inside the diff parser only; :func:`parse` turns it into a Fault."""

    def __init__(self, error_type: str, message: str):
        super().__init__(message)
        self.error_type = error_type


class FilePatch:
    """One file's part of a diff, as the parser sees it."""

    __slots__ = ("paths", "modes", "mode_change", "renamed", "binary", "hunks")

    def __init__(self) -> None:
        self.paths: list[str] = []
        self.modes: list[str] = []
        self.mode_change = self.renamed = self.binary = False
        self.hunks = 0


class Diff(Record):
    """A diff the parser accepted: the exact bytes the applier gets, and the files they touch."""

    data: bytes
    files: list[FilePatch]


def parse(text: str, scratch_bytes: int) -> Diff | Fault:
    """The diff text's boundary: its bytes and files, or why it is refused (see :func:`channels.source`)."""
    data = source(text if text.endswith("\n") else text + "\n", "invalid_patch", scratch_bytes)
    if isinstance(data, Fault):
        return data
    try:
        return Diff(data, _parse_diff(text))
    except _Refused as exc:
        return Fault(exc.error_type, plain(str(exc)))


def _strip_prefix(raw: str) -> str | None:
    """A diff path as it lands in the repository with -p1, or None for /dev/null."""
    raw = raw.split("\t")[0].strip()
    if raw == "/dev/null":
        return None
    if raw.startswith('"'):
        raise _Refused("test_infra_tampering", f"quoted path {raw[:100]} (unusual characters) is not accepted")
    parts = raw.split("/", 1)
    if len(parts) != 2 or not parts[1]:
        raise _Refused("invalid_patch", f"path {raw[:100]!r} has no a/ or b/ prefix to strip (-p1)")
    return parts[1]


def _hunk_end(lines: list[str], start: int, old: int, new: int) -> int:
    """The index after a hunk body that holds ``old`` old-side and ``new`` new-side lines (as git counts)."""
    i = start
    while old > 0 or new > 0:
        if i >= len(lines) and old == new:
            break  # trailing blank context lines, trimmed with the response's trailing whitespace (git accepts it)
        if i >= len(lines):
            raise _Refused("invalid_patch", "a hunk ends before the line counts in its header are reached")
        line = lines[i]
        kind = line[:1] if line else " "
        if kind == " ":
            old, new = old - 1, new - 1
        elif kind == "-":
            old -= 1
        elif kind == "+":
            new -= 1
        elif kind != "\\":
            raise _Refused("invalid_patch", f"line {i + 1} inside a hunk starts with neither space, + nor -: "
                                            f"{line[:80]!r}")
        i += 1
    while i < len(lines) and lines[i].startswith("\\"):
        i += 1
    return i


def _parse_diff(text: str) -> list[FilePatch]:
    """The files a unified diff touches, parsed as strictly as git does (line counts of at most 9 digits)."""
    files: list[FilePatch] = []
    current: FilePatch | None = None
    headers = False  # the current file has its ---/+++ lines
    lines = text.split("\n")
    i = 0
    while i < len(lines) and len(files) <= MAX_DIFF_FILES:
        line = lines[i]
        git_header = GIT_HEADER.match(line)
        if git_header:
            current, headers = FilePatch(), False
            files.append(current)
            current.paths += [p for p in (_strip_prefix(git_header[1]), _strip_prefix(git_header[2])) if p]
        elif line.startswith("--- "):
            if i + 1 >= len(lines) or not lines[i + 1].startswith("+++ "):
                raise _Refused("invalid_patch", f"line {i + 1}: a '--- ' file header without its '+++ ' line")
            if current is None or headers:
                current = FilePatch()
                files.append(current)
            headers = True
            current.paths += [p for p in (_strip_prefix(line[4:]), _strip_prefix(lines[i + 1][4:])) if p]
            i += 1
        elif line.startswith("+++ "):
            raise _Refused("invalid_patch", f"line {i + 1}: a '+++ ' file header without its '--- ' line")
        elif line.startswith("@@"):
            match = HUNK_HEADER.match(line)
            if current is None or not headers or match is None:
                raise _Refused("invalid_patch", f"line {i + 1} is not a valid hunk header or has no file header: "
                                                f"{line[:80]!r}")
            old, new = (int(n) if n is not None else 1 for n in match.groups())
            current.hunks += 1
            i = _hunk_end(lines, i + 1, old, new)
            continue
        elif line.startswith(_FOREIGN):
            raise _Refused("invalid_patch", f"line {i + 1} belongs to another diff format: {line[:80]!r}")
        elif current is not None and line.startswith(_EXTENDED):
            if line.startswith(("old mode ", "new mode ")):
                current.mode_change = True
            if line.startswith(("new file mode ", "deleted file mode ", "old mode ", "new mode ")):
                current.modes.append(line.split()[-1])
            if line.startswith(("rename ", "copy ")):
                current.renamed = True
                current.paths.append(line.split(" ", 2)[2])
        elif current is not None and (line.startswith("GIT binary patch") or line.startswith("Binary files ")):
            current.binary = True
        i += 1
    if not files:
        raise _Refused("invalid_patch", "the response contains no unified diff (no ---/+++ or diff --git header)")
    if len(files) > MAX_DIFF_FILES:
        raise _Refused("invalid_patch", f"the diff touches more than {MAX_DIFF_FILES} files")
    for patch in files:
        if patch.binary:
            raise _Refused("invalid_patch", f"binary patches are not accepted ({', '.join(patch.paths)[:200]})")
        if not patch.paths:
            raise _Refused("invalid_patch", "a file header names no file")
        if not patch.hunks and not patch.modes and not patch.renamed:
            raise _Refused("invalid_patch", f"the diff for {patch.paths[0][:100]!r} has no hunks")
        for path in patch.paths:
            if path.count("/") >= MAX_PATH_PARTS:
                raise _Refused("invalid_patch", f"path {path[:100]!r}... is more than {MAX_PATH_PARTS} levels deep")
    return files
