"""``Relay``: a node's end of the drivers' channels, served on its engine's own loop.

Each driver holds one TCP connection to the relay (``frames`` says what travels on it); each
client connection of that driver is one host connection of the engine here, opened through
Ray (``NodeEngine.open``), or one session the node opened for it (``NodeEngine.open_session``,
``fork``: ``served``), and bound to the channel its first frame arrives on. One that no frame
binds within ``BIND_TIMEOUT_S`` (its driver died after opening it) is ended. Requests are
decoded and handed to the host connection, and its replies written back, all on the engine's
loop thread: no hop between threads or loops on the way through the node.

The listener is on the node's own address, where every machine of the cluster can reach it:
a peer that does not send the actor's token first (``TOKEN_BYTES``, within ``AUTH_TIMEOUT_S``)
is dropped without a reply, and a frame past the limit, or one with a malformed header, ends
that peer's channel and nothing else.
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import logging
import secrets
from collections.abc import Callable
from dataclasses import dataclass, field

from a2e import _codec as codec
from a2e._messages import A2EError, A2EMessage, ErrorCode
from a2e.caps.tools._models import ToolCallResponse, ToolUsage
from a2e_engine.engine._host import Host, HostClosed, HostConnection
from a2e_engine.engine._host_session import LocalSession
from a2e_engine.engine._policy import Policy
from a2e_engine.engine.cluster._frames import (
    HEADER,
    TOKEN_BYTES,
    FrameError,
    is_conn_id,
    pack,
    unpack_header,
)
from a2e_engine.engine.cluster._served import ServedSession

__all__ = ["AUTH_TIMEOUT_S", "BIND_TIMEOUT_S", "Relay"]

log = logging.getLogger("a2e.cluster")

#: How long a peer has to send the token before it is dropped.
AUTH_TIMEOUT_S = 10.0
#: How long a connection opened through Ray waits for its driver's first frame.
BIND_TIMEOUT_S = 60.0


@dataclass
class _Relayed:
    """One client connection: its host connection, and the channel its replies go to."""

    host: HostConnection | None = None
    writer: asyncio.StreamWriter | None = None


@dataclass
class Relay:
    host: Host
    node_id: str
    token: bytes = field(default_factory=lambda: secrets.token_bytes(TOKEN_BYTES))
    auth_timeout_s: float = AUTH_TIMEOUT_S
    bind_timeout_s: float = BIND_TIMEOUT_S
    _connections: dict[str, _Relayed] = field(default_factory=dict)
    _server: asyncio.Server | None = None
    _channels: dict[asyncio.Task[None], asyncio.StreamWriter] = field(default_factory=dict)

    async def listen(self, address: str) -> tuple[str, int]:
        """Listen on ``address`` (the node's), on a port of the kernel's choosing."""
        self._server = await asyncio.start_server(self._serve, address, 0)
        name = self._server.sockets[0].getsockname()
        return str(name[0]), int(name[1])

    async def open(self, conn_id: str, policy: Policy | None) -> None:
        """A host connection of the engine's, for a client that handshakes on it."""
        relayed = self._new(conn_id)
        send = self._sender(conn_id, relayed)
        relayed.host = self.host.open_connection(send, policy=policy, name="ray")

    def attach(self, conn_id: str, session: LocalSession) -> None:
        """``session`` (one the node opened) served on connection ``conn_id``."""
        relayed = self._new(conn_id)
        relayed.host = ServedSession(session, self._sender(conn_id, relayed))

    def served(self, conn_id: str) -> LocalSession | None:
        """The session served on ``conn_id``, if that connection is one of those, open."""
        relayed = self._connections.get(conn_id)
        host = relayed.host if relayed is not None else None
        if isinstance(host, ServedSession) and not host.session.closed:
            return host.session
        return None

    def _new(self, conn_id: str) -> _Relayed:
        if not is_conn_id(conn_id.encode()):
            raise ValueError("a connection id is 32 lowercase hex digits (uuid4().hex)")
        if conn_id in self._connections:
            raise ValueError(f"connection {conn_id} is open already")
        relayed = _Relayed()
        self._connections[conn_id] = relayed
        asyncio.get_running_loop().call_later(self.bind_timeout_s, self._unbound, conn_id, relayed)
        return relayed

    def _sender(self, conn_id: str, relayed: _Relayed) -> Callable[[A2EMessage], None]:
        def send(message: A2EMessage) -> None:
            writer = relayed.writer
            if writer is not None and not writer.is_closing():
                writer.write(pack(conn_id, codec.encode(self._named(message))))

        return send

    def _unbound(self, conn_id: str, relayed: _Relayed) -> None:
        """No frame came for ``conn_id`` in time: whoever opened it is gone."""
        if relayed.writer is None and self._connections.get(conn_id) is relayed:
            log.warning("connection %s was never used by its driver: ended", conn_id[:8])
            self._end(conn_id)

    async def close(self, conn_id: str) -> None:
        """End one client connection: its calls are cancelled, its sessions end."""
        self._end(conn_id)

    async def stop(self) -> None:
        """Stop listening, drop every channel, end every connection."""
        if self._server is not None:
            self._server.close()
        for writer in list(self._channels.values()):
            writer.close()  # each channel then ends as it does when its driver hangs up
        if self._channels:
            _done, stuck = await asyncio.wait(self._channels, timeout=5)
            for task in stuck:
                task.cancel()
        for conn_id in list(self._connections):
            self._end(conn_id)

    def _end(self, conn_id: str) -> None:
        relayed = self._connections.pop(conn_id, None)
        if relayed is not None and relayed.host is not None:
            with contextlib.suppress(HostClosed):
                relayed.host.close()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        bound: set[str] = set()
        task = asyncio.current_task()
        if task is not None:
            self._channels[task] = writer
        try:
            token = await asyncio.wait_for(reader.readexactly(TOKEN_BYTES), self.auth_timeout_s)
            if not hmac.compare_digest(token, self.token):
                log.warning("a peer without this node's token was dropped")
                return
            while True:
                length, conn_id = unpack_header(await reader.readexactly(HEADER.size))
                self._arrive(conn_id, await reader.readexactly(length), writer, bound)
        except FrameError as exc:
            log.warning("a channel sent a bad frame and was dropped: %s", exc)
        except (asyncio.IncompleteReadError, TimeoutError, ConnectionError):
            pass  # the peer went away, or never said who it was
        except asyncio.CancelledError:
            # The loop is ending (or a channel would not close): the channel ends here.
            # Python 3.11's start_server logs a handler that ends cancelled as an error with
            # its traceback, though nothing went wrong.
            pass
        finally:
            self._channels.pop(task, None)  # type: ignore[arg-type]
            for conn_id in bound:
                self._end(conn_id)
            writer.close()

    def _arrive(
        self, conn_id: str, line: bytes, writer: asyncio.StreamWriter, bound: set[str]
    ) -> None:
        relayed = self._connections.get(conn_id)
        if relayed is not None and relayed.writer is None:
            relayed.writer = writer
            bound.add(conn_id)
        if not line:
            return  # it only binds (``frames``)
        try:
            message: A2EMessage | codec.ProtocolError = codec.decode(line)
        except codec.ProtocolError as exc:
            message = exc
        if relayed is None or relayed.host is None or relayed.writer is not writer:
            refusal = A2EError(
                req_id=getattr(message, "id", "") or getattr(message, "req_id", ""),
                code=ErrorCode.UNKNOWN_SESSION,
                message=f"connection {conn_id} is not open on node {self.node_id}",
            )
            writer.write(pack(conn_id, codec.encode(refusal)))
            return
        relayed.host.receive(message)

    def _named(self, reply: A2EMessage) -> A2EMessage:
        """A call's response with this node's id in its usage."""
        if not isinstance(reply, ToolCallResponse):
            return reply
        usage = reply.data.usage or ToolUsage()
        result = reply.data.model_copy(
            update={"usage": usage.model_copy(update={"node_id": self.node_id})}
        )
        return reply.model_copy(update={"data": result})
