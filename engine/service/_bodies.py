"""Reading a request the way a service must: a body within its size and its time, JSON that
says which field is wrong, query parameters read by the rule their schema states, and answers
in one shape, ``ErrorBody`` (``{"error", "message"}``).

Models read with ``STRICT`` take what their JSON schema says and nothing looser (no
``"10"`` for a number, no ``false`` for an integer), so that ``/openapi.json``, built from the
same models, is the contract the handlers keep."""

from __future__ import annotations

import asyncio
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar, get_origin

from pydantic import BaseModel, ConfigDict, ValidationError
from starlette.datastructures import QueryParams
from starlette.requests import Request
from starlette.responses import JSONResponse

from a2e import _jsonwire as jsonwire
from a2e._codec import describe_validation_error
from a2e_engine.engine.service._body_budget import OFF_LOOP_BYTES, BodyBudget, charge_of

__all__ = [
    "STRICT",
    "BadRequest",
    "ErrorBody",
    "error_response",
    "read_model",
    "read_query",
    "until_disconnected",
]

M = TypeVar("M", bound=BaseModel)

#: The config of a model a request is read with: its JSON schema's types and nothing looser,
#: and no infinity (which JSON cannot say, but a number past a double's range parses to).
STRICT = ConfigDict(strict=True, allow_inf_nan=False)
#: How a boolean is written in a query (OpenAPI's ``form`` style).
QUERY_BOOLEANS = {"true": True, "false": False}


class ErrorBody(BaseModel):
    """Every answer that is not the endpoint's own result: what went wrong, as a word a program
    can test (``error``) and a sentence for a person (``message``)."""

    error: str
    message: str


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
    body = ErrorBody(error=error, message=message)
    return JSONResponse(body.model_dump(mode="json"), status, headers=headers)


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


async def read_model(
    request: Request,
    model: type[M],
    limit: int,
    timeout_s: float,
    budget: BodyBudget | None = None,
) -> M:
    """The body as ``model``: 413 past ``limit``, 408 if it takes longer than ``timeout_s``,
    400 naming the field for anything else. With the service's ``budget``, the body is charged
    what it may cost once read before it is parsed (413 past what a request may hold, 503 past
    what the requests in flight leave), and a long one is parsed off the loop's thread
    (``engine.service._body_budget``)."""
    try:
        body = await asyncio.wait_for(_read_body(request, limit), timeout_s)
    except TimeoutError:
        raise BadRequest(
            408, "timeout", f"the body did not arrive within {timeout_s:g} s"
        ) from None
    if budget is not None:
        charge = charge_of(body)
        why = budget.fits(charge)
        if why:
            budget.refused += 1
            if charge > budget.per_request:
                raise BadRequest(413, "too_large", why)
            raise BadRequest(503, "overloaded", why, {"Retry-After": "1"})
        budget.take(request.scope, charge)
        if len(body) > OFF_LOOP_BYTES:
            return await asyncio.get_running_loop().run_in_executor(_PARSER, _parsed, body, model)
    return _parsed(body, model)


#: One thread parses the long bodies, one at a time: off the loop's thread, and never many at
#: once (each holds the interpreter while the parser, written in C, runs).
_PARSER = ThreadPoolExecutor(1, thread_name_prefix="a2e-body")


def _parsed(body: bytes, model: type[M]) -> M:
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
    except RecursionError:
        raise BadRequest(400, "invalid_request", "the body is nested too deeply") from None


async def until_disconnected(request: Request) -> None:
    """Returns when the client has gone (its body already read)."""
    while True:
        message = await request.receive()
        if message["type"] == "http.disconnect":
            return


def read_query(params: QueryParams, model: type[M]) -> M:
    """The query as ``model``, each field read as its schema says it is sent: a list field from
    every value given, any other from one value at most, a boolean as ``true`` or ``false``.
    Parameters ``model`` does not name (``token``) are left alone. 400 naming the parameter."""
    values: dict[str, Any] = {}
    for name, field in model.model_fields.items():
        given = params.getlist(name)
        if not given:
            continue
        if get_origin(field.annotation) is list:
            values[name] = given
        elif len(given) > 1:
            raise BadRequest(
                400, "invalid_request", f"{name}: give it once, not {len(given)} times"
            )
        elif field.annotation is bool:
            values[name] = QUERY_BOOLEANS.get(given[0], given[0])
        else:
            values[name] = given[0]
    try:
        return model.model_validate(values)
    except ValidationError as exc:
        raise BadRequest(400, "invalid_request", describe_validation_error(exc)) from None
