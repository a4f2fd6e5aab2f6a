"""The client side's view of a connection: send a message, receive the next one.

``A2EClient`` only ever sees this interface, so the same client works in-process, over stdio or
over a socket. Implementations must make ``send`` safe to call from many threads at once.

A transport whose messages arrive on a thread of this process anyway (in-process) may also offer
``route_directly(route)``: the client passes a function that completes a waiting request at
once, sparing the hop through its reader thread (see ``A2EClient``). One that can say why its
stream ended (a close code, a peer gone silent) offers it as ``close_reason``, and the client's
waiting requests fail with it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol, runtime_checkable

from a2e._messages import A2EMessage

__all__ = ["ClientTransport", "DirectRoute", "TransportClosed"]

#: Given a message as it arrives: ``True`` if the client took it (a reply it completed),
#: ``False`` if it must be queued for the reader thread like every other message.
DirectRoute = Callable[[A2EMessage], bool]


class TransportClosed(ConnectionError):
    """The peer went away; nothing more can be sent or received."""


@runtime_checkable
class ClientTransport(Protocol):
    def send(self, message: A2EMessage) -> None:
        """Deliver one message; raise ``TransportClosed`` when the peer is gone."""

    def receive(self) -> A2EMessage | None:
        """Block for the next message; ``None`` once the stream has ended."""

    def close(self) -> None:
        """Release the connection; a blocked ``receive`` returns ``None``."""
