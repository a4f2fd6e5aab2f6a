"""``Connection``: the engine's side of one connection, whatever carries it (``engine._host``).

Everything protocol-level happens here: the handshake and its sessions, list and search, calls
(each its own task, so many run at once and replies go out as each finishes), cancellation, and
``error`` replies that name the problem. Nothing a peer sends can raise out of ``receive``.

A handshake's session is opened as every session is (``Sessions.open``: its directories
and its quota's mount made off the loop, which other connections' calls share), and what the
peer sends meanwhile waits its turn, in order, behind it.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import hmac
import logging
from collections.abc import Callable

from a2e._codec import ProtocolError
from a2e._messages import (
    A2EError,
    A2EMessage,
    ErrorCode,
    HandshakeRequest,
    HandshakeResponse,
)
from a2e.caps.tools._models import (
    FailureReason,
    ToolCallRequest,
    ToolCallResponse,
    ToolCancelRequest,
    ToolErrorCode,
    ToolEvent,
    ToolListRequest,
    ToolResult,
)
from a2e_engine.engine._host import HostClosed, Refused, Send
from a2e_engine.engine._host_session import (
    SUPPORTED_CAPABILITIES,
    CallScope,
    LocalSession,
    Services,
    response_to,
)
from a2e_engine.engine._identities import UidsExhausted
from a2e_engine.engine._memory_bound import OverBound
from a2e_engine.engine._policy import Policy

__all__ = ["Connection"]

log = logging.getLogger("a2e.host")

#: Messages kept, in order, while a handshake's session is being opened; past it, refused.
MAX_BEHIND = 1024


class Connection:
    """Implements ``engine._host.HostConnection``; the ``_`` methods run on the engine's loop."""

    def __init__(
        self,
        services: Services,
        send: Send,
        policy: Policy | None = None,
        name: str = "",
        on_closed: Callable[[Connection], None] | None = None,
        tenant: str = "",
    ) -> None:
        self.services = services
        self.tenant = tenant
        self.config = services.calls.config
        self._send = send
        self.policy = policy
        self.name = name
        self._on_closed = on_closed
        self.sessions: dict[str, LocalSession] = {}
        #: Request ids are the connection's, whichever of its sessions a call is in.
        self._call_ids = CallScope("connection")
        self.closed = False
        #: A handshake whose session is being opened, and what came after it meanwhile.
        self._opening: asyncio.Task[None] | None = None
        self._behind: list[A2EMessage | ProtocolError] = []

    # -- the host protocol: from any thread --

    def receive(self, message: A2EMessage | ProtocolError) -> None:
        self._on_loop(self._receive, message)

    def finish(self) -> concurrent.futures.Future[None]:
        try:
            loop = self.services.loop.loop
            return asyncio.run_coroutine_threadsafe(self._finish(), loop)
        except RuntimeError as exc:
            raise HostClosed(str(exc)) from None

    def close(self) -> None:
        self._on_loop(self._close)

    def _on_loop(self, fn: Callable[..., None], *args: object) -> None:
        if self.services.loop.in_thread():
            fn(*args)
            return
        try:
            self.services.loop.call_soon(fn, *args)
        except RuntimeError as exc:  # the engine stopped
            raise HostClosed(str(exc)) from None

    def in_flight(self) -> list[asyncio.Task[ToolResult]]:
        return [task for session in self.sessions.values() for task in session.in_flight()]

    def _running(self, call_id: str) -> LocalSession | None:
        """The session of this connection where ``call_id`` runs: request ids are the
        connection's, whichever of its sessions a call is in."""
        return next((s for s in self.sessions.values() if s.running(call_id)), None)

    # -- plumbing --

    def send(self, message: A2EMessage) -> None:
        """Hand a message to the transport. One message that cannot be serialised (a tool's
        result nested deeper than JSON encoders go, say) fails that reply, never the connection."""
        if self.closed:
            return
        try:
            self._send(message)
        except Exception as exc:
            log.warning("connection %s: cannot send %s: %s", self.name, message.type, exc)
            self._send_fallback(message, f"{type(exc).__name__}: {exc}")

    def _send_fallback(self, message: A2EMessage, why: str) -> None:
        if isinstance(message, ToolEvent):
            return  # the event is lost; the result will still come
        if isinstance(message, ToolCallResponse):
            result = message.data
            replacement: A2EMessage = ToolCallResponse(
                req_id=message.req_id,
                data=ToolResult(
                    success=False,
                    tool_name=result.tool_name,
                    error_code=ToolErrorCode.TOOL_ERROR,
                    # A result our wires cannot carry (nested past what encoders go to).
                    reason=FailureReason.OUTPUT_LIMIT,
                    error=f"the tool's result could not be sent ({why})",
                    duration_ms=result.duration_ms,
                    exit_code=result.exit_code,
                    usage=result.usage,
                ),
            )
        else:
            replacement = A2EError(
                req_id=getattr(message, "req_id", ""),
                code=ErrorCode.INTERNAL,
                message=f"a {message.type} reply could not be sent ({why})",
            )
        try:
            self._send(replacement)
        except Exception:
            log.exception("connection %s: even the fallback reply failed", self.name)

    def error(
        self, req_id: str, code: ErrorCode | str, message: str, retryable: bool = False
    ) -> None:
        self.send(A2EError(req_id=req_id, code=code, message=message, retryable=retryable))

    def _receive(self, message: A2EMessage | ProtocolError) -> None:
        """On the engine's loop; never raises."""
        if self.closed:
            return
        if self._opening is not None:
            if len(self._behind) < MAX_BEHIND:
                self._behind.append(message)
            elif not isinstance(message, ProtocolError):
                self.error(
                    getattr(message, "id", ""),
                    ErrorCode.OVERLOADED,
                    f"more than {MAX_BEHIND} messages came before the handshake was answered",
                    retryable=True,
                )
            return
        try:
            if isinstance(message, ProtocolError):
                self.send(message.to_message())
            elif isinstance(message, HandshakeRequest):
                self._handshake(message)
            elif isinstance(message, ToolListRequest):
                self._list(message)
            elif isinstance(message, ToolCallRequest):
                self._call(message)
            elif isinstance(message, ToolCancelRequest):
                self._cancel(message)
            else:
                self.error(
                    message.id,
                    ErrorCode.INVALID_MESSAGE,
                    f"{message.type} is sent by hosts, not to them",
                )
        except Exception as exc:
            log.exception("connection %s: handling %s failed", self.name, type(message).__name__)
            req_id = getattr(message, "id", "") if not isinstance(message, ProtocolError) else ""
            self.error(req_id, ErrorCode.INTERNAL, f"internal error: {type(exc).__name__}: {exc}")

    async def _finish(self) -> None:
        while self._opening is not None:  # its session, and what waited behind it
            await asyncio.wait([self._opening])
        calls = self.in_flight()
        if calls:
            await asyncio.wait(calls)
        self._close()

    def _close(self) -> None:
        """End every call and session of this connection (idempotent)."""
        if self.closed:
            return
        self.closed = True
        for session in self.sessions.values():
            session.close()  # its calls cancelled, the session ended after them
        self.sessions.clear()
        if self._on_closed is not None:
            self._on_closed(self)

    # -- handlers --

    def _handshake(self, request: HandshakeRequest) -> None:
        expected = self.config.token
        if expected is not None and not hmac.compare_digest(
            (request.token or "").encode(), expected.encode()
        ):
            self.error(request.id, ErrorCode.UNAUTHORIZED, "handshake token missing or wrong")
            return
        limit = self.config.admission.max_sessions_per_connection
        if len(self.sessions) >= limit:  # handshakes are taken one at a time: all are here
            self.error(
                request.id,
                ErrorCode.OVERLOADED,
                f"this connection already has {limit} sessions; open another connection",
            )
            return
        granted = [c for c in dict.fromkeys(request.capabilities) if c in SUPPORTED_CAPABILITIES]
        policies: list[Policy] = [self.services.policy]
        if self.policy is not None:
            policies.append(self.policy)
        self._opening = asyncio.get_running_loop().create_task(
            self._open(request, granted, policies)
        )

    async def _open(
        self, request: HandshakeRequest, granted: list[str], policies: list[Policy]
    ) -> None:
        """The handshake's session, then what waited behind it."""
        try:
            opened = await self.services.sessions.open(
                request.client, frozenset(granted), policies, self.tenant
            )
        except (UidsExhausted, OverBound, OSError) as exc:
            self.error(request.id, ErrorCode.OVERLOADED, f"cannot open a session: {exc}")
        except Exception as exc:  # the engine's own bug: logged, and still answered
            log.exception("connection %s: opening a session failed", self.name)
            self.error(request.id, ErrorCode.INTERNAL, f"internal error: {type(exc).__name__}")
        else:
            session = LocalSession(self.services, opened, scope=self._call_ids)
            if self.closed:  # the connection ended while its session was being made
                session.close()
            else:
                self.sessions[opened.id] = session
                self.send(
                    HandshakeResponse(
                        req_id=request.id,
                        session_id=session.session_id,
                        capabilities=granted,
                        server=self.config.server_name,
                    )
                )
        finally:
            self._opening = None
            self._take_up_behind()

    def _take_up_behind(self) -> None:
        """What came while a handshake's session was being opened, in order, until another
        handshake begins (what follows it waits again)."""
        while self._behind and self._opening is None and not self.closed:
            self._receive(self._behind.pop(0))
        if self.closed:
            self._behind.clear()

    def _session_for(self, req_id: str, session_id: str) -> LocalSession | None:
        if session_id:
            session = self.sessions.get(session_id)
            if session is None:
                self.error(
                    req_id,
                    ErrorCode.UNKNOWN_SESSION,
                    f"no session {session_id!r} on this connection; send handshake/req first",
                )
            return session
        if not self.sessions:
            self.error(
                req_id,
                ErrorCode.HANDSHAKE_REQUIRED,
                "no session yet: send handshake/req before other messages",
            )
            return None
        return list(self.sessions.values())[-1]

    def _list(self, request: ToolListRequest) -> None:
        session = self._session_for(request.id, "")
        if session is None:
            return
        try:
            self.send(session.tools(request))
        except Refused as exc:
            self.send(exc.error)

    def _call(self, request: ToolCallRequest) -> None:
        session = self._session_for(request.id, request.session_id)
        if session is None:
            return
        try:
            task = session.start(request, self.send)
        except Refused as exc:
            self.send(exc.error)
            return
        task.add_done_callback(lambda done: self._answer(request, done))

    def _answer(self, request: ToolCallRequest, task: asyncio.Task[ToolResult]) -> None:
        """The call's response, after every event it sent."""
        self.send(response_to(request, task))

    def _cancel(self, request: ToolCancelRequest) -> None:
        session = self._running(request.req_id)
        if session is None or (request.session_id and session.session_id != request.session_id):
            self.error(
                request.id,
                ErrorCode.UNKNOWN_REQUEST,
                f"no call {request.req_id!r} in flight on this connection",
            )
            return
        session.cancel(request.req_id)
