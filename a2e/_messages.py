"""Connection-level wire messages shared by every A2E capability.

The tools spec names a handshake and ``A2EError`` without spelling them out; the wire form here
is the one the project settled on (see docs/protocol.md). Every message carries ``type``,
``id``, ``version`` and ``ts``; models ignore unknown fields so that newer peers can add fields
without breaking us.
"""

from __future__ import annotations

import itertools
import os
import time
from enum import StrEnum
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from a2e._capability import A2ECapability

__all__ = [
    "PROTOCOL_VERSION",
    "A2ECapability",
    "A2EError",
    "A2EEvent",
    "A2EMessage",
    "ErrorCode",
    "HandshakeRequest",
    "HandshakeResponse",
]

PROTOCOL_VERSION = "1.0"


def _fresh_prefix() -> None:
    global _PREFIX, _COUNTER
    _PREFIX = os.urandom(8).hex()
    _COUNTER = itertools.count(1)


_PREFIX = ""
_COUNTER = itertools.count(1)
_fresh_prefix()
os.register_at_fork(after_in_child=_fresh_prefix)  # a forked process must not repeat our ids


def new_id() -> str:
    """A message UUID (the spec's "auto UUID"), unique across processes: 60 random bits drawn
    once per process and a counter, laid out as an RFC 9562 version-8 UUID.

    Every message, event included, gets one, so it is on the per-event path: this costs a
    fraction of a ``uuid4``, which reads the kernel's random pool each time. Ids correlate
    requests and replies; nothing relies on them being unguessable (session ids are, and are
    made apart).
    """
    digits = f"{_PREFIX}{next(_COUNTER):016x}"
    return f"{digits[:8]}-{digits[8:12]}-8{digits[13:16]}-a{digits[17:20]}-{digits[20:]}"


class ErrorCode(StrEnum):
    """Codes of protocol-level ``error`` messages (not tool results).

    Tool outcomes use ``ToolErrorCode`` inside a ``ToolResult``; these codes say that the message
    itself could not be handled.
    """

    INVALID_JSON = "invalid_json"
    INVALID_MESSAGE = "invalid_message"
    UNKNOWN_TYPE = "unknown_type"
    MESSAGE_TOO_LARGE = "message_too_large"
    HANDSHAKE_REQUIRED = "handshake_required"
    UNAUTHORIZED = "unauthorized"
    UNKNOWN_SESSION = "unknown_session"
    UNKNOWN_REQUEST = "unknown_request"
    DUPLICATE_REQUEST = "duplicate_request"
    CAPABILITY_NOT_GRANTED = "capability_not_granted"
    OVERLOADED = "overloaded"
    INTERNAL = "internal_error"


class A2EMessage(BaseModel):
    """Fields every message has. ``type`` is the discriminator of the wire union."""

    model_config = ConfigDict(extra="ignore", populate_by_name=True)

    type: str
    id: str = Field(default_factory=new_id)
    version: str = PROTOCOL_VERSION
    ts: float = Field(default_factory=time.time)


class A2EEvent(A2EMessage):
    """Base of streaming events: ``kind`` says how to read ``data``; ``seq`` orders them."""

    kind: str
    req_id: str = ""
    data: dict[str, Any] = Field(default_factory=dict)
    seq: int = 0


class HandshakeRequest(A2EMessage):
    type: Literal["handshake/req"] = "handshake/req"
    client: str = ""
    capabilities: list[str] = Field(default_factory=list)
    token: str | None = None


class HandshakeResponse(A2EMessage):
    type: Literal["handshake/resp"] = "handshake/resp"
    req_id: str = ""
    session_id: str
    capabilities: list[str] = Field(default_factory=list)
    server: str = ""


class A2EError(A2EMessage):
    """Protocol-level failure: the message named by ``req_id`` could not be handled."""

    type: Literal["error"] = "error"
    req_id: str = ""
    code: str
    message: str
    retryable: bool = False
