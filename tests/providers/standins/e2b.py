"""TEST DOUBLE of E2B's API: the part of the control plane (REST) and of envd (Connect-RPC and plain HTTP) that
deepgym's e2b adapter uses, on 127.0.0.1, for the unmodified ``e2b`` SDK to talk to. It is not E2B and proves
nothing about E2B's servers (quotas, cold starts, template builds, egress enforcement, its VM's kill and OOM
semantics); see docs/providers.md.

One port serves both planes; envd requests carry ``E2b-Sandbox-Id``, as the SDK sends when ``E2B_SANDBOX_URL``
is set. The envd Process service is the SDK wheel's own generated Connect server
(``e2b.envd.process.process_connect.ProcessASGIApplication``), so the framing is connectrpc's. Each sandbox is a
real Docker container of the template's image (:attr:`E2BStandIn.templates`; a template is built from an image
of :attr:`E2BStandIn.registry`, the digest-pinned references standing for local images, through the SDK's
``Template.build``; as on E2B, the build request binds the name whatever the build's outcome, a reference that
cannot be pulled ends the build in status ``error``, and a build of a bound name rebuilds that template): ``sleep infinity`` as main process, no network unless ``allow_internet_access``. A command runs as
``/bin/bash -l -c`` under the user of the request's Basic auth, with stdout and stderr streamed apart, and is
killed when the request's ``Connect-Timeout-Ms`` runs out (envd treats it as the process's lifetime). A
non-zero exit ends the stream with ``end{exit_code}``, which the SDK raises as ``CommandExitException``.

Faults: :attr:`E2BStandIn.faults` (:class:`~standins.Faults`; routes ``create``, ``exec``, ``upload``, ``kill``,
``list``, ``build``; an exec's status is a Connect error: 500 ``internal``, 503 ``unavailable``).
"""

from __future__ import annotations

import asyncio
import base64
import threading
import time
import uuid

import docker
import uvicorn
from connectrpc.code import Code
from connectrpc.errors import ConnectError
from e2b.envd.client_shared import ENVD_JSON_CODEC
from e2b.envd.process import process_connect
from e2b.envd.process import process_pb as pb
from protobuf import Oneof
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from . import ContainerBacked, Faults

STANDIN_LABEL = "deepgym.test.e2b-standin"
ENVD_VERSION = "0.6.10"
PE = pb.ProcessEvent


class E2BStandIn(ContainerBacked):
    """Start with :meth:`start`, stop with :meth:`stop` (which removes every container it made)."""

    def __init__(self, api_key: str = "e2b_" + "0" * 40):
        self.api_key = api_key
        self.label = STANDIN_LABEL
        self.faults = Faults()
        self.templates: dict[str, dict] = {}  # name -> {"id", "name", "image" (of its last ready build), "builds"}
        self.registry: dict[str, str] = {}
        self.builds: dict[str, dict] = {}
        self.sandboxes: dict[str, dict] = {}
        self.requests: list[tuple[str, str, dict | None]] = []
        self.docker = docker.from_env()
        self.id = uuid.uuid4().hex[:12]
        self.port = 0

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> E2BStandIn:
        rest = Starlette(routes=[
            Route("/v2/sandboxes", self._create, methods=["POST"]), Route("/v2/sandboxes", self._list),
            Route("/sandboxes/{id}", self._info), Route("/sandboxes/{id}", self._kill, methods=["DELETE"]),
            Route("/health", self._health), Route("/files", self._write, methods=["POST"]),
            Route("/templates/aliases/{alias}", self._alias), Route("/v3/templates", self._build, methods=["POST"]),
            Route("/templates/{template}", self._template_builds),
            Route("/v2/templates/{template}/builds/{build}", self._build_start, methods=["POST"]),
            Route("/templates/{template}/builds/{build}/status", self._build_status),
        ])
        envd = process_connect.ProcessASGIApplication(_Process(self), codecs=[ENVD_JSON_CODEC])

        async def app(scope, receive, send):
            # Every response closes its connection: a pooled connection that uvicorn is closing (idle, or after a
            # stream that ended in an error) would meet the client's next request as "connection reset", a fault
            # of this stand-in rather than one the tests mean to inject.
            async def closing(message):
                if message["type"] == "http.response.start":
                    message = {**message, "headers": [*message.get("headers", []), (b"connection", b"close")]}
                await send(message)

            if scope["type"] == "http" and scope["path"].startswith("/process.Process/"):
                return await envd(scope, receive, closing)
            return await rest(scope, receive, closing)

        self._server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=0, log_level="warning",
                                                     lifespan="off"))
        self._thread = threading.Thread(target=self._server.run, daemon=True, name="e2b-standin")
        self._thread.start()
        deadline = time.monotonic() + 60  # a loaded host starts a server slowly
        while not self._server.started:
            if time.monotonic() > deadline:
                raise RuntimeError("the E2B stand-in did not start")
            time.sleep(0.02)
        self.port = self._server.servers[0].sockets[0].getsockname()[1]
        return self

    def stop(self) -> None:
        self._server.should_exit = True
        self._thread.join(10)
        self.remove_all()

    # ------------------------------------------------------------------ helpers for tests
    def fault(self, route: str) -> int | None:
        return self.faults.next(route)

    # ------------------------------------------------------------------ control plane
    def _authorised(self, request: Request) -> bool:
        return request.headers.get("x-api-key") == self.api_key

    async def _create(self, request: Request) -> Response:
        body = await request.json()
        self.requests.append(("POST", "/v2/sandboxes", body))
        if not self._authorised(request):
            return _error(401, "Invalid API key")
        if self.faults.create_delay_s:
            await asyncio.sleep(self.faults.create_delay_s)
        status = self.fault("create")
        if status is not None:
            return _error(status, f"injected fault {status} on create")
        template = self._template(body.get("templateID", ""))
        if template is None:
            return _error(404, f"template '{body.get('templateID')}' not found")
        image = template["image"]
        if image is None:  # a name bound by a build request whose build never succeeded
            return _error(404, f"template '{body.get('templateID')}' has no successful build")
        entry = {"id": "i" + uuid.uuid4().hex[:19], "template": body["templateID"], "metadata": body.get("metadata") or {},
                 "timeout": body.get("timeout"), "internet": body.get("allow_internet_access", True),
                 "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
        entry["container"] = await asyncio.to_thread(self._start_container, entry, image)
        self.sandboxes[entry["id"]] = entry
        return JSONResponse({"sandboxID": entry["id"], "templateID": entry["template"], "clientID": "standin",
                             "envdVersion": ENVD_VERSION}, status_code=201)

    def _start_container(self, entry: dict, image: str) -> str:
        return self.docker.containers.run(
            image, entrypoint=["sleep", "infinity"], command=[], detach=True, init=True,
            network_mode="bridge" if entry["internet"] else "none",
            labels={STANDIN_LABEL: self.id, "deepgym.test.sandbox": entry["id"]}).id

    def _listed(self, entry: dict) -> dict:
        return {"sandboxID": entry["id"], "templateID": entry["template"], "clientID": "standin",
                "startedAt": entry["started"], "endAt": entry["started"], "state": "running", "cpuCount": 1,
                "memoryMB": 1024, "diskSizeMB": 3072, "envdVersion": ENVD_VERSION, "metadata": entry["metadata"]}

    async def _list(self, request: Request) -> Response:
        self.requests.append(("GET", "/v2/sandboxes", dict(request.query_params)))
        if not self._authorised(request):
            return _error(401, "Invalid API key")
        status = self.fault("list")
        if status is not None:
            return _error(status, f"injected fault {status} on list")
        wanted = dict(pair.split("=", 1) for pair in request.query_params.get("metadata", "").split("&") if pair)
        found = [self._listed(e) for e in self.sandboxes.values()
                 if not e.get("killed") and all(e["metadata"].get(k) == v for k, v in wanted.items())]
        return JSONResponse(found)

    async def _info(self, request: Request) -> Response:
        entry = self.sandboxes.get(request.path_params["id"])
        if entry is None or entry.get("killed"):
            return _error(404, "sandbox not found")
        return JSONResponse(self._listed(entry))

    async def _kill(self, request: Request) -> Response:
        self.requests.append(("DELETE", request.url.path, None))
        if not self._authorised(request):
            return _error(401, "Invalid API key")
        status = self.fault("kill")
        if status is not None:
            return _error(status, f"injected fault {status} on kill")
        entry = self.sandboxes.get(request.path_params["id"])
        if entry is None or entry.get("killed"):
            return _error(404, "sandbox not found")
        entry["killed"] = True
        await asyncio.to_thread(self.remove_container, entry["container"])
        return Response(status_code=204)

    # ------------------------------------------------------------------ template builds (from an image only)
    def _template(self, key: str) -> dict | None:
        """A template by its name or its id."""
        return self.templates.get(key) or next((t for t in self.templates.values() if t["id"] == key), None)

    async def _alias(self, request: Request) -> Response:
        self.requests.append(("GET", request.url.path, None))
        if not self._authorised(request):
            return _error(401, "Invalid API key")
        template = self.templates.get(request.path_params["alias"])
        if template is None:
            return _error(404, "template not found")
        return JSONResponse({"templateID": template["id"], "public": False})

    async def _template_builds(self, request: Request) -> Response:
        self.requests.append(("GET", request.url.path, None))
        if not self._authorised(request):
            return _error(401, "Invalid API key")
        template = self._template(request.path_params["template"])
        if template is None:
            return _error(404, "template not found")
        builds = [self.builds[build] for build in template["builds"]]
        last = builds[-1]
        ready = [build for build in builds if build["status"] == "ready"]
        return JSONResponse({
            "templateID": template["id"], "buildID": (ready or builds)[-1]["id"], "buildStatus": last["status"],
            "cpuCount": last["cpu"] or 2,
            "memoryMB": last["memory_mb"] or 512, "diskSizeMB": 5120, "public": False, "aliases": [template["name"]],
            "names": [template["name"]], "createdAt": template["created"], "updatedAt": last["created"],
            "createdBy": None, "lastSpawnedAt": None, "spawnCount": 0, "buildCount": len(builds),
            "envdVersion": ENVD_VERSION, "builds": [
                {"buildID": build["id"], "status": build["status"], "createdAt": build["created"],
                 "updatedAt": build["created"], "cpuCount": build["cpu"] or 2, "memoryMB": build["memory_mb"] or 512}
                for build in reversed(builds)]})

    async def _build(self, request: Request) -> Response:
        """As E2B does: the request binds the name to a template (a new one, or the one of that name, rebuilt),
        whatever the outcome of the build it starts."""
        body = await request.json()
        self.requests.append(("POST", "/v3/templates", body))
        if not self._authorised(request):
            return _error(401, "Invalid API key")
        status = self.fault("build")
        if status is not None:
            return _error(status, f"injected fault {status} on build")
        now = _now()
        template = self.templates.setdefault(body["name"], {"id": "t" + uuid.uuid4().hex[:19], "name": body["name"],
                                                            "image": None, "builds": [], "created": now})
        build = {"template": template["name"], "id": str(uuid.uuid4()), "status": "waiting", "reason": None,
                 "cpu": body.get("cpuCount"), "memory_mb": body.get("memoryMB"), "created": now}
        self.builds[build["id"]] = build
        template["builds"].append(build["id"])
        return JSONResponse({"templateID": template["id"], "buildID": build["id"], "public": False,
                             "names": [template["name"]], "tags": [], "aliases": [template["name"]]},
                            status_code=202)

    async def _build_start(self, request: Request) -> Response:
        body = await request.json()
        self.requests.append(("POST", request.url.path, body))
        build = self.builds.get(request.path_params["build"])
        if build is None:
            return _error(404, "build not found")
        image = self.registry.get(body.get("fromImage") or "")
        if body.get("steps") or image is None:
            build.update(status="error", reason={"message": f"cannot build from {body.get('fromImage')!r}: only a "
                                                           "pulled image, no steps, in the stand-in"})
        else:
            build["status"] = "ready"
            self.templates[build["template"]]["image"] = image
        return Response(status_code=202)

    async def _build_status(self, request: Request) -> Response:
        build = self.builds.get(request.path_params["build"])
        if build is None:
            return _error(404, "build not found")
        return JSONResponse({"templateID": build["template"], "buildID": build["id"], "status": build["status"],
                             "logs": [], "logEntries": [], **({"reason": build["reason"]} if build["reason"] else {})})

    # ------------------------------------------------------------------ envd over plain HTTP
    def envd_sandbox(self, headers) -> dict | None:
        entry = self.sandboxes.get(headers.get("e2b-sandbox-id", ""))
        if entry is None or entry.get("killed") or not self.running(entry):
            return None
        return entry

    async def _health(self, request: Request) -> Response:
        entry = await asyncio.to_thread(self.envd_sandbox, request.headers)
        return Response(status_code=204) if entry else _error(502, "sandbox not running")

    async def _write(self, request: Request) -> Response:
        entry = await asyncio.to_thread(self.envd_sandbox, request.headers)
        if entry is None:
            return _error(502, "sandbox not running")
        status = self.fault("upload")
        if status is not None:
            return _error(status, f"injected fault {status} on upload")
        path = request.query_params["path"]
        async with request.form() as form:
            data = await form["file"].read()
        await asyncio.to_thread(self.put, entry["container"], path, data)
        return JSONResponse([{"name": path.rpartition("/")[2], "path": path, "type": "file"}])

class _Process(process_connect.Process):
    """envd's Process service: Start only (what ``commands.run`` uses)."""

    def __init__(self, standin: E2BStandIn):
        self.standin = standin

    async def start(self, request, ctx):
        standin = self.standin
        headers = {key.lower(): value for key, value in ctx.request_headers.items()}
        entry = await asyncio.to_thread(standin.envd_sandbox, headers)
        if entry is None:
            raise ConnectError(Code.UNAVAILABLE, "sandbox not running")
        status = standin.fault("exec")
        if status is not None:
            raise ConnectError(Code.UNAVAILABLE if status == 503 else Code.INTERNAL, f"injected fault {status}")
        user = "root"
        if headers.get("authorization", "").startswith("Basic "):
            user = base64.b64decode(headers["authorization"][6:]).decode().partition(":")[0] or "root"
        lifetime = ctx.timeout_ms
        argv = ["docker", "exec", "-u", user, "-w", request.process.cwd or "/"]
        for key, value in dict(request.process.envs).items():
            argv += ["-e", f"{key}={value}"]
        argv += [entry["container"]]
        if lifetime:
            argv += ["timeout", "-s", "KILL", f"{lifetime / 1000:.3f}"]
        argv += [request.process.cmd, *request.process.args]
        proc = await asyncio.create_subprocess_exec(*argv, stdin=asyncio.subprocess.DEVNULL,
                                                    stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
        if standin.faults.kill_during_exec_s is not None:
            delay, standin.faults.kill_during_exec_s = standin.faults.kill_during_exec_s, None
            asyncio.get_running_loop().call_later(delay, lambda: threading.Thread(
                target=standin.kill_from_outside, args=(entry["id"],)).start())
        yield pb.StartResponse(event=PE(event=Oneof("start", PE.StartEvent(pid=proc.pid))))
        queue: asyncio.Queue = asyncio.Queue()

        async def pump(stream, name):
            while chunk := await stream.read(1 << 16):
                await queue.put((name, chunk))
            await queue.put(None)

        pumps = [asyncio.create_task(pump(proc.stdout, "stdout")), asyncio.create_task(pump(proc.stderr, "stderr"))]
        open_streams = 2
        while open_streams:
            item = await queue.get()
            if item is None:
                open_streams -= 1
                continue
            yield pb.StartResponse(event=PE(event=Oneof("data", PE.DataEvent(output=Oneof(item[0], item[1])))))
        await asyncio.gather(*pumps)
        code = await proc.wait()
        if not await asyncio.to_thread(standin.running, entry):
            raise ConnectError(Code.UNAVAILABLE, "sandbox not running")
        if code == 137:
            yield pb.StartResponse(event=PE(event=Oneof("end", PE.EndEvent(exit_code=-1, exited=False,
                                                                          status="signal: killed"))))
            return
        yield pb.StartResponse(event=PE(event=Oneof("end", PE.EndEvent(exit_code=code, exited=True,
                                                                      status=f"exit status {code}"))))


def _now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


def _error(status: int, message: str) -> JSONResponse:
    return JSONResponse({"code": status, "message": message}, status_code=status)
