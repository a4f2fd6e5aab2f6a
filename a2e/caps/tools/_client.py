"""``ToolAPI``: the tools capability over an ``A2EClient``, exactly as the spec's client section.

``call`` returns a ``ToolResult`` in every case: a host ``error`` message, a reply that never
came, or a closed connection all become ``success=False`` results with an ``error_code``, so an
agent loop has one shape to handle.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any

from a2e._client import REPLY_TIMEOUT_S, A2EClient, PendingReply
from a2e._messages import A2EError, ErrorCode
from a2e._transport import TransportClosed
from a2e.caps.tools._models import (
    DEFAULT_TIMEOUT_S,
    FailureReason,
    ToolCallRequest,
    ToolCallResponse,
    ToolCancelRequest,
    ToolDefinition,
    ToolErrorCode,
    ToolEvent,
    ToolListRequest,
    ToolListResponse,
    ToolResult,
)

__all__ = [
    "REPLY_GRACE_S",
    "PendingCall",
    "ToolAPI",
    "call_request",
    "list_request",
    "listed_tools",
    "to_result",
]

#: How long past the call's own timeout the client waits for the host's reply before giving up.
REPLY_GRACE_S = 10.0


class PendingCall:
    """A call in flight: wait for its ``ToolResult`` or cancel it."""

    def __init__(self, api: ToolAPI, request: ToolCallRequest, pending: PendingReply) -> None:
        self._api = api
        self.request = request
        self._pending = pending
        self._started = time.monotonic()
        self._result: ToolResult | None = None

    @property
    def req_id(self) -> str:
        return self.request.id

    def cancel(self) -> None:
        """Ask the host to end the call; its result will say it was cancelled."""
        self._api.cancel(self.request.id)

    def result(self, timeout: float | None = None) -> ToolResult:
        """The call's result. With no ``timeout``, waits the call's own timeout plus a grace and
        then gives up (cancelling the call); with one, raises ``TimeoutError`` if the call is
        still running after it, and the call goes on."""
        if self._result is not None:
            return self._result
        wait = self.request.timeout + REPLY_GRACE_S if timeout is None else timeout
        reply = self._pending.wait(wait)
        if reply is None and not self._pending.done:
            if timeout is not None:
                raise TimeoutError(f"call {self.req_id} still running after {timeout} s")
            self.cancel()
            self._api.client._forget(self.req_id)
        self._result = self._to_result(reply)
        return self._result

    def _to_result(self, reply: object) -> ToolResult:
        return to_result(
            self.request,
            reply,
            self._pending.events,
            self._started,
            closed=self._pending.closed_reason if self._pending.done else None,
        )


def call_request(
    session_id: str,
    tool_name: str,
    arguments: dict[str, Any],
    streaming: bool,
    timeout: float,
    correlation_id: str | None,
) -> ToolCallRequest:
    """A call as both clients send it: ``timeout`` in seconds, a fraction rounded up as the
    protocol's field is; one that is not a positive number is a ``ValueError``."""
    return ToolCallRequest(
        session_id=session_id,
        tool_name=tool_name,
        arguments=arguments,
        correlation_id=correlation_id or "",
        streaming=streaming,
        timeout=timeout,  # type: ignore[arg-type]  # a float, rounded up by the model
    )


def list_request(
    query: str, include_deferred: bool, tags: Sequence[str] | None, kind: str
) -> ToolListRequest:
    return ToolListRequest(
        query=query,
        include_deferred=include_deferred,
        filter_tags=list(tags or ()),
        filter_kind=kind,
    )


def listed_tools(reply: object) -> list[ToolDefinition]:
    """The tools a ``tool/list`` reply names; a refusal, or no reply in time, raised."""
    if isinstance(reply, A2EError):
        raise RuntimeError(f"tool/list refused: {reply.code}: {reply.message}")
    if not isinstance(reply, ToolListResponse):
        raise TimeoutError(f"no tool/list reply from the host within {REPLY_TIMEOUT_S:g} s")
    return list(reply.tools)


def to_result(
    request: ToolCallRequest,
    reply: object,
    events: list[ToolEvent],
    started: float,
    closed: str | None,
) -> ToolResult:
    """What a call's reply means, as a ``ToolResult`` in every case. ``reply`` is ``None`` when
    none came: then ``closed`` is why the connection ended, or ``None`` if time ran out."""

    def failure(error: str, code: str, reason: FailureReason) -> ToolResult:
        return ToolResult(
            success=False,
            tool_name=request.tool_name,
            error=error,
            error_code=code,
            reason=reason,
            duration_ms=int((time.monotonic() - started) * 1000),
            events=list(events),
        )

    if isinstance(reply, ToolCallResponse):
        result = reply.data
        if not result.events and events:
            result = result.model_copy(update={"events": list(events)})
        return result
    if isinstance(reply, A2EError):
        overloaded = reply.code == ErrorCode.OVERLOADED
        why = FailureReason.OVERLOADED if overloaded else FailureReason.PROTOCOL_ERROR
        return failure(f"{reply.code}: {reply.message}", reply.code, why)
    if reply is None and closed is not None:
        return failure(
            closed or "connection closed", ToolErrorCode.TOOL_ERROR, FailureReason.CONNECTION_LOST
        )
    if reply is None:
        return failure(
            f"no reply from the host within {request.timeout + REPLY_GRACE_S:.0f} s",
            ToolErrorCode.TOOL_ERROR,
            FailureReason.TIMEOUT,
        )
    return failure(
        f"unexpected reply {type(reply).__name__}",
        ToolErrorCode.TOOL_ERROR,
        FailureReason.PROTOCOL_ERROR,
    )


class ToolAPI:
    """List, search and call tools on the session of ``client``."""

    def __init__(self, client: A2EClient) -> None:
        self.client = client

    def list(
        self,
        query: str = "",
        include_deferred: bool = False,
        tags: Sequence[str] | None = None,
        kind: str = "",
        refresh: bool = False,
    ) -> list[ToolDefinition]:
        """Active tools (empty query) or search results; cached per arguments on the client."""
        key = (query, include_deferred, tuple(tags or ()), kind)
        cache: dict[Any, list[ToolDefinition]] = self.client._tools_cache
        if not refresh and key in cache:
            return list(cache[key])
        request = list_request(query, include_deferred, tags, kind)
        tools = listed_tools(self.client.request(request, timeout=REPLY_TIMEOUT_S))
        cache[key] = tools
        return list(tools)

    def start(
        self,
        tool_name: str,
        arguments: dict[str, Any],
        streaming: bool = False,
        on_event: Callable[[ToolEvent], None] | None = None,
        timeout: float = DEFAULT_TIMEOUT_S,
        correlation_id: str | None = None,
    ) -> PendingCall:
        """Send a call and return at once; ``.result()`` waits, ``.cancel()`` ends it
        (``timeout``: as ``call_request`` takes it)."""
        request = call_request(
            self.client.session_id, tool_name, arguments, streaming, timeout, correlation_id
        )
        pending = self.client.start(request, on_event=on_event)
        return PendingCall(self, request, pending)

    def call(
        self,
        tool_name: str,
        arguments: dict[str, Any],
        streaming: bool = False,
        on_event: Callable[[ToolEvent], None] | None = None,
        timeout: float = DEFAULT_TIMEOUT_S,
        correlation_id: str | None = None,
    ) -> ToolResult:
        """Run a tool and wait for its result (always a ``ToolResult``, never an exception)."""
        return self.start(
            tool_name, arguments, streaming, on_event, timeout, correlation_id
        ).result()

    def cancel(self, req_id: str) -> None:
        try:
            self.client.send(ToolCancelRequest(session_id=self.client.session_id, req_id=req_id))
        except TransportClosed:
            pass
