"""``Connections``: every connection the service holds, by client address and by what it does,
so that no client can hold the ones another needs.

A connection costs the service little while it works (a request being read and answered, a
WebSocket session) and nothing useful while it idles (connected without a whole request head,
between two requests, a WebSocket with no call and no message). Before this ledger one limit
counted both, and a client that opened a thousand connections and sent half a request on each,
with no token, reopening them at each head deadline, left every other client a 503. So:

* **per address**: a client address holds at most ``per_address`` connections; past it a new
  one is closed at once, before it is read;
* **idle ones apart**: at most ``max_idle`` connections idle at once; one more and the one idle
  longest is closed (a client that keeps its connection between requests reconnects; one
  that sent half a request loses it), so that a new client always gets a connection to send
  its request on;
* **working ones**: past ``max_working`` the server answers 503 (uvicorn's limit, set to
  ``max_working + max_idle`` connections: idle ones alone can never reach it).

A connection is the protocol object uvicorn made for it (``Tracked``): the ledger reads its
peer and closes its transport. A WebSocket's idleness is its endpoint's to judge
(``engine.service._websocket``); here an upgraded connection counts as working.
"""

from __future__ import annotations

import asyncio
import collections
import logging
from typing import Protocol

__all__ = ["Connections", "Tracked", "TrackedTransport"]

log = logging.getLogger("a2e.service")


class Tracked(Protocol):
    """What the ledger needs of a connection: its client's address, and a way to end it."""

    def peer_address(self) -> str: ...

    def close_connection(self) -> None: ...


class TrackedTransport:
    """``Tracked`` for uvicorn's protocol objects, its HTTP and its WebSocket ones alike,
    mixed in before them: the address of their client, and their transport closed."""

    client: tuple[str, int] | None
    transport: asyncio.Transport

    def peer_address(self) -> str:
        return self.client[0] if self.client else ""

    def close_connection(self) -> None:
        if not self.transport.is_closing():
            self.transport.close()


class Connections:
    def __init__(self, max_working: int, max_idle: int, per_address: int) -> None:
        self.max_working = max_working
        self.max_idle = max_idle
        self.per_address = per_address
        self.by_address: collections.Counter[str] = collections.Counter()
        #: Idle connections, the one idle longest first.
        self.idle: collections.OrderedDict[Tracked, None] = collections.OrderedDict()
        self.open: set[Tracked] = set()
        self.refused = 0  # over the per-address bound
        self.evicted = 0  # idle past ``max_idle``

    def opened(self, connection: Tracked) -> bool:
        """A new connection, idle; False (it is to be closed now, unread) when its address
        holds its share already."""
        address = connection.peer_address()
        if self.by_address[address] >= self.per_address:
            self.refused += 1
            return False
        self.by_address[address] += 1
        self.open.add(connection)
        self.became_idle(connection)
        return True

    def became_idle(self, connection: Tracked) -> None:
        """Waiting for a request (a head not yet whole, or between two requests): it may be
        closed for a new connection, the longest idle first."""
        if connection not in self.open:
            return
        self.idle[connection] = None
        self.idle.move_to_end(connection)
        while len(self.idle) > self.max_idle:
            oldest, _ = self.idle.popitem(last=False)
            self.evicted += 1
            oldest.close_connection()

    def became_working(self, connection: Tracked) -> None:
        """A request on it is read and answered (or it became a WebSocket)."""
        self.idle.pop(connection, None)

    def closed(self, connection: Tracked) -> None:
        if connection not in self.open:
            return
        self.open.discard(connection)
        self.idle.pop(connection, None)
        address = connection.peer_address()
        self.by_address[address] -= 1
        if self.by_address[address] <= 0:
            del self.by_address[address]

    @property
    def server_limit(self) -> int:
        """uvicorn's own limit (connections and tasks), past which it answers 503."""
        return self.max_working + self.max_idle
