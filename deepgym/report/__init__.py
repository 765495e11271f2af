"""Runs you can see: ``deepgym report FILE -o page.html`` turns a run's results, or one recorded episode, into
one self-contained HTML page (inline CSS and SVG; nothing fetched from anywhere).

- JSON lines from ``deepgym run-batch`` or a log of verl's reward extras (a file, or verl's rollout folder):
  :mod:`deepgym.report.results`;
- an episode recorded with :class:`Recorder`: :mod:`deepgym.report.episode`.

Only the standard library: reports are made where training runs, with nothing more installed.
"""

from __future__ import annotations

from pathlib import Path

from . import episode, results
from .episode import Recorder

__all__ = ["Recorder", "render", "write"]


def render(source: str | Path) -> str:
    """The page for ``source``: an episode's if it is a recorded episode, else a run's results."""
    path = Path(source)
    if not path.exists():
        raise FileNotFoundError(f"{source}: no such file or folder (give run-batch output, a log of verl's reward "
                                f"extras or verl's rollout_data_dir, or a recorded episode)")
    return episode.render(path) if path.is_file() and episode.is_recording(path) else results.render(path)


def write(source: str | Path, output: str | Path) -> Path:
    """Render ``source`` into ``output``; returns it."""
    output = Path(output)
    output.write_text(render(source), encoding="utf-8")
    return output
