"""Recorded episodes, and the page that steps through one.

:class:`Recorder` wraps a live episode (a desktop's, or a shell's) and keeps each observation with the action
that followed it; :meth:`Recorder.save` writes them as one JSON file::

    from deepgym.report import Recorder

    with gym.session("todo_list", variant=3) as session:
        episode = Recorder(session)
        episode.start()
        episode.step({"action_type": "click", "x": 280, "y": 194})
        episode.score()
        episode.save("episode.json")         # then: deepgym report episode.json -o episode.html

The file: ``{"deepgym_episode": 1, "environment", "variant", "frames": [{"text", "png" (base64, or null),
"action" (what the agent did next, null for the last)}], "outcome": the verdict's or no verdict's dict}``. The
page shows one frame at a time, each with its action, and steps with links (no script needed) or the arrow
keys (an inline script); the verdict is at the top.
"""

from __future__ import annotations

import base64
import json
from html import escape
from pathlib import Path
from typing import Any

from .charts import page

FORMAT = 1
STYLE = """
.frame { display: none; } .frame:target { display: block; }
.frames:not(:has(.frame:target)) .frame:first-child { display: block; }
.frame img { max-width: 100%; border: 1px solid #ced4da; } nav a { margin-right: 12px; }
.action { background: #fff3bf; padding: 4px 8px; display: inline-block; margin: 6px 0; }
"""
KEYS = """<script>
document.addEventListener("keydown", function (event) {
  var shown = document.querySelector(".frame:target") || document.querySelector(".frame");
  var next = event.key === "ArrowRight" ? shown.nextElementSibling : event.key === "ArrowLeft" ?
    shown.previousElementSibling : null;
  if (next) { location.hash = next.id; }
});
</script>"""


class Recorder:
    """Records an episode as it is played: its ``start``, ``step`` and ``score`` pass through to the session."""

    def __init__(self, session: Any):
        self.session = session
        self.frames: list[dict[str, Any]] = []
        self.outcome: dict[str, Any] | None = None

    def start(self, **options: Any) -> Any:
        observation = self.session.start(**options)
        self._keep(observation)
        return observation

    def step(self, action: Any, **options: Any) -> Any:
        if self.frames:
            self.frames[-1]["action"] = action
        result = self.session.step(action, **options)
        self._keep(result.observation)
        return result

    def score(self, **options: Any) -> Any:
        """The session's verdict, recorded; a no verdict is recorded too, then raised as the session raises it."""
        try:
            verdict = self.session.score(**options)
        except Exception as exc:
            if hasattr(exc, "to_dict"):
                self.outcome = exc.to_dict()
            raise
        self.outcome = verdict.to_dict()
        return verdict

    def save(self, path: str | Path) -> Path:
        path = Path(path)
        path.write_text(json.dumps({"deepgym_episode": FORMAT, "environment": self.session.env.id,
                                    "variant": self.session.variant, "frames": self.frames,
                                    "outcome": self.outcome}))
        return path

    def _keep(self, observation: Any) -> None:
        png = observation.images[0] if observation.images else None
        self.frames.append({"text": observation.text, "action": None,
                            "png": base64.b64encode(png).decode() if png is not None else None})


def is_recording(path: Path) -> bool:
    """Whether ``path`` is a recorded episode (a JSON object with ``deepgym_episode``), not JSON lines."""
    with path.open("rb") as handle:
        start = handle.read(64)
    return start.lstrip().startswith(b"{\"deepgym_episode\"")


def render(path: Path) -> str:
    """The step-through page of the episode recorded in ``path``."""
    data = json.loads(path.read_text())
    if data.get("deepgym_episode") != FORMAT or not isinstance(data.get("frames"), list):
        raise ValueError(f"{path} is not a version-{FORMAT} recorded episode; record it with deepgym.report.Recorder")
    frames = data["frames"]
    outcome = data.get("outcome") or {}
    if not outcome:
        said = "not scored"
    elif outcome.get("has_verdict"):
        said = f"score {outcome.get('score')}, {'passed' if outcome.get('passed') else outcome.get('error_type')}"
    else:
        said = f"no verdict ({outcome.get('error_type')})"
    sections = []
    for index, frame in enumerate(frames):
        links = [f"<a href=\"#frame-{index - 1}\">&larr; previous</a>" if index else "",
                 f"<a href=\"#frame-{index + 1}\">next &rarr;</a>" if index + 1 < len(frames) else ""]
        image = (f"<img alt=\"screen {index}\" src=\"data:image/png;base64,{frame['png']}\">" if frame.get("png")
                 else "")
        action = frame.get("action")
        after = (f"<div class=\"action\">then: <code>{escape(json.dumps(action))}</code></div>" if action is not None
                 else "<div class=\"action\">the last screen</div>")
        sections.append(f"<section class=\"frame\" id=\"frame-{index}\"><nav><b>frame {index + 1} of {len(frames)}"
                        f"</b> {''.join(links)}</nav><p>{escape(frame.get('text') or '')}</p>{after}<br>{image}"
                        f"</section>")
    body = (f"<p id=\"totals\">{escape(str(data.get('environment')))}, variant {escape(str(data.get('variant')))}: "
            f"<b>{len(frames)}</b> frames, <b>{sum(f.get('action') is not None for f in frames)}</b> actions; "
            f"{escape(said)}</p><div class=\"frames\">{''.join(sections)}</div>{KEYS}")
    return page(f"deepgym episode: {data.get('environment')}", body, STYLE)
