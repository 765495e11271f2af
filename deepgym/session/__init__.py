"""Multi-turn episodes: one :class:`~deepgym.session.episode.Episode` (start, steps until done, a score),
composed with what the agent acts with.

- ``episode.py``: the episode itself: clock and budgets, admission, the outcome fixed once; its small
  :class:`~deepgym.session.episode.Context` (never the whole client).
- ``shell.py``: :class:`Session`, shell commands as an unprivileged agent (:class:`~deepgym.session.shell.ShellActions`).
- ``mounts.py``: an episode's own folders (workspace, the script verifier's) made and proved on a provider whose
  sandboxes have a writable root but no mounts (the remote providers).
- ``terminal.py``: :class:`TerminalSession`, the same episode through one persistent terminal; ``keys.py`` its
  actions (a command, or Harbor's Terminus keystrokes); ``channel.py`` the JSON lines it and a desktop use.
- ``desktop.py``: :class:`DesktopSession`, ``computer`` actions on a browser over the supervisor's channel.
- ``ready.py``: desktops started ahead of need, per client.
- ``rules.py``: the failure table; the final verification's report is classified by :mod:`deepgym.verdict`.

The in-sandbox sides are :mod:`deepgym.runner.episode.verify` and :mod:`deepgym.runner.episode.services` (shell),
:mod:`deepgym.runner.episode.terminal` (the persistent terminal) and the desktop image's supervisor.
"""

from .desktop import DesktopSession
from .results import Observation, StepResult
from .shell import Session
from .terminal import TerminalSession

__all__ = ["DesktopSession", "Observation", "Session", "StepResult", "TerminalSession"]
