"""envd's process service (``/process.Process/...``), over a sandbox's session: each command
a ``run_shell`` call in a fresh worker of the sandbox, its output streamed as it comes.

A command outlives the request that started it: ``Start`` streams its events to whoever
asked, and the command runs on when that client goes (the SDK's background commands, a
handle that disconnects); ``Connect`` attaches to it again, from then on; ``List`` shows
those running; ``SendSignal`` ends it as its deadline would, its whole tree killed. A
command's deadline is the one its client gave (``connect-timeout-ms``), within the engine's
longest call; past it, the tree is killed and the stream ends with ``deadline_exceeded``.
A command started with ``stdin`` takes input as it runs (``SendInput``, ``StreamInput``,
``CloseStdin``: the engine's call input, ``sandbox._call_input``); one started without reads
an empty stdin, as envd's. Terminals (``pty``, ``Update``) are not served yet, and say so.
"""

from __future__ import annotations

import asyncio
import base64
import collections
import logging
import math
import shlex
import signal
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from starlette.requests import Request
from starlette.responses import Response, StreamingResponse

from a2e.caps.tools._models import ToolCallRequest, ToolEvent, ToolResult
from a2e_engine.engine._host import Refused
from a2e_engine.engine.e2b._connect_rpc import (
    STREAM_MEDIA_TYPE,
    RpcError,
    end_of_stream,
    error_response,
    frame,
    read_envelopes,
    read_request,
    unary_response,
    whole_number,
)
from a2e_engine.engine.e2b._in_sandbox import HOME, Paths
from a2e_engine.engine.e2b._sandboxes import Sandbox
from a2e_engine.sandbox._call_input import CallInput, InputRefused

__all__ = ["MAX_PROCESSES", "ProcessService"]

log = logging.getLogger("a2e.e2b")

#: Commands one sandbox may have running at once.
MAX_PROCESSES = 64
#: A command's events kept for streams that have not read them yet; past it the oldest go.
MAX_KEPT_CHARS = 1 << 20
#: How long a stream may be silent before it sends a keepalive (the SDK pings at 50 s).
KEEPALIVE_S = 30.0
_SIGNALS = {
    "SIGNAL_SIGKILL": signal.SIGKILL,
    "SIGNAL_SIGTERM": signal.SIGTERM,
    int(signal.SIGKILL): signal.SIGKILL,
    int(signal.SIGTERM): signal.SIGTERM,
}


@dataclass
class _Process:
    """One command: what it was started as, and its events so far."""

    pid: int
    tag: str | None
    config: dict[str, Any]
    call_id: str
    events: list[dict[str, Any]] = field(default_factory=list)
    first: int = 0  # the absolute index of ``events[0]`` (older ones were let go)
    kept_chars: int = 0
    ended: bool = False
    error: RpcError | None = None  # why its stream ends in error, when it does
    wake: asyncio.Event = field(default_factory=asyncio.Event)
    stdin: CallInput | None = None  # for a command started with stdin open

    def add(self, event: dict[str, Any], size: int = 0) -> None:
        self.events.append(event)
        self.kept_chars += size
        while self.kept_chars > MAX_KEPT_CHARS and len(self.events) > 1:
            self.kept_chars -= _size(self.events.pop(0))
            self.first += 1
        self.wake.set()
        self.wake = asyncio.Event()

    @property
    def next_index(self) -> int:
        return self.first + len(self.events)


class _Table:
    """One sandbox's commands: those running, by pid."""

    def __init__(self) -> None:
        self.running: dict[int, _Process] = {}
        self.tasks: set[asyncio.Task[None]] = set()
        self.last_pid = 0

    def select(self, message: dict[str, Any]) -> _Process:
        selector = message.get("process")
        if not isinstance(selector, dict):
            raise RpcError("invalid_argument", "process must select a process by pid or tag")
        pid, tag = whole_number(selector.get("pid")), selector.get("tag")
        if pid is not None:
            found = self.running.get(pid)
        elif isinstance(tag, str):
            found = next((p for p in self.running.values() if p.tag == tag), None)
        else:
            raise RpcError("invalid_argument", "process must select a process by pid or tag")
        if found is None:
            raise RpcError("not_found", f"process {pid if pid is not None else tag!r} not found")
        return found


Handler = Callable[[Request, Sandbox], Awaitable[Response]]


class ProcessService:
    """The process service of every sandbox, each with its table of commands."""

    def __init__(self, max_timeout: int, per_client: int) -> None:
        """``max_timeout``: the engine's longest call, a command's longest life;
        ``per_client``: the commands one client may have running at once, in all its
        sandboxes (the host's worker slots are shared: a client holding them all with
        commands that sleep would hold every other client's commands up)."""
        self.max_timeout = max_timeout
        self.per_client = per_client
        self._tables: dict[str, _Table] = {}
        self._running_by_owner: collections.Counter[str] = collections.Counter()

    def methods(self) -> dict[str, Handler]:
        return {
            "Start": self.start,
            "Connect": self.connect,
            "List": self.list,
            "SendSignal": self.send_signal,
            "SendInput": self.send_input,
            "CloseStdin": self.close_stdin,
            "StreamInput": self.stream_input,
            "Update": _not_served("terminals (pty)"),
        }

    def forget(self, sandbox: Sandbox) -> None:
        """``sandbox`` ended: its commands ended with its session."""
        self._tables.pop(sandbox.id, None)

    def _table(self, sandbox: Sandbox) -> _Table:
        return self._tables.setdefault(sandbox.id, _Table())

    async def start(self, request: Request, sandbox: Sandbox) -> Response:
        message = await read_request(request)
        spec = message.get("process")
        if not isinstance(spec, dict):
            raise RpcError("invalid_argument", "process must be an object with cmd and args")
        if message.get("pty"):
            raise RpcError("unimplemented", "terminals (pty) are not served by this server yet")
        cmd, args, envs, cwd = _command(spec)
        table = self._table(sandbox)
        if len(table.running) >= MAX_PROCESSES:
            raise RpcError(
                "resource_exhausted",
                f"this sandbox runs {MAX_PROCESSES} commands already; end one first",
            )
        if self._running_by_owner[sandbox.owner] >= self.per_client:
            raise RpcError(
                "resource_exhausted",
                f"this client runs {self.per_client} commands already, in all its sandboxes; "
                "end one first",
            )
        tag = message.get("tag") if isinstance(message.get("tag"), str) else None
        arguments: dict[str, Any] = {
            "command": shlex.join([cmd, *args]),
            # PWD names the directory as the sandbox does (bash keeps it where it holds).
            "env": {"PWD": cwd or HOME, **sandbox.env_vars, **envs},
        }
        if cwd is not None:
            arguments["cwd"] = Paths(sandbox.workspace).inside(cwd)
        call = ToolCallRequest(
            tool_name="run_shell",
            arguments=arguments,
            streaming=True,
            timeout=self._seconds(request),
        )
        table.last_pid += 1
        config: dict[str, Any] = {"cmd": cmd, "args": args, "envs": envs}
        if cwd is not None:
            config["cwd"] = cwd
        process = _Process(table.last_pid, tag, config, call.id)
        if message.get("stdin") is True:
            process.stdin = CallInput()
        table.running[process.pid] = process
        self._running_by_owner[sandbox.owner] += 1
        task = asyncio.get_running_loop().create_task(self._run(sandbox, table, process, call))
        table.tasks.add(task)
        task.add_done_callback(table.tasks.discard)
        return _stream(process, process.first)

    async def connect(self, request: Request, sandbox: Sandbox) -> Response:
        process = self._table(sandbox).select(await read_request(request))
        return _stream(process, process.next_index)

    async def list(self, request: Request, sandbox: Sandbox) -> Response:
        await read_request(request)
        listed = []
        for process in self._table(sandbox).running.values():
            entry: dict[str, Any] = {"pid": process.pid, "config": process.config}
            if process.tag is not None:
                entry["tag"] = process.tag
            listed.append(entry)
        return unary_response({"processes": listed})

    async def send_signal(self, request: Request, sandbox: Sandbox) -> Response:
        message = await read_request(request)
        process = self._table(sandbox).select(message)
        if message.get("signal") not in _SIGNALS:
            raise RpcError("invalid_argument", "signal must be SIGNAL_SIGKILL or SIGNAL_SIGTERM")
        sandbox.session.cancel(process.call_id)
        return unary_response({})

    async def send_input(self, request: Request, sandbox: Sandbox) -> Response:
        message = await read_request(request)
        _give(self._table(sandbox).select(message), message.get("input"))
        return unary_response({})

    async def close_stdin(self, request: Request, sandbox: Sandbox) -> Response:
        process = self._table(sandbox).select(await read_request(request))
        if process.stdin is None:
            raise RpcError("failed_precondition", f"process {process.pid} has no stdin open")
        process.stdin.end()
        return unary_response({})

    async def stream_input(self, request: Request, sandbox: Sandbox) -> Response:
        """A client stream: ``start`` naming the process, then ``data`` pieces (and
        ``keepalive``s), each given to it as it arrives; one empty message answers."""
        process: _Process | None = None
        async for message in read_envelopes(request):
            if "start" in message:
                start = message["start"]
                process = self._table(sandbox).select(start if isinstance(start, dict) else {})
            elif "data" in message:
                if process is None:
                    raise RpcError("invalid_argument", "the stream must start with start")
                data = message["data"]
                _give(process, data.get("input") if isinstance(data, dict) else None)
        return StreamingResponse(_one_message(), media_type=STREAM_MEDIA_TYPE)

    def _seconds(self, request: Request) -> int:
        """The command's deadline: its client's (``connect-timeout-ms``), within the
        engine's longest call."""
        given = whole_number(request.headers.get("connect-timeout-ms", ""))
        if given:
            return max(1, min(math.ceil(given / 1000), self.max_timeout))
        return self.max_timeout

    async def _run(
        self, sandbox: Sandbox, table: _Table, process: _Process, call: ToolCallRequest
    ) -> None:
        result: ToolResult | None = None
        try:
            async for burst in sandbox.session.call(call, process.stdin):
                for item in burst:
                    if isinstance(item, ToolEvent):
                        _output(process, item)
                    else:
                        result = item
        except Refused as exc:
            process.error = RpcError("resource_exhausted", exc.error.message)
        except Exception:  # the engine's own fault: said to the client, logged here
            log.exception("command %d of sandbox %s failed in the engine", process.pid, sandbox.id)
            process.error = RpcError("internal", "the engine failed running the command")
        finally:
            if process.stdin is not None:
                process.stdin.detach()
            table.running.pop(process.pid, None)
            self._running_by_owner[sandbox.owner] -= 1
            if self._running_by_owner[sandbox.owner] <= 0:
                del self._running_by_owner[sandbox.owner]
            if result is not None:
                _ended(process, result, call.timeout)
            elif process.error is None:
                process.error = RpcError("unavailable", "the sandbox ended")
            process.ended = True
            process.add({})  # wakes the streams: the end is there to read


def _command(spec: dict[str, Any]) -> tuple[str, list[str], dict[str, str], str | None]:
    cmd, args = spec.get("cmd"), spec.get("args", [])
    envs, cwd = spec.get("envs", {}), spec.get("cwd")
    if not isinstance(cmd, str) or not cmd or "\0" in cmd:
        raise RpcError("invalid_argument", "process.cmd must be a command")
    if not isinstance(args, list) or not all(isinstance(a, str) and "\0" not in a for a in args):
        raise RpcError("invalid_argument", "process.args must be a list of strings")
    if not isinstance(envs, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in envs.items()
    ):
        raise RpcError("invalid_argument", "process.envs must map names to strings")
    if cwd is not None and (not isinstance(cwd, str) or "\0" in cwd):
        raise RpcError("invalid_argument", "process.cwd must be a path")
    return cmd, args, envs, cwd or None


def _output(process: _Process, event: ToolEvent) -> None:
    name, chunk = event.data.get("name"), event.data.get("chunk", "")
    if name in ("stdout", "stderr") and chunk:
        encoded = base64.b64encode(chunk.encode()).decode()
        process.add({"data": {name: encoded}}, len(encoded))


def _ended(process: _Process, result: ToolResult, seconds: int) -> None:
    """The end event, as envd sends it, or the stream's error."""
    if result.reason == "timeout":
        process.error = RpcError("deadline_exceeded", f"the command ran past its {seconds} s")
        return
    data = result.data if isinstance(result.data, dict) else {}
    code = data.get("exit_code")
    end: dict[str, Any]
    if result.success:
        end = {"exitCode": 0, "exited": True, "status": "exit status 0"}
    elif isinstance(code, int) and code >= 0:
        end = {"exitCode": code, "exited": True, "status": f"exit status {code}"}
    elif isinstance(code, int):
        end = {"exitCode": -1, "exited": False, "status": f"signal: {_signal_name(-code)}"}
    elif result.reason == "cancelled":
        end = {"exitCode": -1, "exited": False, "status": "signal: killed"}
    else:
        end = {"exitCode": -1, "exited": False, "status": "error", "error": result.error or ""}
    process.add({"end": end})


def _give(process: _Process, given: Any) -> None:
    """``SendInput``'s ``input`` (``{"stdin": "<base64>"}``) to the command's stdin."""
    if process.stdin is None:
        raise RpcError("failed_precondition", f"process {process.pid} was started without stdin")
    if not isinstance(given, dict) or not isinstance(given.get("stdin", ""), str):
        raise RpcError("invalid_argument", "input must be {stdin: <base64>}")
    if "pty" in given:
        raise RpcError("unimplemented", "terminals (pty) are not served by this server yet")
    try:
        data = base64.b64decode(given.get("stdin", ""), validate=True)
    except ValueError:
        raise RpcError("invalid_argument", "input.stdin is not base64") from None
    try:
        process.stdin.send(data)
    except InputRefused as exc:
        raise RpcError("failed_precondition", f"process {process.pid}: {exc}") from None


async def _one_message() -> AsyncIterator[bytes]:
    yield frame({})
    yield end_of_stream()


def _signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name.removeprefix("SIG").lower()
    except ValueError:
        return str(number)


def _stream(process: _Process, index: int) -> StreamingResponse:
    """A stream of ``process``'s events from ``index`` on, its start first."""

    async def frames() -> AsyncIterator[bytes]:
        at = index
        yield frame({"event": {"start": {"pid": process.pid}}})
        while True:
            at = max(at, process.first)
            while at < process.next_index:
                event = process.events[at - process.first]
                at += 1
                if event:
                    yield frame({"event": event})
            if process.ended:
                yield end_of_stream(process.error)
                return
            try:
                await asyncio.wait_for(process.wake.wait(), KEEPALIVE_S)
            except TimeoutError:
                yield frame({"event": {"keepalive": {}}})

    return StreamingResponse(frames(), media_type=STREAM_MEDIA_TYPE)


def _size(event: dict[str, Any]) -> int:
    data = event.get("data")
    return sum(len(v) for v in data.values()) if isinstance(data, dict) else 0


def _not_served(what: str) -> Handler:
    async def refuse(request: Request, sandbox: Sandbox) -> Response:
        return error_response(RpcError("unimplemented", f"{what} is not served yet"))

    return refuse
