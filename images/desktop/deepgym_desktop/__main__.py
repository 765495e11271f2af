"""The supervisor of a desktop container: the trusted side, its main process (root with CAP_SETUID,
CAP_SETGID and CAP_KILL only, like the runner), ``python3 -I -B -m deepgym_desktop WIDTH HEIGHT``.

It starts, each as a user of its own that the others cannot signal or trace:

==============  =========  ==================================================================================
process         uid        what
==============  =========  ==================================================================================
Xvfb            10010      display ``:0``, WIDTHxHEIGHTx24 at 96 dpi, unix socket only (``-nolisten tcp``)
recorder        10012      ``deepgym_desktop.recorder``: the app's web server and its state log
action daemon   10000      ``deepgym_desktop.screen``: XTest input and GetImage captures
chromium        10011      kiosk mode on the app, locked down by /etc/chromium/policies/managed
==============  =========  ==================================================================================

then says ``{"ready": ...}`` on stdout once the display answers, the app's page is loaded (it waits on the
recorder's ``/config``) and the recorder listens: a prewarmed container stops here. The host's requests come
on stdin, one JSON line each, and each gets one JSON line back:

- ``{"op": "start", "variant": N}``: the app gets variant N's parameters and renders; the first screen.
- ``{"op": "act", "action": {...}}``: one ``computer`` action (checked again here), then the settled screen;
  ``{"browser_exited": true}`` once the browser is gone (the episode ends and is scored).
- ``{"op": "verify", "verify_timeout_s": S}``: every process of the browser and the action daemon is killed
  and proved gone, so the log is final; the verifier (``/opt/deepgym/env/verify.py``, root-only) runs as
  uid 10002 in a fresh folder on the recorder's log and the variant's parameters, and its report comes back.

Nothing the agent controls reaches this stdout: its only channel is the action, as data.
"""

from __future__ import annotations

import json
import os
import queue
import subprocess
import sys
import threading
import time
import traceback

from deepgym_runner.confine.container import Container
from deepgym_runner.confine.privileges import drop_privileges, make_dir, remove_dir
from deepgym_runner.confine.processes import Processes
from deepgym_runner.episode.computer import Action, parse_action
from deepgym_runner.episode.harness import quiesce, run_verifier, verifier_report

ACTIONS_UID = 10000
VERIFIER_UID = 10002
DISPLAY_UID = 10010
BROWSER_UID = 10011
RECORDER_UID = 10012
PORT = 8000
APP_URL = f"http://127.0.0.1:{PORT}/"
APP_DIR = "/opt/deepgym/app"
ENV_DIR = "/opt/deepgym/env"
BROWSER_HOME = "/tmp/browser"
READY_S = 30.0
START_S = 15.0
ACTION_S = 60.0
# A container that waits this long for its episode ends itself (a dead host's prewarmed one); once the episode
# starts, its lifetime comes with the request.
IDLE_S = 900.0
CHROMIUM_FLAGS = ("--kiosk", "--no-sandbox", "--disable-gpu", "--no-first-run", "--no-default-browser-check",
                  "--noerrdialogs", "--disable-extensions", "--disable-sync", "--disable-translate",
                  "--disable-background-networking", "--disable-component-update", "--disable-breakpad",
                  "--disable-features=Translate,MediaRouter,OptimizationHints,DialMediaRouteProvider",
                  "--disable-session-crashed-bubble", "--password-store=basic", "--use-mock-keychain",
                  "--overscroll-history-navigation=0", "--disable-pinch", "--force-device-scale-factor=1",
                  "--disable-dev-shm-usage", f"--user-data-dir={BROWSER_HOME}/profile", "--window-position=0,0")


def _user(uid: int) -> dict:
    return {"user": uid, "group": uid, "extra_groups": [], "start_new_session": True, "close_fds": True, "cwd": "/"}


def _env(uid_home: str) -> dict:
    return {"PATH": "/usr/bin:/bin", "HOME": uid_home, "DISPLAY": ":0", "LANG": "C.UTF-8", "TMPDIR": uid_home}


class Lines:
    """A child's stdout as JSON lines, read by a thread into a queue."""

    def __init__(self, stream):
        self.queue: queue.Queue = queue.Queue()
        threading.Thread(target=self._read, args=(stream,), daemon=True).start()

    def _read(self, stream) -> None:
        for line in stream:
            try:
                self.queue.put(json.loads(line))
            except ValueError:
                continue
        self.queue.put(None)

    def wait(self, match, timeout_s: float) -> dict | None:
        """The first message for which ``match`` is true (others are dropped), or None at the timeout or EOF."""
        give_up = time.monotonic() + timeout_s
        while True:
            try:
                message = self.queue.get(timeout=max(0.0, give_up - time.monotonic()))
            except queue.Empty:
                return None
            if message is None:
                self.queue.put(None)
                return None
            if match(message):
                return message


class Desktop:
    def __init__(self, width: int, height: int):
        self.width, self.height = width, height
        self.procs: dict[str, subprocess.Popen] = {}
        self.events: Lines | None = None
        self.screen_out: Lines | None = None
        self.params: dict = {}

    def launch(self) -> None:
        os.makedirs("/tmp/.X11-unix", mode=0o1777, exist_ok=True)
        os.chmod("/tmp/.X11-unix", 0o1777)
        problem = make_dir(BROWSER_UID, BROWSER_HOME, 0o700)
        if problem:
            raise RuntimeError(problem)
        null = subprocess.DEVNULL
        self.procs["display"] = subprocess.Popen(
            ["Xvfb", ":0", "-screen", "0", f"{self.width}x{self.height}x24", "-dpi", "96", "-nolisten", "tcp",
             "-noreset", "-nocursor"], stdin=null, stdout=null, stderr=null, env=_env("/tmp"), **_user(DISPLAY_UID))
        self.procs["recorder"] = subprocess.Popen(
            ["python3", "-I", "-B", "-m", "deepgym_desktop.recorder", str(PORT), str(BROWSER_UID)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=null, text=True, bufsize=1, env=_env("/tmp"),
            **_user(RECORDER_UID))
        self.events = Lines(self.procs["recorder"].stdout)
        self.procs["screen"] = subprocess.Popen(
            ["python3", "-I", "-B", "-m", "deepgym_desktop.screen"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            stderr=null, text=True, bufsize=1, env=_env("/tmp"), **_user(ACTIONS_UID))
        self.screen_out = Lines(self.procs["screen"].stdout)
        if self.events.wait(lambda m: "listening" in m, READY_S) is None:
            raise RuntimeError("the recorder did not start listening")
        if self.screen_out.wait(lambda m: "ready" in m, READY_S) is None:
            raise RuntimeError("the display did not answer the action daemon")
        self.procs["browser"] = subprocess.Popen(
            ["chromium", *CHROMIUM_FLAGS, f"--window-size={self.width},{self.height}", APP_URL],
            stdin=null, stdout=null, stderr=null, env=_env(BROWSER_HOME), **_user(BROWSER_UID))
        if self.events.wait(lambda m: "config_waiting" in m, READY_S) is None:
            raise RuntimeError("the browser did not load the app")

    def start(self, variant: int) -> dict:
        with open(os.path.join(APP_DIR, "variants.json")) as f:
            variants = json.load(f)
        if str(variant) not in variants:
            return {"error": f"the app has no variant {variant}"}
        self.params = variants[str(variant)]
        self.procs["recorder"].stdin.write(json.dumps({"op": "config", "config": {"variant": variant,
                                                                                   "params": self.params}}) + "\n")
        if self.events.wait(lambda m: m.get("event") == "ready", START_S) is None:
            return {"error": "the app did not render its variant"}
        return self.act(Action("screenshot"))

    def act(self, action: Action) -> dict:
        if self.procs["browser"].poll() is not None:
            return {"browser_exited": True}
        screen = self.procs["screen"]
        screen.stdin.write(json.dumps(action.as_dict()) + "\n")
        reply = self.screen_out.wait(lambda m: "png" in m, ACTION_S)
        if reply is None:
            return {"error": "the action daemon gave no reply"}
        reply["browser_exited"] = self.procs["browser"].poll() is not None
        return reply

    def verify(self, timeout_s: float) -> dict:
        processes = Processes(Container(), uid=BROWSER_UID, applier_uid=VERIFIER_UID)
        processes.uids.add(ACTIONS_UID)
        problem = quiesce(processes)
        if problem is not None:
            return {"error_type": "verifier_error", "details": problem}
        self.procs["recorder"].stdin.write(json.dumps({"op": "dump"}) + "\n")
        dumped = self.events.wait(lambda m: "dump" in m, START_S)
        if dumped is None:
            return {"error_type": "verifier_error", "details": "the recorder gave no log"}
        with open(os.path.join(ENV_DIR, "verify.py"), "rb") as f:
            verifier = f.read()
        folder = f"/tmp/deepgym-verifier-{os.getpid()}-{time.monotonic_ns()}"
        problem = make_dir(VERIFIER_UID, folder, 0o700)
        if problem is not None:
            return {"error_type": "verifier_error", "details": problem}
        try:
            ran = run_verifier(processes, folder, verifier, {"log": dumped["dump"], "params": self.params},
                               ("log", "params"), uid=VERIFIER_UID, timeout_s=timeout_s)
            if ran is None:
                return {"error_type": "verifier_error", "details": "the verifier's folder could not be written"}
        finally:
            quiesce(processes)
            remove_dir(VERIFIER_UID, folder)
        return verifier_report(ran, timeout_s)


def say(message: dict) -> None:
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()


class Lifetime:
    """Ends the container (its main process) when its time is up, even if the host is gone or hung."""

    def __init__(self, seconds: float):
        self.timer: threading.Timer | None = None
        self.set(seconds)

    def set(self, seconds: float) -> None:
        if self.timer is not None:
            self.timer.cancel()
        self.timer = threading.Timer(seconds, os._exit, args=(3,))
        self.timer.daemon = True
        self.timer.start()


def main(argv: list[str]) -> int:
    started = time.monotonic()
    lifetime = Lifetime(IDLE_S)
    width, height = int(argv[0]), int(argv[1])
    problem = drop_privileges()
    if problem is not None:
        say({"error": problem})
        return 1
    desktop = Desktop(width, height)
    try:
        desktop.launch()
    except Exception as exc:  # noqa: BLE001 - reported to the host, which gives no verdict
        say({"error": f"the desktop did not start: {exc}"})
        return 1
    say({"ready": True, "launch_ms": round((time.monotonic() - started) * 1000)})
    for line in sys.stdin:
        try:
            request = json.loads(line)
            op = request.get("op")
            if op == "start":
                lifetime.set(float(request.get("lifetime_s", IDLE_S)))
                say(desktop.start(int(request["variant"])))
            elif op == "act":
                action = parse_action(request.get("action"), width, height)
                say({"problem": action} if isinstance(action, str) else desktop.act(action))
            elif op == "verify":
                say({"report": desktop.verify(float(request.get("verify_timeout_s", 30)))})
                return 0
            else:
                say({"error": f"unknown request {op!r}"})
        except Exception:  # noqa: BLE001 - ours, never the agent's: the host gives no verdict
            say({"error": "the supervisor failed:\n" + traceback.format_exc(limit=6)})
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
