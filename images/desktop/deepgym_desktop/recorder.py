"""The state recorder: the one place an app's state events are kept, and the web server of the app itself.

Run by the supervisor as its own user, ``python3 -I -B -m deepgym_desktop.recorder PORT BROWSER_UID``. It
serves ``/opt/deepgym/app`` (the environment's page) at ``http://127.0.0.1:PORT/``, and:

- ``GET /config`` answers the variant's parameters once the supervisor gave them (a long poll: a prewarmed
  browser waits there with the page loaded until its episode begins);
- ``POST /event`` takes one JSON object with a string ``type`` (at most :data:`MAX_BODY` bytes) and appends
  it to the log, numbered. Only connections from the browser's user are accepted (the socket's owner in
  ``/proc/net/tcp``); the log holds at most :data:`MAX_EVENTS` events, and counts what it refused.

The log lives in this process and in a folder only this user may open; neither the browser nor the action
daemon can write it. The supervisor talks to it over stdin and stdout (JSON lines): ``{"op": "config",
"config": {...}}``, ``{"op": "dump"}`` (answered with the whole log); it hears ``{"listening": true}`` once,
then ``{"config_waiting": true}`` when the page asks for its parameters, ``{"config_requested": N}`` when it
gets them, and ``{"event": TYPE, "seq": N}`` per event.
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer

APP_DIR = "/opt/deepgym/app"
LOG_DIR = "/tmp/deepgym-recorder"
MAX_EVENTS = 2000
MAX_BODY = 16 << 10
CONFIG_WAIT_S = 600.0


class Log:
    """The events, the refusals, and the supervisor's channel."""

    def __init__(self, browser_uid: int):
        self.browser_uid = browser_uid
        self.events: list[dict] = []
        self.refused = {"too_many": 0, "malformed": 0, "foreign": 0}
        self.config: dict | None = None
        self.config_served = 0
        self.ready = threading.Event()
        self.lock = threading.Lock()
        os.makedirs(LOG_DIR, mode=0o700, exist_ok=True)
        self.file = open(os.path.join(LOG_DIR, "events.jsonl"), "a", buffering=1)

    def tell(self, message: dict) -> None:
        with self.lock:
            sys.stdout.write(json.dumps(message) + "\n")
            sys.stdout.flush()

    def add(self, event: dict) -> None:
        with self.lock:
            if len(self.events) >= MAX_EVENTS:
                self.refused["too_many"] += 1
                return
            entry = {"seq": len(self.events), "t": round(time.monotonic(), 4), "event": event}
            self.events.append(entry)
            self.file.write(json.dumps(entry) + "\n")
        self.tell({"event": event["type"], "seq": entry["seq"]})

    def refuse(self, why: str) -> None:
        with self.lock:
            self.refused[why] += 1

    def dump(self) -> dict:
        with self.lock:
            return {"events": list(self.events), "refused": dict(self.refused), "config_served": self.config_served}


def socket_uid(port: int, server_port: int) -> int | None:
    """The owner of the client's end of a connection from 127.0.0.1:``port`` to this server: the established
    socket with that local and remote address (an old connection from the same port, in TIME_WAIT, belongs to
    no one and is skipped)."""
    local, remote = f"0100007F:{port:04X}", f"0100007F:{server_port:04X}"
    with open("/proc/net/tcp") as table:
        for line in table.readlines()[1:]:
            fields = line.split()
            if fields[1] == local and fields[2] == remote and fields[3] == "01":
                return int(fields[7])
    return None


def handler(log: Log):
    class Handler(SimpleHTTPRequestHandler):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, directory=APP_DIR, **kwargs)

        def log_message(self, *args) -> None:
            pass

        def list_directory(self, path):
            self.send_error(404)
            return None

        def end_headers(self) -> None:
            self.send_header("Cache-Control", "no-store")
            super().end_headers()

        def _json(self, status: int, body: dict) -> None:
            data = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self) -> None:
            if self.path.split("?")[0] == "/config":
                log.tell({"config_waiting": True})
                if not log.ready.wait(CONFIG_WAIT_S):
                    return self._json(503, {"error": "no episode"})
                with log.lock:
                    log.config_served += 1
                    served = log.config_served
                log.tell({"config_requested": served})
                return self._json(200, log.config)
            return super().do_GET()

        def do_POST(self) -> None:
            if self.path != "/event":
                return self._json(404, {"error": "not found"})
            if socket_uid(self.client_address[1], self.server.server_address[1]) != log.browser_uid:
                log.refuse("foreign")
                return self._json(403, {"error": "not the browser"})
            try:
                length = int(self.headers.get("Content-Length", "0"))
            except ValueError:
                length = -1
            if not 0 < length <= MAX_BODY:
                log.refuse("malformed")
                return self._json(413, {"error": "bad length"})
            try:
                event = json.loads(self.rfile.read(length))
            except ValueError:
                event = None
            if not isinstance(event, dict) or not isinstance(event.get("type"), str):
                log.refuse("malformed")
                return self._json(400, {"error": "an event is a JSON object with a string type"})
            log.add(event)
            return self._json(200, {"ok": True})

    return Handler


def main() -> int:
    port, browser_uid = int(sys.argv[1]), int(sys.argv[2])
    log = Log(browser_uid)
    server = ThreadingHTTPServer(("127.0.0.1", port), handler(log))
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    log.tell({"listening": True})
    for line in sys.stdin:
        message = json.loads(line)
        if message.get("op") == "config":
            log.config = message["config"]
            log.ready.set()
        elif message.get("op") == "dump":
            log.tell({"dump": log.dump()})
    return 0


if __name__ == "__main__":
    sys.exit(main())
