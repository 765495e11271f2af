"""TEST DOUBLE of Daytona's API: the part of it deepgym's daytona adapter uses, on 127.0.0.1, for the
unmodified ``daytona`` SDK to talk to over real HTTP. It is not Daytona and proves nothing about Daytona's
servers (quotas, cold starts, snapshot pulls, egress enforcement, its VM's kill and OOM semantics); see
docs/providers.md.

Each sandbox is a real Docker container of the snapshot's image (so deepgym's runner really runs): the
snapshot's entrypoint as its main process, its CPUs and GiB as limits, no network when ``networkBlockAll``.
Like Daytona's daemon, an exec runs under a shell with stdout and stderr merged into one text ``result``, is
killed at its ``timeout`` and then answered with HTTP 408 and Daytona's error envelope, output discarded.

Endpoints (paths under ``/api``, the toolbox under ``/toolbox/<sandbox id>``), as the notes in
/work/shared/notes/provider-standins.md observed the SDK 0.226 calling them: ``POST/GET/DELETE /sandbox``,
``GET /sandbox`` (list by labels), ``POST/GET/DELETE /snapshots``, ``POST /process/execute``,
``POST /files/bulk-upload``. Faults for the exit-state tests: :attr:`DaytonaStandIn.faults` (:class:`~standins.Faults`;
routes ``create``, ``exec``, ``upload``, ``delete``, ``list``, ``snapshot``; HTTP statuses).

The "registry" a snapshot is made from is :attr:`DaytonaStandIn.registry`: the digest-pinned references a
test registered, each standing for a local image (Daytona would pull the reference). As on Daytona, a
snapshot whose reference cannot be pulled keeps its name in state ``error`` (with an ``errorReason``), and a
deleted snapshot is ``removing``, its name still taken, for :data:`SNAPSHOT_REMOVAL_S` before it is gone.
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor

import docker
from aiohttp import web

from . import ContainerBacked, Faults

STANDIN_LABEL = "deepgym.test.daytona-standin"
SNAPSHOT_REMOVAL_S = 1.0


class DaytonaStandIn(ContainerBacked):
    """Start with :meth:`start`, stop with :meth:`stop` (which removes every container it made)."""

    def __init__(self, api_key: str = "standin-key"):
        self.api_key = api_key
        self.label = STANDIN_LABEL
        self.faults = Faults()
        self.registry: dict[str, str] = {}
        self.sandboxes: dict[str, dict] = {}
        self.snapshots: dict[str, dict] = {}
        self.requests: list[tuple[str, str, dict | None]] = []
        self.docker = docker.from_env()
        self.id = uuid.uuid4().hex[:12]
        self._pool = ThreadPoolExecutor(max_workers=64, thread_name_prefix="daytona-standin")
        self._loop = asyncio.new_event_loop()
        self._ready = threading.Event()
        self.port = 0

    # ------------------------------------------------------------------ lifecycle
    @property
    def api_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/api"

    def start(self) -> DaytonaStandIn:
        threading.Thread(target=self._serve, daemon=True, name="daytona-standin").start()
        if not self._ready.wait(60):  # a loaded host starts a server slowly
            raise RuntimeError("the Daytona stand-in did not start")
        return self

    def _serve(self) -> None:
        asyncio.set_event_loop(self._loop)
        app = web.Application(middlewares=[self._auth], client_max_size=1 << 30)
        app.add_routes([
            web.post("/api/sandbox", self._create), web.get("/api/sandbox", self._list),
            web.get("/api/sandbox/{id}", self._get), web.delete("/api/sandbox/{id}", self._delete),
            web.post("/api/snapshots", self._snapshot_create), web.get("/api/snapshots/{id}", self._snapshot_get),
            web.delete("/api/snapshots/{id}", self._snapshot_delete),
            web.post("/toolbox/{id}/process/execute", self._execute),
            web.post("/toolbox/{id}/files/bulk-upload", self._upload),
        ])
        self._runner = web.AppRunner(app)
        self._loop.run_until_complete(self._runner.setup())
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        self._loop.run_until_complete(site.start())
        self.port = site._server.sockets[0].getsockname()[1]
        self._ready.set()
        self._loop.run_forever()

    def stop(self) -> None:
        asyncio.run_coroutine_threadsafe(self._runner.cleanup(), self._loop).result(30)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._pool.shutdown(wait=False)
        self.remove_all()

    # ------------------------------------------------------------------ helpers for tests
    def delete_from_outside(self, sandbox_id: str) -> None:
        """As a user deleting it in Daytona's dashboard: the API says it is gone."""
        self.sandboxes[sandbox_id]["state"] = "destroyed"
        self.remove_from_outside(sandbox_id)

    # ------------------------------------------------------------------ the API
    @web.middleware
    async def _auth(self, request: web.Request, handler):
        body = None
        if request.content_type == "application/json" and request.can_read_body:
            body = await request.json()
        self.requests.append((request.method, request.path, body))
        if request.headers.get("Authorization") != f"Bearer {self.api_key}":
            return _error(401, "Invalid credentials")
        try:
            return await handler(request)
        except web.HTTPNotFound:
            return _error(404, f"no route {request.path}")

    def _fault(self, route: str) -> web.Response | None:
        status = self.faults.next(route)
        return None if status is None else _error(status, f"injected fault on {route}")

    async def _blocking(self, fn, *args):
        return await self._loop.run_in_executor(self._pool, fn, *args)

    def _dto(self, entry: dict) -> dict:
        return {"id": entry["id"], "organizationId": "standin-org", "name": entry["id"], "user": "root",
                "env": {}, "labels": entry["labels"], "public": False, "networkBlockAll": entry["networkBlockAll"],
                "kvm": False, "target": entry["target"], "cpu": entry["cpu"], "gpu": 0, "memory": entry["memory"],
                "disk": entry["disk"], "state": entry["state"], "snapshot": entry["snapshot"],
                "autoStopInterval": entry["autoStopInterval"], "autoDeleteInterval": entry["autoDeleteInterval"],
                "toolboxProxyUrl": f"http://127.0.0.1:{self.port}/toolbox"}

    def _snapshot(self, key: str) -> dict | None:
        return self.snapshots.get(key) or next((s for s in self.snapshots.values() if s["id"] == key), None)

    async def _create(self, request: web.Request) -> web.Response:
        body = await request.json()
        if self.faults.create_delay_s:
            await asyncio.sleep(self.faults.create_delay_s)
        fault = self._fault("create")
        if fault is not None:
            return fault
        snapshot = self._snapshot(body.get("snapshot") or "")
        if snapshot is None or snapshot["state"] != "active":
            return _error(404, f"Snapshot {body.get('snapshot')} not found")
        entry = {"id": str(uuid.uuid4()), "labels": body.get("labels") or {}, "target": body.get("target") or "us",
                 "networkBlockAll": bool(body.get("networkBlockAll")), "cpu": snapshot["cpu"],
                 "memory": snapshot["mem"], "disk": snapshot["disk"], "snapshot": snapshot["name"],
                 "autoStopInterval": body.get("autoStopInterval"), "autoDeleteInterval": body.get("autoDeleteInterval"),
                 "ttlMinutes": body.get("ttlMinutes"), "state": "starting"}
        container = await self._blocking(self._start_container, entry, snapshot)
        entry.update(container=container, state="started")
        self.sandboxes[entry["id"]] = entry
        return web.json_response(self._dto(entry))

    def _start_container(self, entry: dict, snapshot: dict) -> str:
        container = self.docker.containers.run(
            self.registry[snapshot["imageName"]], entrypoint=snapshot["entrypoint"], command=[], detach=True,
            network_mode="none" if entry["networkBlockAll"] else "bridge", init=True,
            mem_limit=f"{snapshot['mem']}g", memswap_limit=f"{snapshot['mem']}g", nano_cpus=snapshot["cpu"] * 10**9,
            labels={STANDIN_LABEL: self.id, "deepgym.test.sandbox": entry["id"]})
        return container.id

    async def _get(self, request: web.Request) -> web.Response:
        entry = self.sandboxes.get(request.match_info["id"])
        if entry is None:
            return _error(404, f"Sandbox with ID {request.match_info['id']} not found")
        return web.json_response(self._dto(entry))

    async def _list(self, request: web.Request) -> web.Response:
        fault = self._fault("list")
        if fault is not None:
            return fault
        wanted = json.loads(request.query.get("labels") or "{}")
        items = [self._dto(e) for e in self.sandboxes.values()
                 if e["state"] != "destroyed" and all(e["labels"].get(k) == v for k, v in wanted.items())]
        return web.json_response({"items": items, "total": len(items), "page": 1, "totalPages": 1,
                                  "nextCursor": None})

    async def _delete(self, request: web.Request) -> web.Response:
        fault = self._fault("delete")
        if fault is not None:
            return fault
        entry = self.sandboxes.get(request.match_info["id"])
        if entry is None or entry["state"] == "destroyed":
            return _error(404, f"Sandbox with ID {request.match_info['id']} not found")
        entry["state"] = "destroyed"
        await self._blocking(self.remove_container, entry["container"])
        return web.json_response(self._dto(entry))

    async def _snapshot_create(self, request: web.Request) -> web.Response:
        body = await request.json()
        fault = self._fault("snapshot")
        if fault is not None:
            return fault
        if body["name"] in self.snapshots:
            return _error(409, f"Snapshot {body['name']} already exists")
        known = body.get("imageName") in self.registry
        now = _now()
        self.snapshots[body["name"]] = {
            "id": str(uuid.uuid4()), "general": False, "name": body["name"], "imageName": body.get("imageName"),
            "state": "active" if known else "error", "size": None, "entrypoint": body.get("entrypoint"),
            "cpu": body.get("cpu", 1), "gpu": 0, "mem": body.get("memory", 1), "disk": body.get("disk", 3),
            "errorReason": None if known else f"cannot pull {body.get('imageName')}", "createdAt": now,
            "updatedAt": now, "lastUsedAt": None, "sourceSandboxId": None}
        return web.json_response(self.snapshots[body["name"]])

    async def _snapshot_delete(self, request: web.Request) -> web.Response:
        """As Daytona does: the snapshot is ``removing`` for a while (its name still taken), then gone."""
        snapshot = self._snapshot(request.match_info["id"])
        if snapshot is None:
            return _error(404, f"Snapshot {request.match_info['id']} not found")
        snapshot["state"] = "removing"
        self._loop.call_later(SNAPSHOT_REMOVAL_S, self.snapshots.pop, snapshot["name"], None)
        return web.Response(status=200)

    async def _snapshot_get(self, request: web.Request) -> web.Response:
        snapshot = self._snapshot(request.match_info["id"])
        if snapshot is None:
            return _error(404, f"Snapshot {request.match_info['id']} not found")
        return web.json_response(snapshot)

    def _live(self, sandbox_id: str) -> dict | None:
        entry = self.sandboxes.get(sandbox_id)
        return entry if entry is not None and entry["state"] == "started" else None

    async def _execute(self, request: web.Request) -> web.Response:
        body = await request.json()
        entry = self._live(request.match_info["id"])
        if entry is None:
            return _error(404, f"Sandbox with ID {request.match_info['id']} not found")
        fault = self._fault("exec")
        if fault is not None:
            return fault
        if self.faults.kill_during_exec_s is not None:
            delay, self.faults.kill_during_exec_s = self.faults.kill_during_exec_s, None
            self._loop.call_later(delay, lambda: self._pool.submit(self.kill_from_outside, entry["id"]))
        timeout = body.get("timeout") or 0
        started = time.monotonic()
        exit_code, output = await self._blocking(self._exec, entry["container"], body["command"], timeout)
        if not self._running(entry):
            return _error(502, f"sandbox {entry['id']} is not running")
        if timeout and exit_code == 137 and time.monotonic() - started >= timeout:
            return _error(408, f"Command execution timed out after {timeout} seconds",
                          code="PROCESS_EXECUTION_TIMEOUT", source="DAYTONA_DAEMON")
        return web.json_response({"exitCode": exit_code, "result": output.decode("utf-8", "replace")})

    def _running(self, entry: dict) -> bool:
        return entry["state"] == "started" and self.running(entry)

    def _exec(self, container: str, command: str, timeout: int) -> tuple[int | None, bytes]:
        # The daemon's deadline kills the command's whole process group; coreutils timeout does the same.
        argv = ["timeout", "-s", "KILL", str(timeout), "sh", "-c", command] if timeout else ["sh", "-c", command]
        try:
            execution = self.docker.api.exec_create(container, argv, stdout=True, stderr=True)["Id"]
            output = self.docker.api.exec_start(execution)
            return self.docker.api.exec_inspect(execution)["ExitCode"], output
        except docker.errors.APIError:
            return None, b""

    async def _upload(self, request: web.Request) -> web.Response:
        entry = self._live(request.match_info["id"])
        if entry is None:
            return _error(404, f"Sandbox with ID {request.match_info['id']} not found")
        fault = self._fault("upload")
        if fault is not None:
            return fault
        form = await request.post()
        files = {}
        for key, value in form.items():
            index, _, part = key.partition("].")
            files.setdefault(index, {})[part] = value
        for item in files.values():
            data = item["file"].file.read() if hasattr(item["file"], "file") else str(item["file"]).encode()
            ok = await self._blocking(self._put, entry["container"], str(item["path"]), data)
            if not ok:
                return _error(400, f"cannot write {item['path']}")
        return web.json_response({})

    def _put(self, container: str, path: str, data: bytes) -> bool:
        try:
            self.put(container, path, data)
        except docker.errors.APIError:
            return False
        return True


def _now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S.000Z", time.gmtime())


def _error(status: int, message: str, *, code: str | None = None, source: str | None = None) -> web.Response:
    body = {"statusCode": status, "message": message, "error": message}
    if code:
        body.update(code=code, source=source)
    return web.json_response(body, status=status)
