"""Turning wire text into typed messages and back, with errors a peer can act on.

A bad line never raises past ``decode``'s caller unexplained: ``ProtocolError`` carries the
``error`` code, a message that names the problem (the field and what was wrong with it) and, when
the line was readable enough, the ``id`` of the request so the reply can be matched.
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import Field, TypeAdapter, ValidationError
from pydantic_core import PydanticSerializationError

from a2e import _jsonwire as jsonwire
from a2e._messages import A2EError, A2EMessage, ErrorCode, HandshakeRequest, HandshakeResponse
from a2e.caps.tools._models import (
    ToolCallRequest,
    ToolCallResponse,
    ToolCancelRequest,
    ToolEvent,
    ToolListRequest,
    ToolListResponse,
)

__all__ = [
    "MAX_MESSAGE_BYTES",
    "Message",
    "ProtocolError",
    "check_size",
    "decode",
    "encode",
    "from_dict",
]

MAX_MESSAGE_BYTES = 16 * 1024 * 1024

Message = Annotated[
    HandshakeRequest
    | HandshakeResponse
    | A2EError
    | ToolListRequest
    | ToolListResponse
    | ToolCallRequest
    | ToolCallResponse
    | ToolEvent
    | ToolCancelRequest,
    Field(discriminator="type"),
]

_ADAPTER: TypeAdapter[Message] = TypeAdapter(Message)
MESSAGE_TYPES: frozenset[str] = frozenset(
    model.model_fields["type"].default
    for model in (
        HandshakeRequest,
        HandshakeResponse,
        A2EError,
        ToolListRequest,
        ToolListResponse,
        ToolCallRequest,
        ToolCallResponse,
        ToolEvent,
        ToolCancelRequest,
    )
)


class ProtocolError(Exception):
    """A message that cannot be handled; becomes an ``error`` reply."""

    def __init__(self, code: ErrorCode, message: str, req_id: str = "") -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.req_id = req_id

    def to_message(self) -> A2EError:
        return A2EError(req_id=self.req_id, code=self.code, message=self.message)


def describe_validation_error(exc: ValidationError, skip_prefix: str = "") -> str:
    """One clause per problem, each naming the field path: ``arguments: Input should be ...``."""
    parts = []
    for err in exc.errors()[:5]:
        loc = [str(p) for p in err["loc"]]
        if loc and loc[0] == skip_prefix:
            loc = loc[1:]  # a discriminated union puts the discriminator value first
        parts.append(f"{'.'.join(loc) or '(message)'}: {err['msg']}")
    more = len(exc.errors()) - 5
    if more > 0:
        parts.append(f"... and {more} more")
    return "; ".join(parts)


def from_dict(obj: Any) -> A2EMessage:
    """Validate an already-decoded JSON value as a message."""
    if not isinstance(obj, dict):
        raise ProtocolError(
            ErrorCode.INVALID_MESSAGE, f"a message must be a JSON object, not {type(obj).__name__}"
        )
    raw_id = obj.get("id")
    req_id = raw_id if isinstance(raw_id, str) else ""
    msg_type = obj.get("type")
    if not isinstance(msg_type, str):
        raise ProtocolError(ErrorCode.INVALID_MESSAGE, "missing or non-string field 'type'", req_id)
    if msg_type not in MESSAGE_TYPES:
        raise ProtocolError(
            ErrorCode.UNKNOWN_TYPE,
            f"unknown message type {msg_type!r}; known: {', '.join(sorted(MESSAGE_TYPES))}",
            req_id,
        )
    try:
        message: A2EMessage = _ADAPTER.validate_python(obj)
    except ValidationError as exc:
        detail = describe_validation_error(exc, skip_prefix=msg_type)
        raise ProtocolError(
            ErrorCode.INVALID_MESSAGE, f"invalid {msg_type}: {detail}", req_id
        ) from None
    return message


def check_size(line: str | bytes, req_id: str = "") -> None:
    """``ProtocolError`` (``message_too_large``) for a line past ``MAX_MESSAGE_BYTES``; a sender
    that relays lines checks before sending, so that the refusal can name the request."""
    if len(line) > MAX_MESSAGE_BYTES:
        raise ProtocolError(
            ErrorCode.MESSAGE_TOO_LARGE,
            f"message of {len(line)} bytes exceeds the limit of {MAX_MESSAGE_BYTES} bytes",
            req_id,
        )


def decode(line: str | bytes) -> A2EMessage:
    """Parse one wire line (JSON text) into its message model."""
    check_size(line)
    try:
        obj = jsonwire.loads(line)
    except (ValueError, UnicodeDecodeError) as exc:
        raise ProtocolError(ErrorCode.INVALID_JSON, f"not valid JSON: {exc}") from None
    except RecursionError:
        raise ProtocolError(ErrorCode.INVALID_JSON, "not valid JSON: nested too deeply") from None
    return from_dict(obj)


def to_dict(message: A2EMessage) -> dict[str, Any]:
    if isinstance(message, ToolCallResponse):
        data = message.model_dump(mode="json", exclude={"data"})
        data["data"] = message.data.model_dump_wire()
        return data
    return message.model_dump(mode="json")


def encode(message: A2EMessage) -> str:
    """One line of compact JSON, no newline inside (JSON escapes them); raises ValueError for
    values JSON cannot carry (NaN, infinities) and RecursionError for absurd nesting."""
    if type(message) is ToolEvent:
        # The per-event path: pydantic-core's serializer at a third of the cost (UTF-8 text).
        # An event's data holds no float (its kind's model says so) and ``ts`` is the clock.
        # UTF-8 cannot carry a lone surrogate a tool printed: the ASCII escapes below can.
        try:
            return message.model_dump_json()
        except PydanticSerializationError:
            pass
    # ASCII escapes keep any string (even a lone surrogate a tool produced) encodable.
    return jsonwire.dumps(to_dict(message))
