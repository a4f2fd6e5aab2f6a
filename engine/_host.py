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

A front-end whose peer does not speak A2E (REST, SandboxFusion's API, MCP) asks for a session
instead, on the host's loop, and works with typed requests and results, no handshake::

    session = await host.open_session("rest", stateless=True)
    try:
        async for burst in session.call(request):   # events, the last burst ends with the result
            ...
    finally:
        session.close()
"""

from __future__ import annotations

import concurrent.futures
from collections.abc import AsyncGenerator, Callable
from dataclasses import dataclass
from typing import Protocol

from a2e._codec import ProtocolError
from a2e._messages import A2EError, A2EMessage
from a2e.caps.tools._models import (
    ToolCallRequest,
    ToolEvent,
    ToolListRequest,
    ToolListResponse,
    ToolResult,
)
from a2e_engine.engine._policy import Policy
from a2e_engine.sandbox._call_input import CallInput

__all__ = [
    "Bursts",
    "Host",
    "HostClosed",
    "HostConnection",
    "HostSession",
    "HostStatus",
    "Refused",
    "Send",
]

#: A call's events in the bursts they came in, the last burst ending with its result.
Bursts = AsyncGenerator[list[ToolEvent | ToolResult], None]
#: Where a connection's replies and events go (called on the host's loop thread).
Send = Callable[[A2EMessage], None]


class HostClosed(ConnectionError):
    """The host has stopped: nothing more can be received."""


class Refused(Exception):
    """The host turned a request away, as the protocol's ``error`` says it (overloaded, too
    large, an unknown session, ...): ``error`` is that message."""

    def __init__(self, error: A2EError) -> None:
        super().__init__(f"{error.code}: {error.message}")
        self.error = error


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
    connections: int = 0  # wire connections
    sessions: int = 0  # sessions open: the connections' and those opened directly
    max_workers: int = 0  # calls that may run at once
    max_workers_why: str = ""  # as configured, or what it was sized from
    resident_workers: int = 0  # workers that sessions keep for stateful tools, alive now
    max_resident_workers: int = 0  # how many sessions may keep one at once
    max_timeout: int = 300  # seconds: the longest a call may run (EngineConfig.max_timeout)
    memory_limit_mb: int = 0  # what the sandbox may hold in all (0: no bound)
    memory_free_mb: int = 0  # what new sessions may still take of it


class HostConnection(Protocol):
    def receive(self, message: A2EMessage | ProtocolError) -> None:
        """Hand over one message from the peer (a ``ProtocolError`` for one that could not be
        read: the peer gets an ``error`` reply naming the problem)."""

    def finish(self) -> concurrent.futures.Future[None]:
        """No more messages will come: the calls in flight run to their end and reply, then
        the connection closes. The future is done once the last reply went to ``send``."""

    def close(self) -> None:
        """End the connection now: its calls are cancelled, its sessions end (idempotent)."""


class HostSession(Protocol):
    """One session, for a front-end that speaks a protocol of its own. Its methods run on the
    host's loop; each refusal is ``Refused``."""

    session_id: str

    async def list_tools(self, request: ToolListRequest) -> ToolListResponse:
        """The tools this session may see that ``request`` selects."""

    def call(self, request: ToolCallRequest, given: CallInput | None = None) -> Bursts:
        """The call's events in the bursts they came in, the last burst ending with its
        result. Leaving the iteration before the result cancels the call. ``given``: input
        the caller sends it after its start (a command's stdin), where the host carries it;
        ``Refused`` where it does not."""

    def cancel(self, call_id: str) -> bool:
        """End a call of this session as its timeout would (its result still comes)."""

    def close(self) -> None:
        """Cancel what still runs; the session ends once its last call is done."""


class Host(Protocol):
    async def open_session(
        self,
        client: str,
        *,
        policy: Policy | None = None,
        stateless: bool = False,
        tenant: str = "",
        lasting: bool = False,
        home: str = "",
    ) -> HostSession:
        """A new session on the host's loop; ``policy`` applies on top of the host's own.
        ``stateless``: for one request that keeps nothing between its calls and the next
        request's, so it may be one prepared ahead. ``tenant``: who it is for, when the
        front-end knows (a client address, an API key; ``engine._memory_bound``): its share
        of the sandbox is judged with the others of that tenant. ``lasting``: a session its
        front-end keeps for as long as it says (an E2B sandbox): the worker it keeps for its
        stateful tools is not ended for idleness or age, only with it. ``home``: another path
        its workspace answers to in its workers, and their ``HOME`` (an E2B sandbox's
        ``/home/user``; where the run layer gives a worker a ``/home`` of its own). ``Refused``
        when none can be had."""

    async def fork_session(self, session: HostSession, count: int) -> list[HostSession]:
        """``count`` copies of ``session`` (one of this host's, open): each a session of its
        own, with the same client, policy, tenant, ``lasting`` and ``home``, its files copied
        from ``session``'s and, where ``session`` keeps an interpreter, a copy of it
        (``engine._session_forks``); ``session`` goes on. ``Refused`` when they cannot be
        had, saying why."""

    async def pause_session(self, session: HostSession, paused: bool) -> str:
        """``session`` (one of this host's, open) paused: every process its calls and its
        kept interpreter run frozen where they stand, holding no CPU, their memory and files
        kept, and no new call started (``Refused``) until it is resumed (``paused=False``).
        How it was done: ``"freezer"`` (cgroups), or ``"signals"`` (the workers stopped, not
        what they started). A call's deadline runs on while it is frozen."""

    def open_connection(
        self, send: Send, *, policy: Policy | None = None, name: str = "", tenant: str = ""
    ) -> HostConnection:
        """A new connection whose replies go to ``send``; ``policy`` applies on top of the
        host's own to every session opened on it, and ``tenant`` (as ``open_session``'s) to
        each of them. ``name`` is for logs."""

    def status(self) -> HostStatus:
        """A snapshot, from any thread; never raises (a stopped host is not ready)."""
