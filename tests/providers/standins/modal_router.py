"""TEST DOUBLE of Modal's task command router (``modal.task_command_router.TaskCommandRouter``), the part of
the Modal stand-in (standins/modal.py, which serves it on the same port as the control plane) that runs commands
in a sandbox: an exec is ``docker exec -i`` into the sandbox's container with stdout and stderr apart, killed at
its ``timeout_secs`` (the client then reads its own deadline as ``wait() == -1``). Modal's in-sandbox file tool
(``/__modal/.bin/modal-sandbox-fs-tools``, which ``sb.filesystem`` execs) is answered for ``WriteFile``: the data
the client streams to its stdin goes into the file. Fault route ``exec`` (TaskExecStart).
"""

from __future__ import annotations

import asyncio
import json
import threading

from grpclib.const import Status
from grpclib.exceptions import GRPCError
from modal_proto import task_command_router_pb2 as router_pb2

FS_TOOLS = "/__modal/.bin/modal-sandbox-fs-tools"
STDOUT = router_pb2.TASK_EXEC_STDIO_FILE_DESCRIPTOR_STDOUT
STDERR = router_pb2.TASK_EXEC_STDIO_FILE_DESCRIPTOR_STDERR


class TaskRouter:
    """The router's RPCs (``rpc_<Name>``), mixed into the stand-in, whose sandboxes, execs, faults, request log
    and event loop they use."""

    sandboxes: dict[str, dict]
    execs: dict[str, dict]

    def _task(self, task_id: str) -> dict:
        entry = next((e for e in self.sandboxes.values() if e["task"] == task_id), None)
        if entry is None or entry.get("terminated"):
            raise GRPCError(Status.NOT_FOUND, f"Task {task_id} not found")
        return entry

    async def rpc_TaskExecStart(self, stream):
        request = await self._request("TaskExecStart", stream)
        entry = self._task(request.task_id)
        self._fault("exec")
        if not await self._blocking(self.running, entry):
            raise GRPCError(Status.NOT_FOUND, f"Task {request.task_id} is not running")
        argv = list(request.command_args)
        if argv[:1] == [FS_TOOLS]:
            argv = _fs_tool(argv)
        command = ["docker", "exec", "-i", "-u", "root", "-w", request.workdir or "/"]
        for item in request.env:
            command += ["-e", f"{item.key}={item.value}"]
        command.append(entry["container"])
        if request.timeout_secs:
            command += ["timeout", "-s", "KILL", str(request.timeout_secs)]
        process = await asyncio.create_subprocess_exec(
            *command, *argv, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE)
        run = {"process": process, "task": request.task_id, "entry": entry, "changed": asyncio.Condition(),
               "out": {STDOUT: bytearray(), STDERR: bytearray()},
               "closed": set()}
        self.execs[request.exec_id] = run
        for descriptor, pipe in ((STDOUT, process.stdout), (STDERR, process.stderr)):
            asyncio.ensure_future(self._pump(run, descriptor, pipe))
        if self.faults.kill_during_exec_s is not None:
            delay, self.faults.kill_during_exec_s = self.faults.kill_during_exec_s, None
            self._loop.call_later(delay, lambda: threading.Thread(
                target=self.kill_from_outside, args=(entry["id"],)).start())
        await stream.send_message(router_pb2.TaskExecStartResponse())

    async def _pump(self, run: dict, descriptor: int, pipe) -> None:
        while chunk := await pipe.read(1 << 16):
            async with run["changed"]:
                run["out"][descriptor].extend(chunk)
                run["changed"].notify_all()
        async with run["changed"]:
            run["closed"].add(descriptor)
            run["changed"].notify_all()

    def _exec(self, exec_id: str) -> dict:
        run = self.execs.get(exec_id)
        if run is None:
            raise GRPCError(Status.NOT_FOUND, f"Exec {exec_id} not found")
        return run

    async def rpc_TaskExecStdioRead(self, stream):
        request = await self._request("TaskExecStdioRead", stream)
        run = self._exec(request.exec_id)
        offset = request.offset
        while True:
            async with run["changed"]:
                await run["changed"].wait_for(lambda seen=offset: len(run["out"][request.file_descriptor]) > seen
                                              or request.file_descriptor in run["closed"])
                data = bytes(run["out"][request.file_descriptor][offset:])
                ended = request.file_descriptor in run["closed"]
            if data:
                await stream.send_message(router_pb2.TaskExecStdioReadResponse(data=data))
                offset += len(data)
            elif ended:
                return

    async def rpc_TaskExecStdinWriteStream(self, stream):
        run = None
        async for message in stream:
            self.requests.append(("TaskExecStdinWriteStream", message))
            if message.HasField("start"):
                run = self._exec(message.start.exec_id)
            elif message.HasField("end"):
                break
            elif run is not None and message.data:
                run["process"].stdin.write(message.data)
                await run["process"].stdin.drain()
        if run is not None:
            run["process"].stdin.close()
        await stream.send_message(router_pb2.TaskExecStdinWriteStreamResponse())

    async def _exit(self, run: dict) -> router_pb2.TaskExecWaitResponse:
        code = await run["process"].wait()
        if not await self._blocking(self.running, run["entry"]):
            raise GRPCError(Status.NOT_FOUND, f"Task {run['task']} is not running")
        if code == 137:  # killed at its timeout_secs (coreutils' timeout -s KILL), or by the OOM killer
            return router_pb2.TaskExecWaitResponse(signal=9)
        return router_pb2.TaskExecWaitResponse(code=code)

    async def rpc_TaskExecWait(self, stream):
        request = await self._request("TaskExecWait", stream)
        await stream.send_message(await self._exit(self._exec(request.exec_id)))

    async def rpc_TaskExecPoll(self, stream):
        request = await self._request("TaskExecPoll", stream)
        run = self._exec(request.exec_id)
        if run["process"].returncode is None:
            await stream.send_message(router_pb2.TaskExecPollResponse())
            return
        status = await self._exit(run)
        await stream.send_message(router_pb2.TaskExecPollResponse(
            **({"signal": status.signal} if status.HasField("signal") else {"code": status.code})))


def _fs_tool(argv: list[str]) -> list[str]:
    """Modal's in-sandbox file tool, for the one command the adapter uses: WriteFile (the data on stdin)."""
    command = json.loads(argv[1])
    if "WriteFile" not in command:
        raise GRPCError(Status.UNIMPLEMENTED, f"stand-in: the file tool's {next(iter(command))}")
    return ["sh", "-c", 'mkdir -p -- "$(dirname -- "$1")" && cat > "$1"', "sh", command["WriteFile"]["path"]]

