"""Connect RPC (connectrpc.com's protocol) with its JSON codec, as E2B's envd speaks it and
the SDK's ``connectrpc`` client reads it.

A unary call is a POST of one JSON object, answered 200 with one (``application/json``) or
with an error status and ``{"code": "<connect code>", "message"}``. A server stream is a POST
of one envelope (flags byte, 4-byte big-endian length, JSON; the SDK sends it chunked),
answered 200 as ``application/connect+json`` (exactly: the client refuses a charset) with an
envelope per message and an end-of-stream envelope (flags ``0x02``) that carries the error
if the stream failed. Nothing here is compressed: the SDK asks for ``identity``.
"""

from __future__ import annotations

import asyncio
import re
import struct
from collections.abc import AsyncIterator
from typing import Any

from starlette.requests import ClientDisconnect, Request
from starlette.responses import Response

from a2e import _jsonwire as jsonwire

__all__ = [
    "STREAM_MEDIA_TYPE",
    "RpcError",
    "end_of_stream",
    "error_response",
    "frame",
    "read_envelopes",
    "read_request",
    "unary_response",
    "whole_number",
]

STREAM_MEDIA_TYPE = "application/connect+json"
#: A request message, at most: a path, a command line and its environment fit many times.
MAX_REQUEST_BYTES = 1 << 20
#: How long a request's body may take to arrive, and a client stream may send nothing.
BODY_TIMEOUT_S = 30.0
STREAM_IDLE_S = 120.0
_END_OF_STREAM = 0x02
_COMPRESSED = 0x01
_HEADER = struct.Struct(">BI")

#: Each Connect code's HTTP status, for a unary error (connectrpc.com/docs/protocol).
STATUS_OF_CODE: dict[str, int] = {
    "canceled": 499,
    "unknown": 500,
    "invalid_argument": 400,
    "deadline_exceeded": 504,
    "not_found": 404,
    "already_exists": 409,
    "permission_denied": 403,
    "resource_exhausted": 429,
    "failed_precondition": 400,
    "aborted": 409,
    "out_of_range": 400,
    "unimplemented": 501,
    "internal": 500,
    "unavailable": 503,
    "data_loss": 500,
    "unauthenticated": 401,
}


class RpcError(Exception):
    """A call answered with a Connect error: ``code`` one of ``STATUS_OF_CODE``'s keys."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message

    def wire(self) -> dict[str, str]:
        return {"code": self.code, "message": self.message}


async def read_request(request: Request) -> dict[str, Any]:
    """The call's request message: a unary call's body, or a stream's first envelope; an
    ``RpcError`` (``invalid_argument``, ``resource_exhausted``, ``deadline_exceeded``) for one
    that does not read, is too long or does not come."""
    try:
        body = await asyncio.wait_for(_bounded_body(request), BODY_TIMEOUT_S)
    except TimeoutError:
        raise RpcError("deadline_exceeded", "the request did not arrive in time") from None
    except ClientDisconnect:
        raise RpcError("canceled", "the client went away before its request came") from None
    if request.headers.get("content-type", "").startswith(STREAM_MEDIA_TYPE):
        body = _first_envelope(body)
    return _message(body)


async def _bounded_body(request: Request) -> bytes:
    body = bytearray()
    async for chunk in request.stream():
        body += chunk
        if len(body) > MAX_REQUEST_BYTES + _HEADER.size:
            raise RpcError("resource_exhausted", f"the request is over {MAX_REQUEST_BYTES} bytes")
    return bytes(body)


def _first_envelope(body: bytes) -> bytes:
    if len(body) < _HEADER.size:
        raise RpcError("invalid_argument", "the stream's request envelope is cut short")
    flags, length = _HEADER.unpack_from(body)
    if flags & _COMPRESSED:
        raise RpcError("invalid_argument", "compressed messages are not accepted; send identity")
    if len(body) < _HEADER.size + length:
        raise RpcError("invalid_argument", "the stream's request envelope is cut short")
    return body[_HEADER.size : _HEADER.size + length]


async def read_envelopes(request: Request) -> AsyncIterator[dict[str, Any]]:
    """A client stream's messages, each as its envelope arrives whole (each within
    ``MAX_REQUEST_BYTES``); ``RpcError`` for one that does not read."""
    pending = bytearray()
    chunks = aiter(request.stream())
    try:
        while True:
            try:
                chunk = await asyncio.wait_for(anext(chunks), STREAM_IDLE_S)
            except StopAsyncIteration:
                break
            except TimeoutError:
                raise RpcError(
                    "deadline_exceeded", "the stream sent nothing for too long"
                ) from None
            pending += chunk
            while len(pending) >= _HEADER.size:
                flags, length = _HEADER.unpack_from(pending)
                if length > MAX_REQUEST_BYTES:
                    raise RpcError("resource_exhausted", f"a message is over {MAX_REQUEST_BYTES}")
                if len(pending) < _HEADER.size + length:
                    break
                body = bytes(pending[_HEADER.size : _HEADER.size + length])
                del pending[: _HEADER.size + length]
                if flags & _END_OF_STREAM:
                    return
                yield _message(_first_envelope(_HEADER.pack(flags, length) + body))
    except ClientDisconnect:
        return
    if pending:
        raise RpcError("invalid_argument", "the stream's last envelope is cut short")


def _message(body: bytes) -> dict[str, Any]:
    try:
        message = jsonwire.loads(body) if body.strip() else {}
    except (ValueError, UnicodeDecodeError, RecursionError) as exc:
        raise RpcError("invalid_argument", f"the request is not JSON: {exc}") from None
    if not isinstance(message, dict):
        raise RpcError("invalid_argument", "the request must be a JSON object")
    return message


def whole_number(value: Any) -> int | None:
    """``value`` as the non-negative integer proto3 JSON may send it as (a number, or ASCII
    digits for an int64: never ``²``, never 5,000 digits); None for anything else."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value if 0 <= value < 1 << 63 else None
    if isinstance(value, str) and _DIGITS.fullmatch(value):
        return int(value)
    return None


_DIGITS = re.compile(r"[0-9]{1,18}")


def frame(message: dict[str, Any]) -> bytes:
    """One message of a server stream."""
    payload = jsonwire.dumps(message).encode()
    return _HEADER.pack(0, len(payload)) + payload


def end_of_stream(error: RpcError | None = None) -> bytes:
    """The stream's last envelope: ``{}``, or the error that ended it."""
    payload = jsonwire.dumps({"error": error.wire()} if error else {}).encode()
    return _HEADER.pack(_END_OF_STREAM, len(payload)) + payload


def unary_response(message: dict[str, Any]) -> Response:
    return Response(jsonwire.dumps(message), 200, media_type="application/json")


def error_response(error: RpcError) -> Response:
    """A unary call's error (or a stream's, before it began): the code's status, its JSON."""
    status = STATUS_OF_CODE.get(error.code, 500)
    return Response(jsonwire.dumps(error.wire()), status, media_type="application/json")
