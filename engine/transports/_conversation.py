"""``RemoteSession``: a ``HostSession`` (``engine._host``) made of a host connection, for a
session that lives at the other end of one (``open_wire_session``: a host's connection and a
handshake; ``cluster._node_session``: a session a node of the cluster opened).

It speaks the host protocol: a connection, a handshake (a session of its own, with a fresh
workspace) unless the session is open already, then requests, each call's events and its
answer, and at the end the connection is closed, which ends the session and cancels what still
runs. Several calls may be in flight at once: what the host sends is routed to the request it
answers, by ``req_id``. It runs on the host's loop, where ``send`` is called.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Iterator

from a2e._messages import A2EError, A2EMessage, ErrorCode, HandshakeRequest, HandshakeResponse
from a2e.caps.tools._models import (
    ToolCallRequest,
    ToolCallResponse,
    ToolCancelRequest,
    ToolEvent,
    ToolListRequest,
    ToolListResponse,
    ToolResult,
)
from a2e_engine.engine._host import Bursts, Host, HostClosed, HostConnection, Refused, Send
from a2e_engine.engine._policy import Policy
from a2e_engine.sandbox._call_input import CallInput

__all__ = ["RemoteSession", "open_wire_session"]


async def open_wire_session(host: Host, client: str, policy: Policy | None) -> RemoteSession:
    """A session over a new connection of ``host``; ``Refused`` if it cannot be had."""

    def connect(send: Send) -> HostConnection:
        try:
            return host.open_connection(send, policy=policy, name=client)
        except HostClosed as exc:
            raise Refused(
                A2EError(code=ErrorCode.OVERLOADED, message=str(exc), retryable=True)
            ) from None

    session = RemoteSession(connect, client)
    try:
        await session.open()
    except BaseException:
        session.close()
        raise
    return session


class RemoteSession:
    def __init__(
        self, connect: Callable[[Send], HostConnection], client: str, session_id: str = ""
    ) -> None:
        """``connect``: the connection, given where its replies go; ``session_id``: the
        session's, where it is open already (no handshake: ``open`` is not called)."""
        self._waiting: dict[str, asyncio.Queue[A2EMessage]] = {}
        self._client = client
        self.session_id = session_id
        self._connection = connect(self._arrive)

    def _arrive(self, message: A2EMessage) -> None:  # on the host's loop: ours
        waiting = self._waiting.get(getattr(message, "req_id", ""))
        if waiting is not None:
            waiting.put_nowait(message)
        # Anything else answers what nobody waits for (a cancel that came too late): dropped.

    async def _ask(self, message: A2EMessage) -> A2EMessage:
        with self._routed(message.id) as replies:
            self._connection.receive(message)
            while True:
                reply = await replies.get()
                if type(reply) is not ToolEvent:
                    return reply

    @contextlib.contextmanager
    def _routed(self, req_id: str) -> Iterator[asyncio.Queue[A2EMessage]]:
        replies: asyncio.Queue[A2EMessage] = asyncio.Queue()
        self._waiting[req_id] = replies
        try:
            yield replies
        finally:
            del self._waiting[req_id]

    async def open(self) -> None:
        reply = await self._ask(HandshakeRequest(client=self._client, capabilities=["tools"]))
        if isinstance(reply, A2EError):
            raise Refused(reply)
        assert isinstance(reply, HandshakeResponse)
        self.session_id = reply.session_id

    async def list_tools(self, request: ToolListRequest) -> ToolListResponse:
        reply = await self._ask(request)
        if isinstance(reply, A2EError):
            raise Refused(reply)
        assert isinstance(reply, ToolListResponse)
        return reply

    async def call(self, request: ToolCallRequest, given: CallInput | None = None) -> Bursts:
        """The call's events in the bursts they arrived in (a tool's burst at once, so that a
        transport can write each with one write), the last ending with its result. Input
        after the start (``given``) is not carried over a connection: ``Refused``."""
        if given is not None:
            raise Refused(
                A2EError(
                    req_id=request.id,
                    code=ErrorCode.INVALID_MESSAGE,
                    message="input after a call's start is not carried over this connection",
                )
            )
        request = request.model_copy(update={"session_id": self.session_id})
        answered = False
        try:
            with self._routed(request.id) as replies:
                self._connection.receive(request)
                while True:
                    batch: list[ToolEvent | ToolResult] = []
                    message: A2EMessage | None = await replies.get()
                    while message is not None:
                        if isinstance(message, A2EError):
                            answered = True
                            raise Refused(message)
                        if isinstance(message, ToolCallResponse):
                            answered = True
                            batch.append(message.data)
                            yield batch
                            return
                        if isinstance(message, ToolEvent):
                            batch.append(message)
                        message = replies.get_nowait() if not replies.empty() else None
                    if batch:
                        yield batch
        finally:
            if not answered:
                self.cancel(request.id)

    def cancel(self, call_id: str) -> bool:
        """End the call ``call_id`` as its timeout would: its worker is killed, and its answer
        (a cancelled result) still comes to whoever waits for it."""
        with contextlib.suppress(HostClosed):
            self._connection.receive(ToolCancelRequest(session_id=self.session_id, req_id=call_id))
        return True

    def close(self) -> None:
        """End the connection: calls still running are cancelled, the session ends."""
        with contextlib.suppress(HostClosed):
            self._connection.close()
