"""Reading a request the way a service must: a body within its size and its time, JSON that
says which field is wrong, and answers in one shape, ``{"error", "message"}``."""

from __future__ import annotations

import asyncio
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError
from starlette.requests import Request
from starlette.responses import JSONResponse

from a2e import jsonwire
from a2e.codec import describe_validation_error

__all__ = ["BadRequest", "error_response", "read_model", "until_disconnected"]

M = TypeVar("M", bound=BaseModel)


class BadRequest(Exception):
    def __init__(
        self, status: int, error: str, message: str, headers: dict[str, str] | None = None
    ) -> None:
        super().__init__(message)
        self.status = status
        self.error = error
        self.message = message
        self.headers = headers or {}

    def response(self) -> JSONResponse:
        return error_response(self.status, self.error, self.message, self.headers)


def error_response(
    status: int, error: str, message: str, headers: dict[str, str] | None = None
) -> JSONResponse:
    return JSONResponse({"error": error, "message": message}, status, headers=headers)


async def _read_body(request: Request, limit: int) -> bytes:
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > limit:
        raise BadRequest(413, "too_large", f"the body is over the limit of {limit} bytes")
    body = bytearray()
    async for chunk in request.stream():
        body += chunk
        if len(body) > limit:
            raise BadRequest(413, "too_large", f"the body is over the limit of {limit} bytes")
    return bytes(body)


async def read_model(request: Request, model: type[M], limit: int, timeout_s: float) -> M:
    """The body as ``model``: 413 past ``limit``, 408 if it takes longer than ``timeout_s``,
    400 naming the field for anything else."""
    try:
        body = await asyncio.wait_for(_read_body(request, limit), timeout_s)
    except TimeoutError:
        raise BadRequest(
            408, "timeout", f"the body did not arrive within {timeout_s:g} s"
        ) from None
    try:
        value: Any = jsonwire.loads(body) if body.strip() else {}
    except (ValueError, UnicodeDecodeError, RecursionError) as exc:
        raise BadRequest(400, "invalid_json", f"the body is not JSON: {exc}") from None
    if not isinstance(value, dict):
        raise BadRequest(400, "invalid_request", "the body must be a JSON object")
    try:
        return model.model_validate(value)
    except ValidationError as exc:
        raise BadRequest(400, "invalid_request", describe_validation_error(exc)) from None


async def until_disconnected(request: Request) -> None:
    """Returns when the client has gone (its body already read)."""
    while True:
        message = await request.receive()
        if message["type"] == "http.disconnect":
            return
