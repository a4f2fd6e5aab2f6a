"""The in-process transport: an ``A2EClient`` and an engine connection in the same process.

Messages are passed as model objects (no JSON round trip); the client's thread hands each one to
the connection (``engine._host``), and replies come back through a queue that the client's reader
thread drains, or, when the client routes them directly (``a2e._transport``), straight to the
waiting request. What one turn of the engine loop queues (a burst of a tool's events, read from
its pipe at once) reaches the reader as one batch: one wake-up of its thread, not one per event.
An engine that stops ends its connections without a word to them: the reader looks every
``ENDED_CHECK_S`` while it waits, and ends with the connection (else its thread would wait for
the process's life).
"""

from __future__ import annotations

import asyncio
import collections
import queue

from a2e._messages import A2EMessage
from a2e._transport import DirectRoute, TransportClosed
from a2e_engine.engine._host import Host, HostClosed
from a2e_engine.engine._policy import Policy

__all__ = ["InProcessTransport"]

_CLOSED = object()
#: How often a waiting reader looks whether the engine ended its connection.
ENDED_CHECK_S = 1.0


class InProcessTransport:
    def __init__(self, host: Host, policy: Policy | None = None) -> None:
        self._inbox: queue.SimpleQueue[object] = queue.SimpleQueue()  # batches, then _CLOSED
        self._batch: list[A2EMessage] = []  # this loop turn's; the engine loop's only
        self._ready: collections.deque[A2EMessage] = collections.deque()  # the reader's only
        self._closed = False
        self.close_reason = ""
        self._route: DirectRoute | None = None
        self.connection = host.open_connection(self._arrive, policy=policy, name="in-process")

    def route_directly(self, route: DirectRoute) -> None:
        self._route = route

    def _arrive(self, message: A2EMessage) -> None:
        """On the engine loop: the client's direct route first, else this turn's batch."""
        route = self._route
        if route is not None and route(message):
            return
        if not self._batch:
            asyncio.get_running_loop().call_soon(self._hand_over)
        self._batch.append(message)

    def _hand_over(self) -> None:
        batch, self._batch = self._batch, []
        self._inbox.put(batch)

    def send(self, message: A2EMessage) -> None:
        if self._closed:
            raise TransportClosed("in-process transport is closed")
        try:
            self.connection.receive(message)
        except HostClosed as exc:
            raise TransportClosed(str(exc)) from exc

    def receive(self) -> A2EMessage | None:
        while not self._ready:
            try:
                item = self._inbox.get(timeout=ENDED_CHECK_S)
            except queue.Empty:
                if getattr(self.connection, "closed", False):  # the engine stopped
                    self.close_reason = "the engine stopped"
                    return None
                continue
            if item is _CLOSED:
                self._inbox.put(_CLOSED)  # later receivers see the end too
                return None
            assert isinstance(item, list)
            self._ready.extend(item)
        return self._ready.popleft()

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        try:
            self.connection.close()
        except HostClosed:
            pass
        self._inbox.put(_CLOSED)
