"""E2B's error shape, which every part of its SDK reads and no other: a status and the JSON
``{"code": <status>, "message"}`` (a body of another shape crashes the SDK's parser); and a
request's body read as a model, whatever goes wrong one such error, one line.

Connect RPC's own errors (``{"code": "<connect code>"}``) are ``_connect_rpc``'s; the
service's refusals before any handler are ``engine.service._auth.refuse``'s.
"""

from __future__ import annotations

from typing import TypeVar

from pydantic import BaseModel, ValidationError
from starlette.requests import ClientDisconnect, Request
from starlette.responses import Response

from a2e._codec import describe_validation_error
from a2e_engine.engine.service._bodies import BadRequest, read_model
from a2e_engine.engine.service._responses import json_response

__all__ = ["E2BError", "error_response", "read_body"]

#: How long a body may take to arrive.
BODY_TIMEOUT_S = 30.0

Body = TypeVar("Body", bound=BaseModel)


class E2BError(Exception):
    """A request answered with E2B's error shape."""

    def __init__(self, status: int, message: str, headers: dict[str, str] | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.headers = headers or {}

    def response(self) -> Response:
        return error_response(self.status, self.message, self.headers)


def error_response(status: int, message: str, headers: dict[str, str] | None = None) -> Response:
    return json_response({"code": status, "message": message}, status=status, headers=headers)


async def read_body(request: Request, model: type[Body], limit: int) -> Body:
    """The body as ``model`` (an empty one as its defaults), within ``limit`` bytes and
    ``BODY_TIMEOUT_S``; one that does not read is an ``E2BError`` of one line that names the
    field."""
    try:
        if not _has_body(request):
            return model.model_validate({})
        return await read_model(request, model, limit, BODY_TIMEOUT_S)
    except BadRequest as exc:
        raise E2BError(exc.status, exc.message, exc.headers) from None
    except ClientDisconnect:  # nobody is there to read the answer
        raise E2BError(400, "the client went away before its body came") from None
    except ValidationError as exc:
        raise E2BError(400, describe_validation_error(exc)) from None


def _has_body(request: Request) -> bool:
    length = request.headers.get("content-length")
    return length != "0" and (length is not None or "transfer-encoding" in request.headers)
