"""Desktop episodes: a browser on a web app in one fresh container, driven by ``computer`` actions, scored from
the app's own state events.

::

    with gym.session("todo_list", variant=3) as session:     # a DesktopSession for a desktop environment
        first = session.start()                               # Observation(text, images=(png,))
        step = session.step({"action_type": "click", "x": 300, "y": 200})
        ...
        verdict = session.score()                             # a Verdict, or raises NoVerdictError

**The container** is the environment's image (``FROM desktop``, images/desktop), locked down like every
sandbox (no network, read-only root, a ``noexec`` /tmp, CAP_SETUID, CAP_SETGID and CAP_KILL for root only).
Its main process is the trusted supervisor (``deepgym_desktop``), attached (:meth:`Provider.start_attached
<deepgym.sandbox.base.Provider.start_attached>`, on providers that :attr:`~deepgym.sandbox.base.Provider.attaches`):
the host's requests and its replies cross that one stream as JSON lines (:class:`~deepgym.session.channel.Channel`), so an action costs
no ``docker exec``. The supervisor starts the display, the recorder, the action daemon and the browser, each as a
user of its own, and says ``ready``; the agent has no shell and no process: its only channel is the action,
checked here and again inside (:mod:`deepgym.runner.episode.computer`).

**Prewarmed.** Containers are started ahead of need (:func:`~deepgym.session.ready.ready_desktops`) up to
``ready``. An episode takes one, and it is removed after that episode: never reused.

**Failures** follow the episode table (:func:`deepgym.session.rules.failure_result`): a container that does not
start or become ready is no verdict; one that dies or hangs under the agent's actions is a scored 0
(``policy_sandbox_failure``); the browser closing (the agent closed it through the UI) ends the episode,
which is scored from what the recorder holds; an error of the supervisor is no verdict (``verifier_error``).
"""

from __future__ import annotations

import base64
import json
import socket
import time
from typing import TYPE_CHECKING, Any, Callable

from ..environments import Environment
from ..runner.episode.computer import describe, parse_action
from ..sandbox import ExecOptions, Provider, SandboxLost, SandboxSpec, StartFailure
from ..sandbox.base import IMAGE_PYTHON
from ..verdict import NoVerdictError
from .channel import Channel
from .episode import HOST_GRACE_S, Context, Episode
from .results import Observation, Reply, Verification

if TYPE_CHECKING:
    from ..sandbox.base import AttachedRun

SUPERVISOR = (*IMAGE_PYTHON, "-m", "deepgym_desktop")
READY_S = 60.0
START_S = 30.0
Take = Callable[[SandboxSpec, "tuple[int, int]"], "Desktop | None"]
"""Where an episode takes a ready desktop from (the client's :func:`deepgym.session.ready.ready_desktops`): one made for
this spec and screen, or None."""


def load_variant(env: Environment, variant: int) -> dict[str, Any]:
    """The parameters of ``variant`` (the app's ``variants.json``, which the image carries too)."""
    variants = json.loads((env.path / "app" / "variants.json").read_text())
    return variants[str(variant)]


def task_text(env: Environment, variant: int) -> str:
    """The prompt of ``variant``: the manifest's prompt with the variant's parameters filled in."""
    width, height = env.screen
    return (env.prompt.rstrip().format_map(load_variant(env, variant))
            + f"\n\nThe screen is {width}x{height} pixels; (0, 0) is its top left corner.")


class Desktop:
    """A started desktop container whose supervisor said ``ready``."""

    def __init__(self, box: AttachedRun, channel: Channel, ready: dict):
        self.box, self.channel, self.ready = box, channel, ready
        self.made = time.monotonic()

    def alive(self) -> bool:
        """Whether the supervisor still waits: nothing arrived on its stream since ``ready`` (a line, or the
        end of the stream, means it said or suffered something while it waited)."""
        try:
            self.box.sock.settimeout(0)
            self.box.sock.recv(1, socket.MSG_PEEK)
            return False
        except BlockingIOError:
            return True
        except OSError:
            return False

    def close(self) -> None:
        """Close the stream and remove the container."""
        self.box.close()


def launch(provider: Provider, spec: SandboxSpec, screen: tuple[int, int]) -> Desktop:
    """A desktop container, started and ready, on a provider that :attr:`~Provider.attaches`. Raises
    StartFailure (it is removed then)."""
    box = provider.start_attached(spec, [*SUPERVISOR, str(screen[0]), str(screen[1])],
                                ExecOptions(timeout_s=READY_S, user="0:0"))
    channel = Channel(box.sock, "the desktop's supervisor")
    try:
        ready = channel.receive(READY_S)
        if ready is None or not ready.get("ready"):
            raise StartFailure(f"the desktop did not become ready: {(ready or {}).get('error', 'no answer')}")
    except BaseException:
        box.close()
        raise
    return Desktop(box, channel, ready)



class DesktopActions:
    """``computer`` actions (a dict each, checked by :func:`deepgym.runner.episode.computer.parse_action`) over the
    supervisor's channel; the final verification scores the recorder's log."""

    def __init__(self, take: Take | None):
        self.take = take
        self.action_timings: list[dict[str, Any]] = []
        """Per action: its type, the host's round trip (s), the daemon's own time to act, to settle and to
        encode the PNG (ms), and the PNG's size (bytes): what benchmarks/desktop.py reports."""

    def refusal(self, episode: Episode) -> str | None:
        if episode.env.kind != "desktop":
            return f"{episode.env.id} is a {episode.env.kind} environment, not a desktop one"
        if not episode.context.provider.attaches:
            return (f"desktop environments run on local Docker; mode {episode.context.runtime!r} is not supported "
                    f"yet. Use DeepGym(mode='docker')")
        return None

    def verify_deadline_s(self, episode: Episode) -> float:
        return episode.env.session.verify_timeout_s + HOST_GRACE_S

    def open(self, episode: Episode, keep: Callable[[Any], None]) -> Observation | str:
        """Take a ready desktop (or start one), show the variant, and return the task and the first screen."""
        context, env = episode.context, episode.env
        episode.image_id, episode.image_status = context.images.resolve(context.provider, env)
        spec = episode.sandbox_spec(episode.image_id)
        desktop = self.take(spec, env.screen) if self.take is not None else None
        episode.timings["prewarmed"] = float(desktop is not None)
        if desktop is None:
            desktop = launch(context.provider, spec, env.screen)
        keep(desktop)
        asked = time.monotonic()
        desktop.channel.send({"op": "start", "variant": episode.variant, "lifetime_s": episode.lifetime_s})
        reply = desktop.channel.receive(START_S)
        episode.timings["first_screen_s"] = round(time.monotonic() - asked, 3)
        if reply is None or "png" not in reply:
            return f"the desktop could not show the app: {(reply or {}).get('error', 'no first screen in time')}"
        return Observation(task_text(env, episode.variant), (base64.b64decode(reply["png"]),))

    def parse(self, episode: Episode, action: Any) -> tuple[Any, str | None]:
        """(the action as sent, and as parsed), or why it is invalid: the supervisor checks the sent one again."""
        parsed = parse_action(action, *episode.env.screen)
        return (None, parsed) if isinstance(parsed, str) else ((action, parsed), None)

    def exchange(self, sandbox: Desktop, parsed: tuple[Any, Any], timeout_s: float) -> dict:
        """Send the ``computer`` action (the supervisor checks it again); the settled screen comes back."""
        sandbox.channel.send({"op": "act", "action": parsed[0]})
        reply = sandbox.channel.receive(timeout_s + HOST_GRACE_S)
        if reply is None:
            raise SandboxLost("the desktop did not answer the action in time")
        return reply

    def observe(self, episode: Episode, parsed: tuple[Any, Any], reply: dict, timeout_s: float,
                took_s: float) -> Reply:
        action = parsed[1]
        if "png" in reply:
            self.action_timings.append({"action_type": action.action_type, "round_trip_s": round(took_s, 4),
                                        **{key: reply.get(key) for key in ("act_ms", "settle_ms", "png_ms")},
                                        "png_bytes": len(reply["png"]) * 3 // 4})
        if "error" in reply:
            return Reply(Observation("the environment failed; this episode is over"),
                         failure=NoVerdictError("verifier_error", f"the desktop's supervisor failed: {reply['error']}",
                                                **episode.where()))
        if "png" not in reply:
            return Reply(Observation("the browser has closed; the episode is over"), over=True)
        text = describe(action)
        if reply.get("problem"):
            text = f"could not {action.action_type}: {reply['problem']}"
        text += f"; the screen settled after {reply['settle_ms']:.0f} ms" if reply.get("settled") else \
            f"; the screen was still changing after {reply['settle_ms']:.0f} ms"
        over = action.action_type == "done"
        if reply.get("browser_exited"):
            over = True
            text += "; the browser has closed, the episode is over"
        return Reply(Observation(text, (base64.b64decode(reply["png"]),)), over=over)

    def verify(self, episode: Episode, sandbox: Desktop) -> Verification:
        """Score the recorder's log."""
        sandbox.channel.send({"op": "verify", "verify_timeout_s": episode.env.session.verify_timeout_s})
        reply = sandbox.channel.receive(self.verify_deadline_s(episode))
        report = (reply or {}).get("report")
        if not isinstance(report, dict):
            return Verification(None, deadline_hit=reply is None, said=str((reply or {}).get("error", "")))
        return Verification(report)


class DesktopSession(Episode):
    """One episode of a ``desktop`` environment: an :class:`~deepgym.session.episode.Episode` acted on with
    ``computer`` actions (:class:`DesktopActions`); the same interface as :class:`deepgym.session.Session`."""

    def __init__(self, context: Context, env: str | Environment, variant: int = 0, take: Take | None = None):
        super().__init__(context, env, variant, DesktopActions(take))
        self.width, self.height = self.env.screen

    @property
    def action_timings(self) -> list[dict[str, Any]]:
        return self.actions.action_timings
