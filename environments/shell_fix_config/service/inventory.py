"""The inventory service of shell_fix_config (the environment's own code, root-owned in the image).

Run by deepgym's service supervisor as a uid of its own, in the agent's workspace:
``python3 -I -B /opt/deepgym/service/inventory.py service.ini``. It reads the config and the catalogue it
names, then serves over HTTP on the configured loopback address:

- ``GET /health``: 200 with ``{"status": "ok", "items": N, "checksum": ...}`` when every catalogue row is
  valid, 503 with the problems otherwise;
- ``GET /items``: the catalogue as JSON.

A config it cannot use (a bad port, a bind address with a port in it, a missing section) makes it exit with
status 2 and say why on stderr, which the supervisor keeps in /tmp/deepgym-services/inventory.log.
"""

import configparser
import csv
import hashlib
import http.server
import ipaddress
import json
import sys

DELIMITERS = {"csv": ",", "tsv": "\t", "semicolon": ";"}


def fail(message):
    print(f"inventory: {message}", file=sys.stderr, flush=True)
    sys.exit(2)


def load(path):
    config = configparser.ConfigParser()
    if not config.read(path):
        fail(f"cannot read the config file {path}")
    for section in ("server", "catalogue"):
        if not config.has_section(section):
            fail(f"{path} has no [{section}] section")
    server, catalogue = config["server"], config["catalogue"]
    bind = server.get("bind", "127.0.0.1")
    try:
        ipaddress.ip_address(bind)
    except ValueError:
        fail(f"[server] bind = {bind!r} is not an IP address (the port goes in `port`)")
    try:
        port = int(server.get("port", ""))
    except ValueError:
        fail(f"[server] port = {server.get('port')!r} is not a number")
    if not 1024 <= port <= 65535:
        fail(f"[server] port = {port} is not from 1024 to 65535")
    kind = catalogue.get("format", "csv")
    if kind not in DELIMITERS:
        fail(f"[catalogue] format = {kind!r} is not one of {', '.join(DELIMITERS)}")
    path = catalogue.get("path", "")
    try:
        with open(path, newline="") as f:
            rows = list(csv.reader(f, delimiter=DELIMITERS[kind]))
    except OSError as exc:
        fail(f"[catalogue] path = {path!r} cannot be read: {exc.strerror}")
    return bind, port, rows


def check(rows):
    """The items, and what is wrong with the rows (a header `sku,name,quantity`, then one item per row)."""
    problems, items = [], []
    if not rows or [cell.strip() for cell in rows[0]] != ["sku", "name", "quantity"]:
        return [], [f"the header is {rows[0] if rows else None!r}, not ['sku', 'name', 'quantity']"]
    for number, row in enumerate(rows[1:], start=2):
        if len(row) != 3 or not row[2].strip().isdigit():
            problems.append(f"row {number} is {row!r}")
            continue
        items.append({"sku": row[0].strip(), "name": row[1].strip(), "quantity": int(row[2])})
    return items, problems


def main():
    if len(sys.argv) != 2:
        fail("usage: inventory.py CONFIG")
    bind, port, rows = load(sys.argv[1])
    items, problems = check(rows)
    digest = hashlib.sha256(json.dumps(sorted((i["sku"], i["quantity"]) for i in items)).encode()).hexdigest()

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            if self.path == "/health":
                ok = not problems
                body = {"status": "ok" if ok else "degraded", "items": len(items), "checksum": digest,
                        "problems": problems[:5]}
                self.answer(200 if ok else 503, body)
            elif self.path == "/items":
                self.answer(200, items)
            else:
                self.answer(404, {"error": f"no such path {self.path}"})

        def answer(self, status, body):
            data = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, format, *args):
            print(f"inventory: {self.command} {self.path} -> {args[1] if len(args) > 1 else ''}", flush=True)

    print(f"inventory: serving {len(items)} items on {bind}:{port}", flush=True)
    http.server.ThreadingHTTPServer((bind, port), Handler).serve_forever()


if __name__ == "__main__":
    main()
