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

import atexit
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

from .environments import Environment, load_environment
from .runner.computer import ACTION_TYPES, MAX_SCROLL, describe, parse_action
from .sandbox import ExecOptions, ImageMissing, SandboxError, SandboxLost, SandboxSpec, StartFailure
from .session import HOST_GRACE_S, Observation, StepResult, _Clock, failure_result
from .verdict import CaseResult, NoVerdictError, Verdict

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
    refills after every take; what is left is removed at :meth:`close` (or by the provider's sweep)."""

    def __init__(self, provider: DockerProvider, size: int):
        self.provider = provider
        self.size = size
        self.ready: dict[str, deque[Desktop]] = {}
        self.lock = threading.Lock()
        self.closed = False
        self.filling: set[str] = set()
        self.fillers: list[threading.Thread] = []

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


_pools: weakref.WeakKeyDictionary[Any, Prewarm] = weakref.WeakKeyDictionary()
_pools_lock = threading.Lock()


def pool(provider: DockerProvider) -> Prewarm | None:
    """This provider's desktop pool (None when prewarming is off)."""
    size = prewarm_size()
    if size == 0:
        return None
    with _pools_lock:
        if provider not in _pools:
            _pools[provider] = Prewarm(provider, size)
            provider.on_close.append(_pools[provider].close)
        return _pools[provider]


@atexit.register
def _close_pools() -> None:
    with _pools_lock:
        pools = list(_pools.values())
    for each in pools:
        each.close()


class DesktopSession:
    """One episode of a ``desktop`` environment; the same interface as :class:`deepgym.session.Session`:
    :meth:`start`, :meth:`step` (a ``computer`` action, a dict) until done, :meth:`score`, :meth:`close`."""

    def __init__(self, gym: DeepGym, env: str | Environment, variant: int = 0):
        self.env = load_environment(env)
        if self.env.kind != "desktop":
            raise ValueError(f"{self.env.id} is a {self.env.kind} environment, not a desktop one")
        if not 0 <= variant < self.env.variants:
            raise ValueError(f"variant {variant} is out of range: {self.env.id} has {self.env.variants} "
                             f"variant(s), 0 to {self.env.variants - 1}")
        if gym.provider.name != "docker":
            raise ValueError(f"desktop environments run on local Docker; mode {gym.provider.name!r} is not "
                             f"supported yet. Use DeepGym(mode='docker')")
        self.gym = gym
        self.variant = variant
        self.limits = self.env.session
        self.width, self.height = self.env.screen
        self.steps = 0
        self.done = False
        self.image_id: str | None = None
        self.image_status: str | None = None
        self.timings: dict[str, float] = {}
        self.action_timings: list[dict[str, Any]] = []
        """Per action: its type, the host's round trip (s), the daemon's own time to act, to settle and to
        encode the PNG (ms), and the PNG's size (bytes): what benchmarks/desktop.py reports."""
        self._desktop: Desktop | None = None
        self._clock = _Clock()
        self._lifetime_s = self.limits.episode_s + self.limits.verify_timeout_s + 3 * HOST_GRACE_S
        self._outcome: Verdict | NoVerdictError | None = None

    @property
    def acted(self) -> bool:
        return self.steps > 0

    @property
    def outcome(self) -> Verdict | NoVerdictError | None:
        return self._outcome

    def _where(self) -> dict[str, Any]:
        return {"environment": self.env.id, "runtime": self.gym.backend, "variant": self.variant}

    def _spec(self, image_id: str) -> SandboxSpec:
        from .judging import ENVIRONMENT_LABEL

        limits = self.env.limits
        return SandboxSpec(image=image_id, memory_mb=limits.memory_mb, pids=limits.pids, cpus=limits.cpus,
                           nofile=limits.nofile, tmpfs_mb=limits.tmpfs_mb, lifetime_s=self._lifetime_s,
                           labels={ENVIRONMENT_LABEL: self.env.id})

    def start(self) -> Observation:
        """Take a ready desktop (or start one), show the variant, and return the task and the first screen."""
        if self._desktop is not None or self._outcome is not None:
            raise RuntimeError("this session was started already; open a new one for another episode")
        self._clock = _Clock()
        provider = self.gym.provider
        try:
            self.image_id, self.image_status = self.gym.images.resolve(provider, self.env)
            spec = self._spec(self.image_id)
            prewarm = pool(provider)
            self._desktop = prewarm.take(spec, self.env.screen) if prewarm is not None else None
            self.timings["prewarmed"] = float(self._desktop is not None)
            if self._desktop is None:
                self._desktop = launch(provider, spec, self.env.screen)
            asked = time.monotonic()
            self._desktop.channel.send({"op": "start", "variant": self.variant, "lifetime_s": self._lifetime_s})
            reply = self._desktop.channel.receive(START_S)
            self.timings["first_screen_s"] = round(time.monotonic() - asked, 3)
        except SandboxError as exc:
            if isinstance(exc, ImageMissing):
                self.gym.images.forget(self.env)
            self._end(failure_result(exc, phase="start", **self._where()))
            raise self._outcome from None
        if reply is None or "png" not in reply:
            detail = (reply or {}).get("error", "no first screen in time")
            self._end(NoVerdictError("sandbox_start_failure", f"the desktop could not show the app: {detail}",
                                     **self._where()))
            raise self._outcome
        self._clock.observed = time.monotonic()
        return Observation(task_text(self.env, self.variant), (base64.b64decode(reply["png"]),))

    def step(self, action: Any) -> StepResult:
        """Run one ``computer`` action; returns the settled screen and what was done. An invalid action comes
        back as text and counts as a step."""
        if self._desktop is None and self._outcome is None:
            raise RuntimeError("call start() first")
        if self.done or self._outcome is not None:
            raise RuntimeError("the episode is over; call score()")
        self.steps += 1
        parsed = parse_action(action, self.width, self.height)
        if isinstance(parsed, str):
            return self._after(Observation(f"invalid action: {parsed}"))
        left = self.limits.episode_s - self._clock.budget_used_s
        if left <= 0:
            self.done = True
            return StepResult(Observation(f"[the episode's {self.limits.episode_s:g} s are up; nothing was done]"),
                              0.0, True)
        started = time.monotonic()
        try:
            self._desktop.channel.send({"op": "act", "action": action})
            reply = self._desktop.channel.receive(min(self.limits.step_timeout_s, left) + HOST_GRACE_S)
            if reply is None:
                raise SandboxLost("the desktop did not answer the action in time")
        except SandboxError as exc:
            self._clock.acting_s += time.monotonic() - started
            self._end(failure_result(exc, phase="action", acting_s=self._clock.acting_s,
                                     elapsed_s=self._clock.elapsed_s, lifetime_s=self._lifetime_s, **self._where()))
            return StepResult(Observation(f"the desktop failed: {exc.reason}"), 0.0, True)
        self._clock.acting_s += time.monotonic() - started
        if "png" in reply:
            self.action_timings.append({"action_type": parsed.action_type,
                                        "round_trip_s": round(time.monotonic() - started, 4),
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

    def _after(self, observation: Observation) -> StepResult:
        if self.steps >= self.limits.max_steps or self._clock.budget_used_s >= self.limits.episode_s:
            self.done = True
        return StepResult(observation, 0.0, self.done)

    def score(self) -> Verdict:
        """End the episode and score the recorder's log; the same outcome on every call. Raises
        NoVerdictError when the infrastructure failed."""
        if self._outcome is None:
            self.done = True
            if self._desktop is None:
                raise RuntimeError("call start() first")
            if not self.acted:
                self._end(Verdict(score=0.0, passed=False, error_type="no_action",
                                  details="the episode ended before the agent took any action", **self._where()))
            else:
                self._end(self._verify())
        if isinstance(self._outcome, NoVerdictError):
            raise self._outcome
        return self._outcome

    def _verify(self) -> Verdict | NoVerdictError:
        try:
            self._desktop.channel.send({"op": "verify", "verify_timeout_s": self.limits.verify_timeout_s})
            reply = self._desktop.channel.receive(self.limits.verify_timeout_s + HOST_GRACE_S)
        except SandboxError as exc:
            return failure_result(exc, phase="verify", acting_s=self._clock.acting_s,
                                  elapsed_s=self._clock.elapsed_s, lifetime_s=self._lifetime_s, **self._where())
        report = (reply or {}).get("report")
        if not isinstance(report, dict):
            return NoVerdictError("verifier_timeout" if reply is None else "verifier_error",
                                  f"the final verification gave no report: {(reply or {}).get('error', '')}",
                                  **self._where())
        error_type = report.get("error_type")
        if "score" not in report:
            return NoVerdictError(error_type or "verifier_error", report.get("details", ""), **self._where())
        cases = tuple(CaseResult(id=str(c.get("id")), passed=bool(c.get("passed")), expected=c.get("expected"),
                                 actual=c.get("actual")) for c in report.get("cases", []) if isinstance(c, dict))
        return Verdict(score=report["score"], passed=report["passed"], error_type=error_type,
                       details=report.get("details", ""), cases=cases, cases_total=len(cases),
                       timings={"episode_s": round(self._clock.elapsed_s, 3),
                                "acting_s": round(self._clock.acting_s, 3), **self.timings},
                       image_id=self.image_id, image_status=self.image_status, **self._where())

    def _end(self, outcome: Verdict | NoVerdictError) -> None:
        self._outcome = outcome
        self.done = True
        self.gym.monitor.record(not outcome.has_verdict, outcome.error_type)
        self.close()

    def close(self) -> None:
        """Remove the container (never reused). Idempotent."""
        if self._desktop is not None:
            desktop, self._desktop = self._desktop, None
            desktop.close()

    def __enter__(self) -> DesktopSession:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
