"""``NodeSession``: a session that lives on one node of the cluster, as the host's front-ends
(REST, SandboxFusion's API, MCP, E2B's sandboxes) hold one (``engine._host.HostSession``).

The node opened it through Ray (``NodeEngine.open_session``, or ``fork`` for a copy) and serves
it on a connection of its own (``served``); its requests and replies travel on the driver's
channel to that node like any connection's, sent from the host's loop without waiting
(``queued``) and handed back to it. Everything about a call is ``RemoteSession``'s; what is
added here is where the session is (its node, whose short id names E2B sandboxes), and how it
ends without its holder: with its node, or when the node ends it (``served`` says so at once).
Its holder's clients are told that much and no more: which node, not Ray's account of why
(that goes to the log, ``RayEngine.report_lost``).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
from typing import Any

from a2e import _codec as codec
from a2e._messages import A2EError, A2EMessage, ErrorCode
from a2e.caps.tools._models import ToolCallRequest, ToolCancelRequest
from a2e_engine.engine._host import Send
from a2e_engine.engine.cluster._channel import ChannelBusy, ChannelLost
from a2e_engine.engine.cluster._links import NodeLink
from a2e_engine.engine.cluster._transport import failed_result
from a2e_engine.engine.transports._conversation import RemoteSession

__all__ = ["NodeSession"]


class NodeSession(RemoteSession):
    """Implements ``engine._host.HostSession``; its methods run on the host's loop."""

    def __init__(
        self,
        link: NodeLink,
        conn_id: str,
        opened: dict[str, Any],
        loop: asyncio.AbstractEventLoop,
    ) -> None:
        """``opened``: what the node said of the session (``NodeEngine.open_session``)."""
        self.link = link
        self.conn_id = conn_id
        self.workspace = str(opened.get("workspace", ""))
        self._closed = False
        self._ended_there = ""  # why its node ended it, once it did
        super().__init__(
            lambda send: _NodeConnection(self, send, loop), "cluster", str(opened["session_id"])
        )

    @property
    def node_tag(self) -> str:
        """Its node's tag: what names the node in the ids of E2B's sandboxes."""
        return self.link.tag

    @property
    def closed(self) -> bool:
        """Closed by its holder, ended by its node, or gone with it."""
        return self._closed or bool(self._ended_there) or bool(self.link.lost)

    @property
    def ended_because(self) -> str:
        if self.link.lost:
            return f"its node {self.link.tag} of the cluster was lost"
        return self._ended_there

    def ended_there(self, notice: A2EMessage) -> None:
        """Its node ended it (``served``); from the channel's reader thread."""
        if isinstance(notice, A2EError):
            self._ended_there = notice.message or "its node ended it"

    def mark_closed(self) -> bool:
        """Closed by its holder now; False if it was already."""
        was, self._closed = self._closed, True
        return not was


class _NodeConnection:
    """``engine._host.HostConnection`` over the node's channel, for one ``NodeSession``."""

    def __init__(self, session: NodeSession, send: Send, loop: asyncio.AbstractEventLoop) -> None:
        self._session = session
        self._send = send
        self._loop = loop
        if session.link.channel is not None:
            session.link.channel.watch(session.conn_id, session.ended_there)
        self._post("")  # bound to the channel now: its first call may come much later

    def receive(self, message: A2EMessage | codec.ProtocolError) -> None:
        if isinstance(message, codec.ProtocolError):
            self._reply(message.to_message())
            return
        line = codec.encode(message)
        try:
            codec.check_size(line, message.id)
        except codec.ProtocolError as exc:
            self._reply(exc.to_message())
            return
        if isinstance(message, ToolCancelRequest):
            self._post(line)
            return
        session, channel = self._session, self._session.link.channel
        if channel is None:
            self._reply(_lost_reply(message, session))
            return
        try:
            channel.request(
                session.conn_id,
                message.id,
                line,
                self._hand_back,
                lambda _why: self._hand_back(_lost_reply(message, session)),
                queued=True,
            )
        except ChannelBusy as exc:
            self._reply(
                A2EError(
                    req_id=message.id, code=ErrorCode.OVERLOADED, message=str(exc), retryable=True
                )
            )

    def finish(self) -> concurrent.futures.Future[None]:
        """Nothing waits to be finished here: the session's holder waits for its calls."""
        self.close()
        done: concurrent.futures.Future[None] = concurrent.futures.Future()
        done.set_result(None)
        return done

    def close(self) -> None:
        session = self._session
        if not session.mark_closed():
            return
        if session.link.channel is not None:
            session.link.channel.unwatch(session.conn_id)
        with contextlib.suppress(Exception):  # its actor is gone: so is the session
            session.link.actor.close.remote(session.conn_id)

    def _post(self, line: str) -> None:
        channel = self._session.link.channel
        if channel is not None:
            with contextlib.suppress(ChannelLost, ChannelBusy):  # a cancel: its call fails too
                channel.post(self._session.conn_id, line, queued=True)

    def _hand_back(self, reply: A2EMessage) -> None:
        """From the channel's reader thread to the host's loop."""
        with contextlib.suppress(RuntimeError):  # the loop stopped: nobody waits
            self._loop.call_soon_threadsafe(self._send, reply)

    def _reply(self, reply: A2EMessage) -> None:
        """On the host's loop already (``receive`` is called there)."""
        self._loop.call_soon(self._send, reply)


def _lost_reply(request: A2EMessage, session: NodeSession) -> A2EMessage:
    message = f"node {session.link.tag} of the cluster was lost"
    if isinstance(request, ToolCallRequest):
        return failed_result(request, message)
    return A2EError(req_id=request.id, code=ErrorCode.INTERNAL, message=message, retryable=True)
