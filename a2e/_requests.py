"""``Requests``: a client's table of requests in flight, by id, and how a message from the host
is routed to one. ``A2EClient`` (threads) and ``AsyncToolAPI`` (one event loop) share it, so
both read the host alike: a ``tool/event`` goes to its call and leaves it waiting, any other
message with a ``req_id`` answers its request and ends it, and one that answers nothing still
waiting is said in the log, quietly when it answers what was sent without waiting (a cancel
that came after its call ended), as a warning when it is a host error nobody expected.

No I/O and no lock: the threaded client holds its own around every use.
"""

from __future__ import annotations

import collections
import logging
from typing import Generic, TypeVar

from a2e._messages import A2EError, A2EMessage
from a2e.caps.tools._models import ToolEvent

__all__ = ["MAX_UNANSWERED", "Requests"]

log = logging.getLogger("a2e.client")

#: Messages sent without waiting whose late ``error`` is still recognised (the newest kept).
MAX_UNANSWERED = 1024

P = TypeVar("P")


class Requests(Generic[P]):
    """What waits for the host's answers (``P``: the client's own pending type)."""

    def __init__(self) -> None:
        self._waiting: dict[str, P] = {}
        self._unanswered: collections.OrderedDict[str, None] = collections.OrderedDict()

    def add(self, req_id: str, pending: P) -> None:
        """``pending`` waits for the answers to ``req_id``; ``ValueError`` if one already
        does (the host could not tell their answers apart)."""
        if req_id in self._waiting:
            raise ValueError(f"a request with id {req_id!r} is already in flight")
        self._waiting[req_id] = pending

    def sent_without_waiting(self, req_id: str) -> None:
        """A message nothing waits for was sent: an ``error`` the host may answer it with is
        expected, not a stray."""
        self._unanswered[req_id] = None
        while len(self._unanswered) > MAX_UNANSWERED:
            self._unanswered.popitem(last=False)

    def get(self, req_id: str) -> P | None:
        return self._waiting.get(req_id)

    def forget(self, req_id: str) -> P | None:
        """No longer waited for (answered, timed out or not sent); what waited, if anything."""
        return self._waiting.pop(req_id, None)

    def route(self, message: A2EMessage) -> tuple[P, bool] | None:
        """What waits for ``message``, and whether it is the last answer (anything but an
        event: then nothing waits for that id any more); ``None`` when nothing does (logged)."""
        req_id = getattr(message, "req_id", "")
        pending = self._waiting.get(req_id) if req_id else None
        if pending is None:
            self._stray(message, req_id)
            return None
        last = not isinstance(message, ToolEvent)
        if last:
            del self._waiting[req_id]
        return pending, last

    def drain(self) -> list[P]:
        """Everything still waiting, no longer waited for (the connection ended)."""
        waiting = list(self._waiting.values())
        self._waiting.clear()
        return waiting

    def _stray(self, message: A2EMessage, req_id: str) -> None:
        expected = self._unanswered.pop(req_id, 0) is None
        if isinstance(message, A2EError) and expected:
            log.debug("%s answered a message sent without waiting: %s", message.code, req_id)
        elif isinstance(message, A2EError):
            log.warning("host error not tied to a request: %s: %s", message.code, message.message)
        else:
            log.debug("dropping %s for unknown request %r", message.type, req_id)
