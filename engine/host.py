"""The host protocol: all that a transport may use of the engine.

A transport (in-process, stdio, a socket server, ...) carries messages between a peer and the
engine and knows nothing else: not sessions, not the pool, not the zygote. It opens a
connection, hands it each message that arrives, and closes it::

    connection = host.open_connection(send, name="stdio")
    connection.receive(message)            # each message from the peer, or a ProtocolError
    await asyncio.wrap_future(connection.finish())   # at end of input: calls finish, replies go
    connection.close()                     # or: end it now, calls in flight cancelled

``send(message)`` is called on the host's event loop thread with each reply and event, in
order; a transport whose peer lives elsewhere hands them on from there. ``receive``,
``finish`` and ``close`` may be called from any thread, and nothing a peer sends can make
them raise; once the host has stopped they raise ``HostClosed``.
"""

from __future__ import annotations

import concurrent.futures
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from a2e.codec import ProtocolError
from a2e.messages import A2EMessage
from a2e_engine.engine.policy import Policy

__all__ = ["Host", "HostClosed", "HostConnection", "HostStatus", "Send"]

#: Where a connection's replies and events go (called on the host's loop thread).
Send = Callable[[A2EMessage], None]


class HostClosed(ConnectionError):
    """The host has stopped: nothing more can be received."""


@dataclass(frozen=True)
class HostStatus:
    """What a host is doing now: for a service's readiness check and its metrics."""

    ready: bool  # running, and its sandbox can take calls
    why_not_ready: str
    calls_pending: int = 0  # admitted and not finished: running, queued, or between attempts
    calls_running: int = 0  # in a worker
    calls_queued: int = 0  # waiting for a worker slot
    workers_waiting: int = 0  # pre-forked, ready for a job
    zygote_restarts: int = 0
    connections: int = 0
    max_workers: int = 0  # calls that may run at once
    max_workers_why: str = ""  # as configured, or what it was sized from


class HostConnection(Protocol):
    def receive(self, message: A2EMessage | ProtocolError) -> None:
        """Hand over one message from the peer (a ``ProtocolError`` for one that could not be
        read: the peer gets an ``error`` reply naming the problem)."""

    def finish(self) -> concurrent.futures.Future[None]:
        """No more messages will come: the calls in flight run to their end and reply, then
        the connection closes. The future is done once the last reply went to ``send``."""

    def close(self) -> None:
        """End the connection now: its calls are cancelled, its sessions end (idempotent)."""


class Host(Protocol):
    def open_connection(
        self, send: Send, *, policy: Policy | None = None, name: str = ""
    ) -> HostConnection:
        """A new connection whose replies go to ``send``; ``policy`` applies on top of the
        host's own to every session opened on it. ``name`` is for logs."""

    def status(self) -> HostStatus:
        """A snapshot, from any thread; never raises (a stopped host is not ready)."""
