"""envd's filesystem service (``/filesystem.Filesystem/...``) and its ``/files`` upload and
download, over a sandbox's session: every operation one of the engine's file tools run in a
worker of the sandbox (``tools._files``: confined to the workspace for writes, to it and the
read roots for reads, never following a link out), in E2B's shapes.

``/files`` moves a file of any size in pieces of ``PIECE_BYTES`` (one tool call each), up to
``MAX_FILE_BYTES``. Watching a directory compares listings (``_watching``).
"""

from __future__ import annotations

import asyncio
import base64
import datetime
import logging
import posixpath
import stat
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

from python_multipart.exceptions import FormParserError
from python_multipart.multipart import MultipartParser, parse_options_header
from starlette.requests import ClientDisconnect, Request
from starlette.responses import Response, StreamingResponse
from starlette.types import Message, Receive

from a2e.caps.tools._models import ToolResult
from a2e_engine.engine._host import Refused
from a2e_engine.engine.e2b._connect_rpc import (
    RpcError,
    read_request,
    unary_response,
    whole_number,
)
from a2e_engine.engine.e2b._errors import error_response
from a2e_engine.engine.e2b._in_sandbox import HOME, Paths, call_tool, failure_of
from a2e_engine.engine.e2b._sandboxes import Sandbox
from a2e_engine.engine.e2b._watching import Watchers
from a2e_engine.engine.service._responses import json_response

__all__ = ["FilesystemService", "download", "upload"]

#: How long one file operation may take.
TOOL_TIMEOUT_S = 30
#: What one tool call moves of a file (the file tools take 4 MiB a call).
PIECE_BYTES = 4 << 20
#: The largest file ``/files`` moves, each way.
MAX_FILE_BYTES = 256 << 20
#: Files one upload may carry, and what its body may hold in all.
MAX_UPLOAD_FILES = 1000
MAX_UPLOAD_BYTES = MAX_FILE_BYTES + (1 << 20)
#: How long an upload's body may bring nothing before it is given up.
BODY_IDLE_S = 30.0
_TYPES = {"file": "FILE_TYPE_FILE", "dir": "FILE_TYPE_DIRECTORY", "link": "FILE_TYPE_SYMLINK"}
_TYPE_BITS = {"file": stat.S_IFREG, "dir": stat.S_IFDIR, "link": stat.S_IFLNK}
#: A file tool's exception, as the Connect code the SDK maps to its own exception.
_CODES = {
    "FileNotFoundError": "not_found",
    "FileExistsError": "already_exists",
    "PermissionError": "permission_denied",
    "NotADirectoryError": "invalid_argument",
    "IsADirectoryError": "invalid_argument",
    "ValueError": "invalid_argument",
}

Handler = Callable[[Request, Sandbox], Awaitable[Response]]
log = logging.getLogger("a2e.e2b")


class _Failed(Exception):
    """A file tool failed: the Connect code it reads as, and its message in E2B's paths."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


async def _tool(sandbox: Sandbox, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    """The file tool's result data; ``_Failed`` when it failed, in E2B's paths."""
    try:
        result = await call_tool(sandbox.session, name, arguments, TOOL_TIMEOUT_S)
    except Refused as exc:
        raise _Failed("resource_exhausted", exc.error.message) from None
    if result.success and isinstance(result.data, dict):
        return result.data
    raise _failed(result, Paths(sandbox.workspace))


def _failed(result: ToolResult, paths: Paths) -> _Failed:
    kind, message = failure_of(result)
    message = paths.told(message)
    if result.reason == "timeout":
        return _Failed("deadline_exceeded", message)
    return _Failed(_CODES.get(kind, "internal" if not kind else "unknown"), message)


class FilesystemService:
    """The filesystem service, in E2B's shapes: its unary methods here, its watchers'
    (``_watching``) over the same file tools."""

    def __init__(self) -> None:
        self.watchers = Watchers(_listed, _entry)

    def methods(self) -> dict[str, Handler]:
        return {
            "Stat": _rpc(self._stat),
            "ListDir": _rpc(self._list_dir),
            "MakeDir": _rpc(self._make_dir),
            "Move": _rpc(self._move),
            "Remove": _rpc(self._remove),
            **self.watchers.methods(),
        }

    def forget(self, sandbox: Sandbox) -> None:
        """``sandbox`` ended: its watchers go."""
        self.watchers.forget(sandbox)

    async def _stat(self, sandbox: Sandbox, message: dict[str, Any]) -> dict[str, Any]:
        paths = Paths(sandbox.workspace)
        facts = await _tool(sandbox, "stat", {"path": paths.inside(_path(message, "path"))})
        return {"entry": _entry(facts, paths)}

    async def _list_dir(self, sandbox: Sandbox, message: dict[str, Any]) -> dict[str, Any]:
        paths = Paths(sandbox.workspace)
        depth = whole_number(message.get("depth", 1))
        if depth is None:
            raise _Failed("invalid_argument", "depth must be a whole number")
        arguments = {"path": paths.inside(_path(message, "path")), "depth": depth, "full": True}
        listed = await _tool(sandbox, "list_dir", arguments)
        entries = [_entry(facts, paths) for facts in listed.get("entries", [])]
        return {"entries": [entry for entry in entries if entry["type"] != "FILE_TYPE_UNSPECIFIED"]}

    async def _make_dir(self, sandbox: Sandbox, message: dict[str, Any]) -> dict[str, Any]:
        paths = Paths(sandbox.workspace)
        made = await _tool(sandbox, "make_dir", {"path": paths.inside(_path(message, "path"))})
        if not made.get("created"):
            raise _Failed("already_exists", f"{_path(message, 'path')} exists already")
        where = paths.outside(str(made.get("path", "")))
        return {"entry": {"name": posixpath.basename(where), "type": _TYPES["dir"], "path": where}}

    async def _move(self, sandbox: Sandbox, message: dict[str, Any]) -> dict[str, Any]:
        paths = Paths(sandbox.workspace)
        source, destination = _path(message, "source"), _path(message, "destination")
        moved = await _tool(
            sandbox,
            "move",
            {"source": paths.inside(source), "destination": paths.inside(destination)},
        )
        facts = await _tool(sandbox, "stat", {"path": str(moved.get("destination", ""))})
        return {"entry": _entry(facts, paths)}

    async def _remove(self, sandbox: Sandbox, message: dict[str, Any]) -> dict[str, Any]:
        paths = Paths(sandbox.workspace)
        where = paths.inside(_path(message, "path"))
        await _tool(sandbox, "delete", {"path": where, "recursive": True})
        return {}


def _rpc(
    method: Callable[[Sandbox, dict[str, Any]], Awaitable[dict[str, Any]]],
) -> Handler:
    async def handle(request: Request, sandbox: Sandbox) -> Response:
        message = await read_request(request)
        try:
            return unary_response(await method(sandbox, message))
        except _Failed as exc:
            raise RpcError(exc.code, exc.message) from None

    return handle


async def _listed(sandbox: Sandbox, arguments: dict[str, Any]) -> dict[str, Any]:
    """``list_dir`` in the sandbox, a failure as the Connect error it reads as."""
    try:
        return await _tool(sandbox, "list_dir", arguments)
    except _Failed as exc:
        raise RpcError(exc.code, exc.message) from None


def _path(message: dict[str, Any], name: str) -> str:
    value = message.get(name)
    if not isinstance(value, str) or not value or "\0" in value:
        raise RpcError("invalid_argument", f"{name} must be a path")
    return value


def _entry(facts: dict[str, Any], paths: Paths) -> dict[str, Any]:
    """A file tool's facts of a path as envd's ``EntryInfo``."""
    kind = str(facts.get("type", ""))
    where = paths.outside(str(facts.get("path", "")))
    mode = int(str(facts.get("mode", "0")), 8)
    entry: dict[str, Any] = {
        "name": posixpath.basename(where) or where,
        "type": _TYPES.get(kind, "FILE_TYPE_UNSPECIFIED"),
        "path": where,
        "size": int(facts.get("size", 0)),
        "mode": mode,
        "permissions": stat.filemode(_TYPE_BITS.get(kind, 0) | mode),
        "owner": "user",
        "group": "user",
        "modifiedTime": _rfc3339(float(facts.get("modified", 0.0))),
    }
    if kind == "link":
        entry["symlinkTarget"] = paths.outside(str(facts.get("target", "")))
    return entry


def _rfc3339(seconds: float) -> str:
    moment = datetime.datetime.fromtimestamp(seconds, datetime.UTC)
    return moment.isoformat().replace("+00:00", "Z")


def _file_error(exc: _Failed) -> Response:
    """``/files``' errors, as envd's: the SDK maps 404 to ``FileNotFoundException``."""
    status = {"not_found": 404, "invalid_argument": 400, "resource_exhausted": 429}.get(
        exc.code, 403 if exc.code == "permission_denied" else 500
    )
    return error_response(status, exc.message)


async def download(request: Request, sandbox: Sandbox, path: str) -> Response:
    """``GET /files``: the file's bytes, read in pieces as they are sent."""
    paths = Paths(sandbox.workspace)
    where = paths.inside(path)
    try:
        first = await _tool(sandbox, "read_file", _piece(where, 0))
    except _Failed as exc:
        return _file_error(exc)
    size = int(first.get("size", 0))
    if size > MAX_FILE_BYTES:
        message = f"{path} holds {size} bytes, past the {MAX_FILE_BYTES} this server sends"
        return error_response(400, message)

    piece = base64.b64decode(first.get("content_base64", ""))
    if size <= PIECE_BYTES:  # what was read, which a file changing as it is read may make short
        return Response(piece, media_type="application/octet-stream")

    async def pieces() -> AsyncIterator[bytes]:
        nonlocal piece
        sent = len(piece)
        yield piece
        while piece and sent < size:
            try:
                data = await _tool(sandbox, "read_file", _piece(where, sent))
            except _Failed as exc:  # changed or gone as it was sent: the body ends short
                log.info("a download of %s ended short: %s", path[:200], exc.message)
                return
            piece = base64.b64decode(data.get("content_base64", ""))
            sent += len(piece)
            yield piece

    return StreamingResponse(pieces(), media_type="application/octet-stream")


def _piece(where: str, offset: int) -> dict[str, Any]:
    return {"path": where, "encoding": "base64", "offset": offset, "length": PIECE_BYTES}


async def upload(request: Request, sandbox: Sandbox, path: str | None) -> Response:
    """``POST /files``: each file of a multipart body (its part's filename the path, or
    ``path`` for one), or the raw body to ``path``; written in pieces, parents made."""
    paths = Paths(sandbox.workspace)
    written: list[dict[str, str]] = []
    request = Request(request.scope, _bounded(request.receive, MAX_UPLOAD_BYTES))
    try:
        if request.headers.get("content-type", "").startswith("multipart/form-data"):
            for target in await _write_multipart(request, sandbox, paths, path):
                written.append(_written(paths, target))
        else:
            if not path:
                raise _Failed("invalid_argument", "path is needed for a body that is a file")
            writer = _Writer(sandbox, paths, path)
            async for chunk in request.stream():
                await writer.add(chunk)
            await writer.finish()
            written.append(_written(paths, path))
    except _Failed as exc:
        return _file_error(exc)
    except ClientDisconnect:
        return _file_error(_Failed("invalid_argument", "the client went away mid-upload"))
    except _TooLarge:
        message = f"the upload is past {MAX_UPLOAD_BYTES} bytes"
        return error_response(413, message)
    except _TooSlow:
        message = f"the upload's body stopped coming for {BODY_IDLE_S:g} s"
        return error_response(408, message)
    return json_response(written)


class _TooLarge(Exception):
    """An upload's body ran past ``MAX_UPLOAD_BYTES``."""


class _TooSlow(Exception):
    """An upload's body stopped coming for ``BODY_IDLE_S``."""


def _bounded(receive: Receive, limit: int) -> Receive:
    """``receive``, raising ``_TooLarge`` once the body has brought more than ``limit``
    bytes, and ``_TooSlow`` when it brings nothing for ``BODY_IDLE_S``."""
    seen = 0

    async def bounded() -> Message:
        nonlocal seen
        try:
            message = await asyncio.wait_for(receive(), BODY_IDLE_S)
        except TimeoutError:
            raise _TooSlow from None
        if message["type"] == "http.request":
            seen += len(message.get("body", b""))
            if seen > limit:
                raise _TooLarge
        return message

    return bounded


class _Writer:
    """One file written in the sandbox as its bytes come, a piece of ``PIECE_BYTES`` at a
    time (one tool call each): the server holds one piece of it at most."""

    def __init__(self, sandbox: Sandbox, paths: Paths, target: str) -> None:
        if not target or "\0" in target:
            raise _Failed("invalid_argument", "each file needs a path")
        self.sandbox, self.target = sandbox, target
        self.where, self.mode = paths.inside(target), "overwrite"
        self.pending, self.total = bytearray(), 0

    async def add(self, data: bytes) -> None:
        self.total += len(data)
        if self.total > MAX_FILE_BYTES:
            raise _Failed("invalid_argument", f"{self.target} is past {MAX_FILE_BYTES} bytes")
        self.pending += data
        while len(self.pending) >= PIECE_BYTES:
            await self._put(bytes(self.pending[:PIECE_BYTES]))
            del self.pending[:PIECE_BYTES]

    async def finish(self) -> None:
        """What is left, or the empty file that nothing was written to yet."""
        if self.pending or self.mode == "overwrite":
            await self._put(bytes(self.pending))
            self.pending.clear()

    async def _put(self, piece: bytes) -> None:
        arguments = {
            "path": self.where,
            "content": base64.b64encode(piece).decode(),
            "encoding": "base64",
            "mode": self.mode,
            "make_dirs": True,
        }
        await _tool(self.sandbox, "write_file", arguments)
        self.mode = "append"


async def _write_multipart(
    request: Request, sandbox: Sandbox, paths: Paths, path: str | None
) -> list[str]:
    """Each ``file`` part of a multipart body written as it is parsed (never the whole body
    held, nor spooled): its filename the path, or ``path`` for the one part the SDK sends it
    with; the paths written, in order."""
    _, options = parse_options_header(request.headers.get("content-type", ""))
    boundary = options.get(b"boundary")
    if not boundary:
        raise _Failed("invalid_argument", "the multipart body names no boundary")
    events: list[tuple[str, bytes]] = []

    def note(kind: str) -> Callable[..., None]:
        def noted(data: bytes = b"", start: int = 0, end: int = 0) -> None:
            events.append((kind, data[start:end]))

        return noted

    kinds = ("part_begin", "header_field", "header_value", "header_end", "part_data", "part_end")
    callbacks: Any = {f"on_{kind}": note(kind) for kind in kinds}
    parser = MultipartParser(boundary, callbacks)
    headers: dict[bytes, bytes] = {}
    field = value = b""
    writer: _Writer | None = None
    judged = False  # whether the part's headers were read for a file to write
    targets: list[str] = []
    async for chunk in request.stream():
        try:
            parser.write(chunk)
        except FormParserError as exc:
            raise _Failed("invalid_argument", f"the multipart body does not read: {exc}") from None
        for kind, data in events:
            if kind == "part_begin":
                headers, field, value, judged = {}, b"", b"", False
            elif kind == "header_field":
                field += data
            elif kind == "header_value":
                value += data
            elif kind == "header_end":
                headers[field.lower()], field, value = value, b"", b""
            elif kind in ("part_data", "part_end"):
                if not judged:
                    writer = _part_writer(sandbox, paths, path, headers, targets)
                    judged = True
                if writer is not None and kind == "part_data":
                    await writer.add(data)
                elif writer is not None:
                    await writer.finish()
                    writer = None
        events.clear()
    if not targets:
        raise _Failed("invalid_argument", "the body holds no 'file' part")
    return targets


def _part_writer(
    sandbox: Sandbox,
    paths: Paths,
    path: str | None,
    headers: dict[bytes, bytes],
    targets: list[str],
) -> _Writer | None:
    """The writer of a ``file`` part (its target added to ``targets``); None for any other
    part, whose bytes are passed over."""
    _, options = parse_options_header(headers.get(b"content-disposition", b""))
    if options.get(b"name") != b"file":
        return None
    if len(targets) >= MAX_UPLOAD_FILES:
        raise _Failed("invalid_argument", f"an upload holds {MAX_UPLOAD_FILES} files at most")
    filename = options.get(b"filename", b"").decode("utf-8", "replace")
    if path and targets:
        raise _Failed("invalid_argument", "one path was given for several files")
    target = path or filename
    writer = _Writer(sandbox, paths, target)
    targets.append(target)
    return writer


def _written(paths: Paths, target: str) -> dict[str, str]:
    """``WriteInfo`` of a file written: the SDK wants its name, type and path."""
    where = paths.outside(paths.inside(target))
    if not where.startswith("/"):
        where = posixpath.join(HOME, where)
    return {"name": posixpath.basename(where), "type": "file", "path": where}
