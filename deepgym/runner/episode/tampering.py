"""What the agent left that a script verifier's test run would load instead of, or beside, its own code.

:func:`find` walks every folder the agent could write (the root file system is read-only, so these are all)
and names each file the agent created or changed, compared with the image's starting workspace, that is:

- ``conftest.py``, ``pytest.ini`` or ``.pytest.ini``; a ``pyproject.toml``, ``tox.ini`` or ``setup.cfg`` with a
  pytest section: pytest's own configuration and plugins;
- ``sitecustomize.py``, ``usercustomize.py`` or a ``.pth`` file: Python runs them at start-up;
- an executable (or a link) named like a tool the tests' scripts name, found on the system's ``PATH`` or the
  task's: a shadow of ``python3``, ``pytest``, ``git``...;
- a module (``X.py``, ``X.pyc``, ``X.so``, a package ``X/__init__.py``) at the top of the workspace, the
  directory ``python3 -m pytest`` puts first on ``sys.path``, named like a module the test run imports: the
  standard library's, or one installed in the image (``pytest.py``, ``json.py``).

It is deliberately broad: the check cannot know which of these the test run would reach, so an agent whose
task never asked for such a file loses nothing by not writing one. Files the image started with and the agent
left unchanged are never named. Only the standard library; it runs as root over the agent's files, which it
reads as data and never follows a link of.
"""

from __future__ import annotations

import contextlib
import os
import pkgutil
import re
import sys
from collections.abc import Callable, Iterator

from ..confine.privileges import FileRights

PYTEST_FILES = ("conftest.py", "pytest.ini", ".pytest.ini")
PYTEST_SECTIONS = {"pyproject.toml": b"[tool.pytest", "tox.ini": b"[pytest]", "setup.cfg": b"[tool:pytest]"}
STARTUP_FILES = ("sitecustomize.py", "usercustomize.py")
MODULE_SUFFIXES = (".py", ".pyc", ".so", ".pyw")
SYSTEM_PATH = "/usr/local/bin:/usr/bin:/bin"
# A walk this long is refused (scored 0 by the caller) rather than left to run on.
MAX_ENTRIES = 400_000
_WORD = re.compile(r"[A-Za-z0-9_.+-]+")


def find(folders: list[str], *, uid: int, workspace: str, start: str, script: str, path: str = "") -> list[str]:
    """Why each file the test run would load is the agent's (``path/name: reason``), in walk order; empty when
    none is. The walk has the agent's (``uid``'s) file rights, so it lists every folder of the agent's whatever
    its mode; one it still cannot list that others may enter is named too. ``workspace`` is compared with
    ``start`` (the image's starting copy of it); ``script`` is the text of the tests' shell scripts, whose words
    name the tools to look for on ``path`` and the system's PATH."""
    tools = _tools(script, f"{path}:{SYSTEM_PATH}")
    modules = _modules()
    found: list[str] = []

    def unlisted(error: OSError) -> None:
        with contextlib.suppress(OSError):
            if os.lstat(error.filename).st_mode & 0o001:
                found.append(f"{error.filename}: a folder others may enter that cannot be listed")

    entries = 0
    with FileRights(uid):
        for folder in folders:
            for root, dirs, files in _walk(folder, unlisted):
                entries += len(dirs) + len(files)
                if entries > MAX_ENTRIES:
                    return found + [f"{folder}: more than {MAX_ENTRIES} files and folders, too many to check"]
                top = root == workspace
                for name in files + [name for name in dirs if os.path.islink(os.path.join(root, name))]:
                    full = os.path.join(root, name)
                    reason = _reason(full, name, tools, modules if top else frozenset())
                    if reason and _agents(full, workspace, start):
                        found.append(f"{full}: {reason}")
                if top:
                    found += [f"{os.path.join(root, name)}: a package shadowing the module {name} the test run "
                              f"imports" for name in dirs if name in modules
                              and os.path.isfile(os.path.join(root, name, "__init__.py"))
                              and _agents(os.path.join(root, name, "__init__.py"), workspace, start)]
    return found


def _walk(top: str, onerror: Callable[[OSError], None]) -> Iterator[tuple[str, list[str], list[str]]]:
    """``os.walk(top)`` top-down, links not followed, without recursion: Python 3.11's os.walk recurses once
    per level, and the agent may nest folders a few thousand deep (a RecursionError here would be no verdict)."""
    stack = [top]
    while stack:
        root = stack.pop()
        try:
            with os.scandir(root) as listing:
                entries = list(listing)
        except OSError as exc:
            onerror(exc)
            continue
        dirs, files, below = [], [], []
        for entry in entries:
            try:
                folder, link = entry.is_dir(), entry.is_symlink()  # as os.walk: a link to a folder is in dirs
            except OSError:
                folder, link = False, False
            (dirs if folder else files).append(entry.name)
            if folder and not link:
                below.append(entry.path)
        yield root, dirs, files
        stack += reversed(below)


def _reason(full: str, name: str, tools: frozenset[str], modules: frozenset[str]) -> str | None:
    if name in PYTEST_FILES:
        return "pytest loads it"
    if name in PYTEST_SECTIONS and PYTEST_SECTIONS[name] in _head(full):
        return "pytest's configuration"
    if name in STARTUP_FILES or name.endswith(".pth"):
        return "Python runs it at start-up"
    if name in tools and (os.path.islink(full) or os.lstat(full).st_mode & 0o111):
        return f"a shadow of the tool {name} the tests call"
    if name.endswith(MODULE_SUFFIXES) and name.split(".", 1)[0] in modules:
        return f"shadows the module {name.split('.', 1)[0]} the test run imports"
    return None


def _agents(full: str, workspace: str, start: str) -> bool:
    """Whether the agent made ``full``: anything outside the workspace, and in it what the starting copy does
    not hold byte for byte."""
    if os.path.commonpath([full, workspace]) != workspace:
        return True
    original = os.path.join(start, os.path.relpath(full, workspace))
    if os.path.islink(full) or os.path.islink(original) or not os.path.isfile(original):
        return True
    return _head(full, -1) != _head(original, -1)


def _head(path: str, size: int = 1 << 20) -> bytes:
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return b""
    with os.fdopen(fd, "rb") as f:
        return f.read(size)


def _tools(script: str, path: str) -> frozenset[str]:
    """The words of ``script`` that name an executable on ``path``."""
    folders = [folder for folder in path.split(":") if folder]
    return frozenset(word for word in set(_WORD.findall(script))
                     if any(os.access(os.path.join(folder, word), os.X_OK) for folder in folders))


def _modules() -> frozenset[str]:
    """Top-level modules a Python test run may import: the standard library's and the image's installed ones."""
    installed = {module.name for module in pkgutil.iter_modules([p for p in sys.path if p and os.path.isdir(p)])}
    return frozenset(sys.stdlib_module_names) | installed
