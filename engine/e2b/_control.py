"""E2B's control plane, as its SDK calls it (``e2b/api/client``; read from e2b 2.63.0):
``POST /v2/sandboxes`` (201), ``GET /v2/sandboxes``, ``GET /sandboxes/{id}``,
``DELETE /sandboxes/{id}`` (204), ``POST /sandboxes/{id}/timeout`` (204) and
``POST /v2/sandboxes/{id}/connect`` (which resumes a paused sandbox), ``POST
/sandboxes/{id}/pause`` (204; 409 if paused already) and ``/resume``, and ``POST
/sandboxes/{id}/fork`` (201, a result per copy). Every error is E2B's JSON ``{"code": <status>,
"message"}`` (the SDK reads nothing else), and a request this engine cannot serve yet
(metrics, network rules) is a 501 of that shape that says so. Snapshots: ``POST
/sandboxes/{id}/snapshots`` (201), ``GET /snapshots``, ``DELETE /templates/{id}`` (204), and a
create whose ``templateID`` names one.

The service's token comes as ``X-API-Key`` (``engine.service._auth``); the sandboxes a request
sees are its client's (``tenant_of``). Bodies are read within the service's bounds.
"""

from __future__ import annotations

import datetime
import functools
import logging
import os
import secrets
import shutil
from collections.abc import Awaitable, Callable
from typing import Any
from urllib.parse import parse_qsl, unquote

import psutil
from pydantic import BaseModel, ConfigDict, Field
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route

from a2e_engine.engine._host import Host, Refused
from a2e_engine.engine.e2b._connect_rpc import whole_number
from a2e_engine.engine.e2b._errors import E2BError, read_body
from a2e_engine.engine.e2b._sandbox_side import SandboxSide
from a2e_engine.engine.e2b._sandboxes import (
    DEFAULT_TIMEOUT_S,
    MAX_TIMEOUT_S,
    Sandbox,
    Sandboxes,
    Snapshot,
    TooMany,
)
from a2e_engine.engine.service._auth import tenant_of
from a2e_engine.engine.service._responses import json_response

__all__ = ["ENVD_VERSION", "TEMPLATES", "E2BEndpoint"]

log = logging.getLogger("a2e.e2b")

#: The envd version a sandbox says it runs: the SDK turns its features on by it.
ENVD_VERSION = "0.6.4"
#: The templates served: E2B's base sandbox and its code interpreter's.
TEMPLATES = ("base", "code-interpreter-v1")
#: Who made a sandbox, as the SDK's ``clientID`` says.
CLIENT_ID = "a2e"
#: A sandbox's metadata and environment: entries, and characters in a key or a value, at most.
MAX_ENTRIES = 64
MAX_ENTRY_CHARS = 4096
#: The most snapshots one listing holds.
MAX_LISTED = 1000
#: The longest name a snapshot may be given.
MAX_NAME_CHARS = 128
#: Copies one fork makes at most (E2B's API's bound).
MAX_FORKS = 100
#: What the control plane's bodies may hold (a create's metadata and environment, bounded).
MAX_BODY_BYTES = 1 << 20


class _Create(BaseModel):
    """``NewSandboxV2``, the fields the SDK sends, of their own types; others it may add are
    ignored."""

    model_config = ConfigDict(extra="ignore", strict=True)

    templateID: str = "base"
    timeout: int = Field(DEFAULT_TIMEOUT_S, ge=1, le=MAX_TIMEOUT_S)
    metadata: dict[str, str] = Field(default_factory=dict)
    envVars: dict[str, str] = Field(default_factory=dict)
    autoPause: bool = False


class _Timeout(BaseModel):
    model_config = ConfigDict(extra="ignore", strict=True)

    timeout: int = Field(ge=1, le=MAX_TIMEOUT_S)


class _Connect(BaseModel):
    model_config = ConfigDict(extra="ignore", strict=True)

    timeout: int | None = Field(None, ge=1, le=MAX_TIMEOUT_S)


class _Pause(BaseModel):
    """What the SDK may send with a pause (``memory``, ``requireHealthyGuest``): a process
    sandbox always keeps its memory, so nothing of it changes what is done."""

    model_config = ConfigDict(extra="ignore", strict=True)
    memory: bool = True


class _Snapshot(BaseModel):
    """``SandboxSnapshotRequest``: a name it is also found by; ``memory`` changes nothing here
    (a snapshot always keeps the interpreter's memory, copy-on-write)."""

    model_config = ConfigDict(extra="ignore", strict=True)
    name: str | None = Field(None, min_length=1, max_length=MAX_NAME_CHARS)
    memory: bool = True


class _Fork(BaseModel):
    """``SandboxForkRequest``: the copies' life (the parent's last given, when absent) and
    how many (one, when absent; E2B's API takes up to 100, its SDK asks for 20 at most)."""

    model_config = ConfigDict(extra="ignore", strict=True)
    timeout: int | None = Field(None, ge=1, le=MAX_TIMEOUT_S)
    count: int = Field(1, ge=1, le=MAX_FORKS)


class E2BEndpoint:
    """The control plane's routes, over the service's host, and its sandboxes."""

    def __init__(self, host: Host, per_client: int) -> None:
        """``per_client``: the sandboxes one client may hold live at once."""
        self.sandboxes = Sandboxes(host, per_client)
        #: Each sandbox's own side: its commands, files and code (``_sandbox_side``).
        status = host.status()
        self.sandbox_side = SandboxSide(self.sandboxes, status.max_timeout, status.max_workers)

    async def stop(self) -> None:
        """The service stops: every sandbox ends with it."""
        self.sandboxes.end_all()

    def routes(self) -> list[BaseRoute]:
        handle = self._handled
        return [
            Route("/v2/sandboxes", handle(self._create), methods=["POST"]),
            Route("/v2/sandboxes", handle(self._list), methods=["GET"]),
            Route("/sandboxes/{sandbox_id}", handle(self._info), methods=["GET"]),
            Route("/sandboxes/{sandbox_id}", handle(self._kill), methods=["DELETE"]),
            Route("/sandboxes/{sandbox_id}/timeout", handle(self._timeout), methods=["POST"]),
            Route("/v2/sandboxes/{sandbox_id}/connect", handle(self._connect), methods=["POST"]),
            Route("/sandboxes/{sandbox_id}/fork", handle(self._fork), methods=["POST"]),
            Route("/sandboxes/{sandbox_id}/pause", handle(self._pause), methods=["POST"]),
            Route("/sandboxes/{sandbox_id}/snapshots", handle(self._snapshot), methods=["POST"]),
            Route("/snapshots", handle(self._snapshots), methods=["GET"]),
            Route("/templates/{template_id}", handle(self._delete_template), methods=["DELETE"]),
            Route("/sandboxes/{sandbox_id}/resume", handle(self._resume), methods=["POST"]),
            *(
                Route(path, handle(_not_yet(what)), methods=methods)
                for path, methods, what in _NOT_YET
            ),
        ]

    def _handled(
        self, handler: Callable[[Request], Awaitable[Response]]
    ) -> Callable[[Request], Awaitable[Response]]:
        async def endpoint(request: Request) -> Response:
            try:
                return await handler(request)
            except E2BError as exc:
                return exc.response()
            except Exception as exc:  # a bug of ours: said in E2B's shape, and logged
                log.exception("the E2B control plane failed a request")
                return E2BError(500, f"internal error: {type(exc).__name__}").response()

        return endpoint

    async def _create(self, request: Request) -> Response:
        body = await read_body(request, _Create, MAX_BODY_BYTES)
        owner = tenant_of(request.scope)
        snapshot = self.sandboxes.find_snapshot(owner, body.templateID)
        if body.templateID not in TEMPLATES and snapshot is None:
            served = ", ".join(TEMPLATES)
            raise E2BError(
                400, f"template {body.templateID!r} is not served; served: {served}, snapshots"
            )
        for name, entries in (("metadata", body.metadata), ("envVars", body.envVars)):
            _bounded(name, entries)
        try:
            if snapshot is not None:
                sandbox = await self.sandboxes.create_from(snapshot, body.timeout)
            else:
                sandbox = await self.sandboxes.create(
                    owner, body.templateID, body.timeout, body.metadata, body.envVars
                )
        except TooMany as exc:
            raise E2BError(429, f"{exc}: kill one first", {"Should-Retry": "false"}) from None
        except Refused as exc:
            why = f"cannot create a sandbox now: {exc.error.message}"
            raise E2BError(429, why, {"Retry-After": "1"}) from None
        return json_response(_sandbox_json(sandbox), status=201)

    async def _list(self, request: Request) -> Response:
        wanted = _metadata_filter(request.query_params.get("metadata", ""))
        states = set(request.query_params.get("state", "").split(",")) - {""}
        listed = []
        for sandbox in self.sandboxes.owned_by(tenant_of(request.scope)):
            state = "paused" if sandbox.paused else "running"
            if states and state not in states:
                continue
            if all(sandbox.metadata.get(k) == v for k, v in wanted.items()):
                listed.append(_listed_json(sandbox))
        return json_response(listed)

    async def _info(self, request: Request) -> Response:
        sandbox = self._sandbox(request)
        detail = {**_listed_json(sandbox), "envdAccessToken": sandbox.access_token, "domain": None}
        return json_response(detail)

    async def _kill(self, request: Request) -> Response:
        self.sandboxes.end(self._sandbox(request))
        return Response(status_code=204)

    async def _timeout(self, request: Request) -> Response:
        # First: the body may take a while to come, and the sandbox end meanwhile.
        body = await read_body(request, _Timeout, MAX_BODY_BYTES)
        self.sandboxes.set_timeout(self._sandbox(request), body.timeout)
        return Response(status_code=204)

    async def _connect(self, request: Request) -> Response:
        """The SDK's ``connect``: a paused sandbox resumes (201), a running one is as it is."""
        body = await read_body(request, _Connect, MAX_BODY_BYTES)
        sandbox = self._sandbox(request)
        resumed = sandbox.paused
        await self._resumed(sandbox)
        if body.timeout is not None:
            self.sandboxes.set_timeout(sandbox, body.timeout)
        return json_response(_sandbox_json(sandbox), status=201 if resumed else 200)

    async def _pause(self, request: Request) -> Response:
        """204 once its processes are frozen; 409 if it was paused already."""
        await read_body(request, _Pause, MAX_BODY_BYTES)
        sandbox = self._sandbox(request)
        try:
            paused = await self.sandboxes.pause(sandbox)
        except Refused as exc:
            raise E2BError(500, f"cannot pause the sandbox: {exc.error.message}") from None
        if not paused:
            raise E2BError(409, f"sandbox {sandbox.id!r} is paused already")
        return Response(status_code=204)

    async def _resume(self, request: Request) -> Response:
        """The older SDKs' resume: 201 with the sandbox; 409 if it is not paused."""
        body = await read_body(request, _Connect, MAX_BODY_BYTES)
        sandbox = self._sandbox(request)
        if not sandbox.paused:
            raise E2BError(409, f"sandbox {sandbox.id!r} is not paused")
        await self._resumed(sandbox)
        if body.timeout is not None:
            self.sandboxes.set_timeout(sandbox, body.timeout)
        return json_response(_sandbox_json(sandbox), status=201)

    async def _resumed(self, sandbox: Sandbox) -> None:
        try:
            await self.sandboxes.resume(sandbox)
        except Refused as exc:
            raise E2BError(500, f"cannot resume the sandbox: {exc.error.message}") from None

    async def _fork(self, request: Request) -> Response:
        """``SandboxForkResult`` per copy, all made or none: a failure is the request's."""
        body = await read_body(request, _Fork, MAX_BODY_BYTES)
        parent = self._sandbox(request)
        timeout_s = body.timeout if body.timeout is not None else parent.timeout_s
        try:
            copies = await self.sandboxes.fork(parent, body.count, timeout_s)
        except TooMany as exc:
            raise E2BError(429, f"{exc}: kill one first", {"Should-Retry": "false"}) from None
        except Refused as exc:
            overloaded = exc.error.retryable
            status = 429 if overloaded else 500
            raise E2BError(status, f"cannot fork the sandbox: {exc.error.message}") from None
        return json_response([{"sandbox": _sandbox_json(copy)} for copy in copies], status=201)

    async def _snapshot(self, request: Request) -> Response:
        """201 ``{snapshotID, names}``: the sandbox as it is now, which goes on."""
        body = await read_body(request, _Snapshot, MAX_BODY_BYTES)
        sandbox = self._sandbox(request)
        try:
            snapshot = await self.sandboxes.snapshot(sandbox, body.name)
        except TooMany as exc:
            raise E2BError(429, f"{exc}: delete one first", {"Should-Retry": "false"}) from None
        except Refused as exc:
            status = 429 if exc.error.retryable else 500
            raise E2BError(status, f"cannot snapshot the sandbox: {exc.error.message}") from None
        return json_response(_snapshot_json(snapshot), status=201)

    async def _snapshots(self, request: Request) -> Response:
        """The client's snapshots, of one sandbox (``sandboxID``) or name (``name``), oldest
        first, ``limit`` at most (one page: no ``nextToken`` is given)."""
        sandbox_id = request.query_params.get("sandboxID", "")
        name = request.query_params.get("name", "")
        limit = whole_number(request.query_params.get("limit", "")) or MAX_LISTED
        listed = [
            _snapshot_json(s)
            for s in self.sandboxes.snapshots(tenant_of(request.scope))
            if (not sandbox_id or s.sandbox_id == sandbox_id) and (not name or name in s.names)
        ]
        return json_response(listed[: min(limit, MAX_LISTED)])

    async def _delete_template(self, request: Request) -> Response:
        """A snapshot deleted (204); the templates served are not the client's to delete."""
        template_id = unquote(request.path_params["template_id"])
        snapshot = self.sandboxes.find_snapshot(tenant_of(request.scope), template_id)
        if snapshot is None:
            raise E2BError(404, f"snapshot {template_id[:200]!r} not found")
        self.sandboxes.delete_snapshot(snapshot)
        return Response(status_code=204)

    def _sandbox(self, request: Request) -> Sandbox:
        sandbox_id = request.path_params["sandbox_id"]
        owner = tenant_of(request.scope)
        sandbox = self.sandboxes.get(owner, sandbox_id)
        if sandbox is None:
            ended = self.sandboxes.why_ended(sandbox_id)
            if ended is not None and secrets.compare_digest(ended.owner, owner):
                raise E2BError(404, f"sandbox {sandbox_id!r} not found: it ended, {ended.why}")
            raise E2BError(404, f"sandbox {sandbox_id!r} not found")
        return sandbox


#: What the SDK can ask that this engine does not serve yet, each with what it is.
_NOT_YET: list[tuple[str, list[str], str]] = [
    ("/sandboxes/{sandbox_id}/metrics", ["GET"], "sandbox metrics"),
    ("/sandboxes/{sandbox_id}/network", ["PUT"], "network rules"),
]


def _not_yet(what: str) -> Callable[[Request], Awaitable[Response]]:
    async def refuse(request: Request) -> Response:
        raise E2BError(501, f"{what} is not supported by this server yet")

    return refuse


def _bounded(name: str, entries: dict[str, str]) -> None:
    if len(entries) > MAX_ENTRIES:
        raise E2BError(400, f"{name} has {len(entries)} entries, past {MAX_ENTRIES}")
    for key, value in entries.items():
        if len(key) > MAX_ENTRY_CHARS or len(value) > MAX_ENTRY_CHARS:
            raise E2BError(400, f"{name}[{key[:40]!r}] is past {MAX_ENTRY_CHARS} characters")
        if "\0" in key or "\0" in value or (name == "envVars" and ("=" in key or not key)):
            raise E2BError(400, f"{name}[{key[:40]!r}] is not a name and a value")


def _metadata_filter(query: str) -> dict[str, str]:
    """The SDK's ``metadata`` parameter: a query string of its own (``k=v&k2=v2``), each key
    and value of which it quoted once more before encoding the whole."""
    return {unquote(k): unquote(v) for k, v in parse_qsl(query, keep_blank_values=True)}


def _sandbox_json(sandbox: Sandbox) -> dict[str, Any]:
    """``Sandbox``, as create and connect answer."""
    return {
        "templateID": sandbox.template,
        "sandboxID": sandbox.id,
        "clientID": CLIENT_ID,
        "envdVersion": ENVD_VERSION,
        "envdAccessToken": sandbox.access_token,
        "domain": None,
    }


def _snapshot_json(snapshot: Snapshot) -> dict[str, Any]:
    """``SnapshotInfo``: its id and names."""
    return {"snapshotID": snapshot.id, "names": list(snapshot.names)}


def _listed_json(sandbox: Sandbox) -> dict[str, Any]:
    """``ListedSandbox``: what a listing says of each."""
    return {
        "templateID": sandbox.template,
        "sandboxID": sandbox.id,
        "clientID": CLIENT_ID,
        "startedAt": _iso(sandbox.started_at),
        "endAt": _iso(sandbox.ends_at),
        "envdVersion": ENVD_VERSION,
        "cpuCount": os.cpu_count() or 1,
        "memoryMB": _memory_mb(),
        "diskSizeMB": _disk_mb(sandbox.workspace),
        "state": "paused" if sandbox.paused else "running",
        "metadata": sandbox.metadata,
    }


def _disk_mb(workspace: str) -> int:
    """Its workspace's size, where this machine has it (on a cluster, its node may be
    another)."""
    try:
        return shutil.disk_usage(workspace).total >> 20
    except OSError:
        return 0


@functools.cache
def _memory_mb() -> int:
    """The machine's memory: read once, not for each sandbox of each listing."""
    return int(psutil.virtual_memory().total >> 20)


def _iso(moment: datetime.datetime) -> str:
    return moment.isoformat().replace("+00:00", "Z")
