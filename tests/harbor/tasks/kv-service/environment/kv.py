"""A tiny key-value service whose state is /app/store.json."""

import json
import os
from http.server import BaseHTTPRequestHandler, HTTPServer

STORE = "/app/store.json"


def load():
    if not os.path.exists(STORE):
        return {}
    with open(STORE) as handle:
        return json.load(handle)


class Handler(BaseHTTPRequestHandler):
    def _reply(self, status, body=b""):
        self.send_response(status)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self):
        if self.path == "/health":
            return self._reply(200, b"ok")
        name = self.path.removeprefix("/keys/")
        store = load()
        return self._reply(200, store[name].encode()) if name in store else self._reply(404)

    def do_PUT(self):
        name = self.path.removeprefix("/keys/")
        length = int(self.headers.get("Content-Length", "0"))
        store = load()
        store[name] = self.rfile.read(length).decode()
        with open(STORE, "w") as handle:
            json.dump(store, handle)
        return self._reply(204)


HTTPServer(("127.0.0.1", 8765), Handler).serve_forever()
