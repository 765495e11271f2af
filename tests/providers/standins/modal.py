"""TEST DOUBLE of Modal's API: the part of the control plane (``modal.client.ModalClient``) and of the task
command router (``modal.task_command_router.TaskCommandRouter``) that deepgym's modal adapter uses, served with
grpclib on 127.0.0.1 for the unmodified ``modal`` client to talk to over gRPC (HTTP/2 without TLS, which the
client allows for a server on localhost only). It is not Modal and proves nothing about Modal's servers
(quotas, cold starts, image builds and pulls, egress enforcement, gVisor's kill and OOM semantics); see
docs/providers.md.

Both services are the SDK wheel's own generated grpclib bases (``modal_proto.api_grpc.ModalClientBase``,
``task_command_router_grpc.TaskCommandRouterBase``): every RPC the adapter does not use answers
``UNIMPLEMENTED``, every request is recorded in :attr:`ModalStandIn.requests`. Each sandbox is a real Docker
container of the image (``Image.from_registry(ref)`` resolves ``ref`` through :attr:`ModalStandIn.registry`,
digest-pinned references standing for local images, and ``Image.entrypoint`` builds a layer that sets the
ENTRYPOINT; ``deepgym images register modal`` records the image's id in a Modal Dict, which the stand-in keeps
too). Its main process is what Modal makes it: the request's command appended to the image's ENTRYPOINT (so an
image that keeps deepgym's runner as its entry point gets a sandbox whose runner exits at once). CPUs and
memory come from the request, and there is no network when ``network_access_type`` is ``BLOCKED``. Execs and
the file tool are the task command router's (standins/modal_router.py).

Faults: :attr:`ModalStandIn.faults` (:class:`~standins.Faults`), routes ``create`` (SandboxCreateV2), ``exec``
(TaskExecStart), ``terminate``, ``list``; each entry a ``grpclib.const.Status`` (the client retries
``UNAVAILABLE`` and ``INTERNAL`` several times, so a lasting fault is several of them).
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import json
import threading
import time
import uuid

import docker
from grpclib.const import Status
from grpclib.exceptions import GRPCError
from grpclib.server import Server
from modal_proto import api_grpc, api_pb2, task_command_router_grpc

from . import ContainerBacked, Faults
from .modal_router import TaskRouter

STANDIN_LABEL = "deepgym.test.modal-standin"
BUILDER_VERSION = "2025.06"


def _jwt() -> str:
    """A JWT-shaped token with an expiry (the client reads ``exp``; nobody checks the signature here)."""
    part = lambda value: base64.urlsafe_b64encode(json.dumps(value).encode()).rstrip(b"=").decode()  # noqa: E731
    return f"{part({'alg': 'none'})}.{part({'exp': time.time() + 3600})}.standin"


class ModalStandIn(TaskRouter, ContainerBacked):
    """Start with :meth:`start`, stop with :meth:`stop` (which removes every container it made)."""

    def __init__(self, token_id: str = "ak-standin", token_secret: str = "as-standin"):
        self.token_id = token_id
        self.token_secret = token_secret
        self.label = STANDIN_LABEL
        self.faults = Faults()
        self.registry: dict[str, str] = {}
        self.images: dict[str, dict] = {}  # image id -> {"local": local image, "entrypoint": ENTRYPOINT or None}
        self.dicts: dict[str, dict[bytes, bytes]] = {}  # Modal Dicts by name
        self.sandboxes: dict[str, dict] = {}
        self.execs: dict[str, dict] = {}
        self.requests: list[tuple[str, object]] = []
        self.docker = docker.from_env()
        self.id = uuid.uuid4().hex[:12]
        self.port = 0
        self._loop = asyncio.new_event_loop()
        self._ready = threading.Event()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> ModalStandIn:
        self._thread = threading.Thread(target=self._serve, daemon=True, name="modal-standin")
        self._thread.start()
        if not self._ready.wait(60):  # a loaded host starts a server slowly
            raise RuntimeError("the Modal stand-in did not start")
        return self

    def _serve(self) -> None:
        asyncio.set_event_loop(self._loop)
        self._server = Server([self._service(api_grpc.ModalClientBase, control=True),
                               self._service(task_command_router_grpc.TaskCommandRouterBase, control=False)])
        protocols, made = [], self._server._protocol_factory

        def tracked():  # grpclib's close() leaves the accepted connections open: stop() closes them
            protocols.append(made())
            return protocols[-1]

        self._server._protocol_factory = tracked
        self._protocols = protocols
        self._loop.run_until_complete(self._server.start("127.0.0.1", 0))
        self.port = self._server._server.sockets[0].getsockname()[1]
        self._ready.set()
        try:
            self._loop.run_forever()
        finally:
            self._loop.close()

    def stop(self) -> None:
        async def close():
            self._server.close()
            await self._server.wait_closed()
            for protocol in self._protocols:
                if hasattr(protocol, "processor"):
                    protocol.processor.close("the stand-in stops")
            for run in self.execs.values():
                if run["process"].returncode is None:
                    run["process"].kill()
                    await run["process"].wait()
            tasks = [task for task in asyncio.all_tasks() if task is not asyncio.current_task()]
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)

        asyncio.run_coroutine_threadsafe(close(), self._loop).result(30)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)
        self.remove_all()

    def _service(self, base: type, *, control: bool):
        """An instance of the generated base whose every RPC records its request, checks the credentials and
        dispatches to this stand-in's ``rpc_<Name>`` (or answers UNIMPLEMENTED)."""
        standin = self

        def make(name: str):
            async def handler(self, stream):
                handle = getattr(standin, f"rpc_{name}", None)
                metadata = dict(stream.metadata)
                if control and name != "ClientHello" and (metadata.get("x-modal-token-id"), metadata.get(
                        "x-modal-token-secret")) != (standin.token_id, standin.token_secret):
                    raise GRPCError(Status.UNAUTHENTICATED, "Invalid token")
                if handle is None:
                    request = await stream.recv_message()
                    standin.requests.append((name, request))
                    raise GRPCError(Status.UNIMPLEMENTED, f"stand-in: {name}")
                await handle(stream)
            return handler

        namespace = {name: make(name) for name in base.__abstractmethods__}
        return type(f"StandIn{base.__name__}", (base,), namespace)()

    async def _request(self, name: str, stream):
        request = await stream.recv_message()
        self.requests.append((name, request))
        return request

    def _fault(self, route: str) -> None:
        status = self.faults.next(route)
        if status is not None:
            raise GRPCError(status, f"injected fault {status.name} on {route}")

    async def _blocking(self, fn, *args):
        return await asyncio.to_thread(fn, *args)

    # ------------------------------------------------------------------ control plane
    async def rpc_ClientHello(self, stream):
        await stream.recv_message()
        await stream.send_message(api_pb2.ClientHelloResponse())

    async def rpc_AppGetOrCreate(self, stream):
        request = await self._request("AppGetOrCreate", stream)
        await stream.send_message(api_pb2.AppGetOrCreateResponse(app_id=f"ap-{request.app_name}standin"))

    async def rpc_EnvironmentGetOrCreate(self, stream):
        await self._request("EnvironmentGetOrCreate", stream)
        await stream.send_message(api_pb2.EnvironmentGetOrCreateResponse(
            environment_id="en-standin", metadata=api_pb2.EnvironmentMetadata(
                name="main", settings=api_pb2.EnvironmentSettings(image_builder_version=BUILDER_VERSION))))

    async def rpc_AuthTokenGet(self, stream):
        await self._request("AuthTokenGet", stream)
        await stream.send_message(api_pb2.AuthTokenGetResponse(token=_jwt()))

    async def rpc_ImageGetOrCreate(self, stream):
        """``FROM <ref>`` (``Image.from_registry``: the reference must be in :attr:`registry`), or a layer on a
        built image (``FROM base`` and its ``base_images``) whose further lines may only be ``ENTRYPOINT [...]``
        (``Image.entrypoint``). Anything else fails the build, as an image Modal cannot pull or build does."""
        request = await self._request("ImageGetOrCreate", stream)
        try:
            image = self._build(request.image)
        except ValueError as failure:
            await stream.send_message(api_pb2.ImageGetOrCreateResponse(
                image_id="im-failed", result=api_pb2.GenericResult(
                    status=api_pb2.GenericResult.GENERIC_STATUS_FAILURE, exception=str(failure))))
            return
        image_id = "im-" + hashlib.sha256(json.dumps(image, sort_keys=True).encode()).hexdigest()[:22]
        self.images[image_id] = image
        await stream.send_message(api_pb2.ImageGetOrCreateResponse(
            image_id=image_id, result=api_pb2.GenericResult(status=api_pb2.GenericResult.GENERIC_STATUS_SUCCESS)))

    def _build(self, definition) -> dict:
        """The image a definition builds: its local image and its ENTRYPOINT (None: the local image's own)."""
        commands = list(definition.dockerfile_commands)
        source = commands[0].removeprefix("FROM ").strip() if commands else ""
        if source == "base":
            bases = {base.docker_tag: base.image_id for base in definition.base_images}
            if bases.get("base") not in self.images:
                raise ValueError(f"the base image {bases.get('base')!r} was never built")
            image = dict(self.images[bases["base"]])
        elif source in self.registry:
            image = {"local": self.registry[source], "entrypoint": None}
        else:
            raise ValueError(f"cannot pull {source!r}: not in the stand-in's registry")
        for line in commands[1:]:
            if not line.startswith("ENTRYPOINT "):
                raise ValueError(f"the stand-in builds no {line.split()[0]} line")
            image["entrypoint"] = json.loads(line.removeprefix("ENTRYPOINT "))
        return image

    async def rpc_ImageFromId(self, stream):
        request = await self._request("ImageFromId", stream)
        if request.image_id not in self.images:
            raise GRPCError(Status.NOT_FOUND, f"Image {request.image_id} not found")
        await stream.send_message(api_pb2.ImageFromIdResponse(image_id=request.image_id))

    # A Modal Dict keeps the client's serialized keys and values as they come: the stand-in never reads them.
    async def rpc_DictGetOrCreate(self, stream):
        request = await self._request("DictGetOrCreate", stream)
        self.dicts.setdefault(request.deployment_name, {})
        await stream.send_message(api_pb2.DictGetOrCreateResponse(dict_id=f"di-{request.deployment_name}"))

    def _dict(self, dict_id: str) -> dict:
        found = self.dicts.get(dict_id.removeprefix("di-"))
        if found is None:
            raise GRPCError(Status.NOT_FOUND, f"Dict {dict_id} not found")
        return found

    async def rpc_DictGet(self, stream):
        request = await self._request("DictGet", stream)
        value = self._dict(request.dict_id).get(request.key)
        await stream.send_message(api_pb2.DictGetResponse(found=value is not None, value=value or b""))

    async def rpc_DictContains(self, stream):
        request = await self._request("DictContains", stream)
        await stream.send_message(api_pb2.DictContainsResponse(found=request.key in self._dict(request.dict_id)))

    async def rpc_DictUpdate(self, stream):
        request = await self._request("DictUpdate", stream)
        entries = self._dict(request.dict_id)
        created = False
        for entry in request.updates:
            if not (request.if_not_exists and entry.key in entries):
                created = created or entry.key not in entries
                entries[entry.key] = entry.value
        await stream.send_message(api_pb2.DictUpdateResponse(created=created))

    async def rpc_SandboxCreateV2(self, stream):
        request = await self._request("SandboxCreateV2", stream)
        if self.faults.create_delay_s:
            await asyncio.sleep(self.faults.create_delay_s)
        self._fault("create")
        definition = request.definition
        image = self.images.get(definition.image_id)
        if image is None:
            raise GRPCError(Status.NOT_FOUND, f"Image {definition.image_id} not found")
        entry = {"id": f"sb-{uuid.uuid4().hex[:20]}", "task": f"ta-{uuid.uuid4().hex[:20]}V",
                 "app": request.app_id, "tags": {tag.tag_name: tag.tag_value for tag in request.tags},
                 "timeout": definition.timeout_secs, "image": definition.image_id,
                 "blocked": definition.network_access.network_access_type
                 == api_pb2.NetworkAccess.NetworkAccessType.BLOCKED,
                 "memory_mb": definition.resources.memory_mb, "milli_cpu": definition.resources.milli_cpu,
                 "command": list(definition.entrypoint_args),
                 "created": time.time()}
        entry["container"] = await self._blocking(self._start_container, entry, image)
        self.sandboxes[entry["id"]] = entry
        await stream.send_message(api_pb2.SandboxCreateV2Response(
            sandbox_id=entry["id"], task_id=entry["task"],
            command_router_access=api_pb2.CommandRouterAccess(url=self.url, jwt=_jwt())))

    def _start_container(self, entry: dict, image: dict) -> str:
        """As Modal does: the sandbox's command appended to the image's ENTRYPOINT is the main process (the
        image's CMD when there is no command)."""
        limits = {}
        if entry["memory_mb"]:
            limits.update(mem_limit=f"{entry['memory_mb']}m", memswap_limit=f"{entry['memory_mb']}m")
        if entry["milli_cpu"]:
            limits.update(nano_cpus=entry["milli_cpu"] * 10**6)
        config = self.docker.api.inspect_image(image["local"])["Config"]
        entrypoint = (config.get("Entrypoint") or []) if image["entrypoint"] is None else image["entrypoint"]
        main = [*entrypoint, *(entry["command"] or config.get("Cmd") or [])]
        if not main:
            raise GRPCError(Status.INVALID_ARGUMENT, "the image has no ENTRYPOINT or CMD and the sandbox no command")
        return self.docker.containers.run(
            image["local"], entrypoint=main, command=[], detach=True, init=True,
            network_mode="none" if entry["blocked"] else "bridge", auto_remove=True,
            labels={STANDIN_LABEL: self.id, "deepgym.test.sandbox": entry["id"]}, **limits).id

    async def rpc_SandboxTerminateV2(self, stream):
        request = await self._request("SandboxTerminateV2", stream)
        self._fault("terminate")
        entry = self.sandboxes.get(request.sandbox_id)
        if entry is None or entry.get("terminated"):
            raise GRPCError(Status.NOT_FOUND, f"Sandbox {request.sandbox_id} not found")
        entry["terminated"] = True
        await self._blocking(self.remove_container, entry["container"])
        await stream.send_message(api_pb2.SandboxTerminateResponse())

    async def rpc_SandboxWaitV2(self, stream):
        """``Sandbox.from_id`` (a wait of 0 s): a running sandbox has no result yet."""
        request = await self._request("SandboxWaitV2", stream)
        entry = self.sandboxes.get(request.sandbox_id)
        if entry is None:
            raise GRPCError(Status.NOT_FOUND, f"Sandbox {request.sandbox_id} not found")
        done = entry.get("terminated") or not await self._blocking(self.running, entry)
        await stream.send_message(api_pb2.SandboxWaitResponse(result=api_pb2.GenericResult(
            status=api_pb2.GenericResult.GENERIC_STATUS_TERMINATED) if done else None))

    async def rpc_SandboxListV2(self, stream):
        request = await self._request("SandboxListV2", stream)
        self._fault("list")
        wanted = {tag.tag_name: tag.tag_value for tag in request.tags}
        found = sorted((e for e in self.sandboxes.values()
                        if not e.get("terminated") and (not request.app_id or e["app"] == request.app_id)
                        and all(e["tags"].get(k) == v for k, v in wanted.items())
                        and (not request.before_timestamp or e["created"] < request.before_timestamp)),
                       key=lambda e: -e["created"])
        await stream.send_message(api_pb2.SandboxListResponse(sandboxes=[
            api_pb2.SandboxInfo(id=e["id"], app_id=e["app"], created_at=e["created"], image_id=e["image"],
                                timeout_secs=e["timeout"],
                                tags=[api_pb2.SandboxTag(tag_name=k, tag_value=v) for k, v in e["tags"].items()])
            for e in found[:100]]))
