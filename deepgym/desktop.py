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
Its main process is the trusted supervisor (``deepgym_desktop``), attached: the host's requests and its
replies cross that one stream as JSON lines, so an action costs no ``docker exec``. The supervisor starts the
display, the recorder, the action daemon and the browser, each as a user of its own, and says ``ready``; the
agent has no shell and no process: its only channel is the action, checked here and again inside
(:mod:`deepgym.runner.computer`).

**Prewarmed.** Containers are started ahead of need (:class:`Prewarm`, ``DEEPGYM_DESKTOP_PREWARM`` per kind,
default 1) up to ``ready``: the display answers, the app's page is loaded and waits on the recorder, which
listens. An episode takes one, and it is removed after that episode: never reused.

**Failures** follow the session table (:func:`deepgym.session.failure_result`): a container that does not
start or become ready is no verdict; one that dies or hangs under the agent's actions is a scored 0
(``policy_sandbox_failure``); the browser closing (the agent closed it through the UI) ends the episode,
which is scored from what the recorder holds; an error of the supervisor is no verdict (``verifier_error``).
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import socket
import struct
import threading
import time
import weakref
from collections import deque
from typing import TYPE_CHECKING, Any

from . import shutdown
from .environments import Environment
from .runner.episode.computer import ACTION_TYPES, MAX_SCROLL, describe, parse_action
from .sandbox import ExecOptions, SandboxError, SandboxLost, SandboxSpec, StartFailure
from .session import HOST_GRACE_S, BaseSession, Observation, StepResult
from .verdict import NoVerdictError, Verdict

if TYPE_CHECKING:
    from .client import DeepGym
    from .sandbox.docker import DockerProvider
    from .sandbox.prewarm import Attached

SUPERVISOR = ("python3", "-I", "-B", "-m", "deepgym_desktop")
PREWARM_VARIABLE = "DEEPGYM_DESKTOP_PREWARM"
READY_S = 60.0
START_S = 30.0
MAX_IDLE_S = 600.0
MAX_LINE_BYTES = 16 << 20


def computer_schema() -> dict[str, Any]:
    """The ``computer`` tool's OpenAI function schema (what verl shows the model)."""
    coordinate = {"type": "integer", "description": "pixels from the screen's left (x) or top (y) edge"}
    return {"type": "function", "function": {
        "name": "computer",
        "description": "Act on the computer's screen with the mouse or keyboard, then see the screen. Begin with "
                       "a screenshot. action_type: " + ", ".join(ACTION_TYPES) + ".",
        "parameters": {"type": "object", "required": ["action_type"], "properties": {
            "action_type": {"type": "string", "enum": list(ACTION_TYPES)},
            "x": coordinate, "y": coordinate,
            "to_x": {**coordinate, "description": "where a drag ends (x)"},
            "to_y": {**coordinate, "description": "where a drag ends (y)"},
            "content": {"type": "string", "description": "the text to type; the key or combination to press "
                                                         "(ctrl+a, Return); a scroll's direction (up or down)"},
            "amount": {"type": "integer", "description": f"scroll clicks (1 to {MAX_SCROLL}) or seconds to wait"},
        }}}}


def load_variant(env: Environment, variant: int) -> dict[str, Any]:
    """The parameters of ``variant`` (the app's ``variants.json``, which the image carries too)."""
    variants = json.loads((env.path / "app" / "variants.json").read_text())
    return variants[str(variant)]


def task_text(env: Environment, variant: int) -> str:
    """The prompt of ``variant``: the manifest's prompt with the variant's parameters filled in."""
    width, height = env.screen
    return (env.prompt.rstrip().format_map(load_variant(env, variant))
            + f"\n\nThe screen is {width}x{height} pixels; (0, 0) is its top left corner.")


class Channel:
    """JSON lines to and from the supervisor over the container's attached stream (docker's multiplexed
    frames: an 8-byte header, then the payload; stdout is stream 1)."""

    def __init__(self, sock: socket.socket):
        self.sock = sock
        self._frames = bytearray()
        self._out = bytearray()

    def send(self, message: dict) -> None:
        try:
            self.sock.sendall(json.dumps(message).encode() + b"\n")
        except OSError as exc:
            raise SandboxLost(f"the desktop's stream is gone: {exc}") from None

    def receive(self, timeout_s: float) -> dict | None:
        """The next line, or None at the timeout. Raises SandboxLost when the stream ended."""
        deadline = time.monotonic() + timeout_s
        while b"\n" not in self._out:
            left = deadline - time.monotonic()
            if left <= 0:
                return None
            self.sock.settimeout(left)
            try:
                chunk = self.sock.recv(1 << 18)
            except socket.timeout:
                return None
            except OSError as exc:
                raise SandboxLost(f"the desktop's stream failed: {exc}") from None
            if not chunk:
                raise SandboxLost("the desktop's supervisor ended its stream (the container stopped)")
            self._frames.extend(chunk)
            while len(self._frames) >= 8:
                size = struct.unpack(">I", self._frames[4:8])[0]
                if len(self._frames) < 8 + size:
                    break
                if self._frames[0] == 1:
                    self._out.extend(self._frames[8:8 + size])
                del self._frames[:8 + size]
            if len(self._out) > MAX_LINE_BYTES:
                raise SandboxLost("the desktop's supervisor sent a line beyond the limit")
        line, _, rest = bytes(self._out).partition(b"\n")
        self._out = bytearray(rest)
        return json.loads(line)


class Desktop:
    """A started desktop container whose supervisor said ``ready``."""

    def __init__(self, provider: DockerProvider, box: Attached, channel: Channel, ready: dict):
        self.provider, self.box, self.channel, self.ready = provider, box, channel, ready
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
        with contextlib.suppress(Exception):
            self.box.close_stream()
        self.provider._remove(self.box.container)


def launch(provider: DockerProvider, spec: SandboxSpec, screen: tuple[int, int]) -> Desktop:
    """A desktop container, started and ready. Raises StartFailure (it is removed then)."""
    box = provider.start_attached(spec, [*SUPERVISOR, str(screen[0]), str(screen[1])],
                                  ExecOptions(timeout_s=READY_S, user="0:0"))
    channel = Channel(box.sock)
    try:
        ready = channel.receive(READY_S)
        if ready is None or not ready.get("ready"):
            raise StartFailure(f"the desktop did not become ready: {(ready or {}).get('error', 'no answer')}")
    except BaseException:
        desktop = Desktop(provider, box, channel, {})
        desktop.close()
        raise
    return Desktop(provider, box, channel, ready)


def prewarm_size() -> int:
    text = os.environ.get(PREWARM_VARIABLE, "1")
    try:
        size = int(text)
    except ValueError:
        from .errors import ConfigurationError

        raise ConfigurationError(f"{PREWARM_VARIABLE}={text!r} is not a whole number; set it to how many desktop "
                                 f"containers to keep ready per environment, or 0 to start each on demand") from None
    return max(0, size)


class Prewarm:
    """Ready desktop containers per kind (image id, spec, screen), each handed out once. A background thread
    refills after every take; what is left is removed at :meth:`close`: when the client closes, on SIGTERM or
    SIGINT (:mod:`deepgym.shutdown`), at exit, or by the next start's reaper if this process is killed."""

    def __init__(self, provider: DockerProvider, size: int):
        self.provider = provider
        self.size = size
        self.ready: dict[str, deque[Desktop]] = {}
        self.lock = threading.Lock()
        self.closed = False
        self.filling: set[str] = set()
        self.fillers: list[threading.Thread] = []
        shutdown.register(self.close)  # on SIGTERM/SIGINT, and at the latest when the interpreter exits

    def take(self, spec: SandboxSpec, screen: tuple[int, int]) -> Desktop | None:
        key = repr((spec, screen))
        found = None
        with self.lock:
            queue = self.ready.setdefault(key, deque())
            while queue and found is None:
                desktop = queue.popleft()
                if desktop.alive() and time.monotonic() - desktop.made < MAX_IDLE_S:
                    found = desktop
                else:
                    threading.Thread(target=desktop.close, daemon=True).start()
        self._refill(key, spec, screen)
        return found

    def _refill(self, key: str, spec: SandboxSpec, screen: tuple[int, int]) -> None:
        with self.lock:
            if self.closed or key in self.filling or len(self.ready[key]) >= self.size:
                return
            self.filling.add(key)

        def fill() -> None:
            try:
                while True:
                    with self.lock:
                        if self.closed or len(self.ready[key]) >= self.size:
                            return
                    desktop = launch(self.provider, spec, screen)
                    with self.lock:
                        if self.closed:
                            break
                        self.ready[key].append(desktop)
                        desktop = None
                if desktop is not None:
                    desktop.close()
            except SandboxError:
                return
            finally:
                with self.lock:
                    self.filling.discard(key)

        filler = threading.Thread(target=fill, daemon=True, name="deepgym-desktop-prewarm")
        with self.lock:
            self.fillers = [thread for thread in self.fillers if thread.is_alive()] + [filler]
        filler.start()

    def close(self) -> None:
        """Remove the ready containers, after waiting for the ones being made (so none is left behind by a
        launch that finishes after its provider closed)."""
        with self.lock:
            self.closed = True
            fillers = list(self.fillers)
        for thread in fillers:
            thread.join(READY_S + 10)
        with self.lock:
            left = [desktop for queue in self.ready.values() for desktop in queue]
            self.ready.clear()
        for desktop in left:
            desktop.close()


_pools: weakref.WeakKeyDictionary[DeepGym, Prewarm] = weakref.WeakKeyDictionary()
_pools_lock = threading.Lock()


def pool(gym: DeepGym) -> Prewarm | None:
    """The client's desktop pool on its provider (None when prewarming is off), made on first use."""
    size = prewarm_size()
    if size == 0:
        return None
    with _pools_lock:
        if gym not in _pools:
            _pools[gym] = Prewarm(gym.provider, size)
        return _pools[gym]


def close_pool(gym: DeepGym) -> None:
    """Remove the client's ready desktops (:meth:`DeepGym.close` calls it before its provider closes)."""
    with _pools_lock:
        found = _pools.pop(gym, None)
    if found is not None:
        found.close()


class DesktopSession(BaseSession):
    """One episode of a ``desktop`` environment; the same interface as :class:`deepgym.session.Session`:
    :meth:`start`, :meth:`step` (a ``computer`` action, a dict) until done, :meth:`score`, :meth:`close`."""

    def __init__(self, gym: DeepGym, env: str | Environment, variant: int = 0):
        super().__init__(gym, env, variant)
        self.width, self.height = self.env.screen
        self.action_timings: list[dict[str, Any]] = []
        """Per action: its type, the host's round trip (s), the daemon's own time to act, to settle and to
        encode the PNG (ms), and the PNG's size (bytes): what benchmarks/desktop.py reports."""

    def _refusal(self, gym: DeepGym) -> str | None:
        if self.env.kind != "desktop":
            return f"{self.env.id} is a {self.env.kind} environment, not a desktop one"
        if gym.provider.name != "docker":
            return (f"desktop environments run on local Docker; mode {gym.provider.name!r} is not supported yet. "
                    f"Use DeepGym(mode='docker')")
        return None

    def _verify_deadline_s(self) -> float:
        return self.limits.verify_timeout_s + HOST_GRACE_S

    def _open(self) -> Observation | str:
        """Take a ready desktop (or start one), show the variant, and return the task and the first screen."""
        provider = self.gym.provider
        self.image_id, self.image_status = self.gym.images.resolve(provider, self.env)
        spec = self._spec(self.image_id)
        prewarm = pool(self.gym)
        self._sandbox = prewarm.take(spec, self.env.screen) if prewarm is not None else None
        self.timings["prewarmed"] = float(self._sandbox is not None)
        if self._sandbox is None:
            self._sandbox = launch(provider, spec, self.env.screen)
        asked = time.monotonic()
        self._sandbox.channel.send({"op": "start", "variant": self.variant, "lifetime_s": self._lifetime_s})
        reply = self._sandbox.channel.receive(START_S)
        self.timings["first_screen_s"] = round(time.monotonic() - asked, 3)
        if reply is None or "png" not in reply:
            return f"the desktop could not show the app: {(reply or {}).get('error', 'no first screen in time')}"
        return Observation(task_text(self.env, self.variant), (base64.b64decode(reply["png"]),))

    def _parse(self, action: Any) -> tuple[Any, str | None]:
        parsed = parse_action(action, self.width, self.height)
        return (None, parsed) if isinstance(parsed, str) else (parsed, None)

    def _exchange(self, action: Any, parsed: Any, timeout_s: float) -> dict:
        """Send the ``computer`` action (the supervisor checks it again); the settled screen comes back."""
        self._sandbox.channel.send({"op": "act", "action": action})
        reply = self._sandbox.channel.receive(timeout_s + HOST_GRACE_S)
        if reply is None:
            raise SandboxLost("the desktop did not answer the action in time")
        return reply

    def _observe(self, parsed: Any, reply: dict, timeout_s: float, took_s: float) -> StepResult:
        if "png" in reply:
            self.action_timings.append({"action_type": parsed.action_type, "round_trip_s": round(took_s, 4),
                                        **{key: reply.get(key) for key in ("act_ms", "settle_ms", "png_ms")},
                                        "png_bytes": len(reply["png"]) * 3 // 4})
        if "error" in reply:
            self._end(NoVerdictError("verifier_error", f"the desktop's supervisor failed: {reply['error']}",
                                     **self._where()))
            return StepResult(Observation("the environment failed; this episode is over"), 0.0, True)
        if "png" not in reply:
            self.done = True
            return StepResult(Observation("the browser has closed; the episode is over"), 0.0, True)
        text = describe(parsed)
        if reply.get("problem"):
            text = f"could not {parsed.action_type}: {reply['problem']}"
        text += f"; the screen settled after {reply['settle_ms']:.0f} ms" if reply.get("settled") else \
            f"; the screen was still changing after {reply['settle_ms']:.0f} ms"
        if reply.get("browser_exited"):
            self.done = True
            text += "; the browser has closed, the episode is over"
        if parsed.action_type == "done":
            self.done = True
        return self._after(Observation(text, (base64.b64decode(reply["png"]),)))

    def _verify(self) -> Verdict | NoVerdictError:
        """Score the recorder's log."""
        try:
            self._sandbox.channel.send({"op": "verify", "verify_timeout_s": self.limits.verify_timeout_s})
            reply = self._sandbox.channel.receive(self._verify_deadline_s())
        except SandboxError as exc:
            return self._failure(exc, "verify")
        report = (reply or {}).get("report")
        if not isinstance(report, dict):
            return NoVerdictError("verifier_timeout" if reply is None else "verifier_error",
                                  f"the final verification gave no report: {(reply or {}).get('error', '')}",
                                  **self._where())
        return self._scored(report)
