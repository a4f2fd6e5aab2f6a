"""``BodyBudget``: what the bodies of the requests in flight may hold of the service's memory,
together, counted as they will be once read, not as they arrived.

A request's body lives from its read to its answer: while its call waits for a worker and while
it runs. A limit on how many calls wait bounds none of that in bytes, and the bytes undercount
it: JSON read into Python costs an object for each value (``[[],[],...]`` is three bytes an
element and some sixty once read), so six queued requests of 7 MB of nested empty arrays held a
gigabyte, outside the sandbox's memory bound, and never gave it back to the system.

So each body is charged, before it is parsed, its length plus ``VALUE_BYTES`` for each value
it may hold (an upper bound, counted in C: its brackets, braces and commas, those inside
strings too), and held charged until its request is answered (``HoldBodies``, around the app).
A body charged past ``per_request`` is refused (413, it would never fit); one that does not fit
beside the bodies in flight is turned away (503, ``overloaded``: retry later). A body longer
than ``OFF_LOOP_BYTES`` is parsed and checked on a thread of its own, off the loop's.
"""

from __future__ import annotations

from collections.abc import MutableMapping
from typing import Any

from starlette.types import ASGIApp, Receive, Scope, Send

__all__ = ["OFF_LOOP_BYTES", "VALUE_BYTES", "BodyBudget", "HoldBodies", "charge_of"]

#: What one JSON value costs once read, about: a small Python object and its reference.
VALUE_BYTES = 80
#: Bodies longer than this are parsed off the event loop's thread.
OFF_LOOP_BYTES = 256 * 1024
#: Where a request's charge is kept in its scope.
_HELD = "a2e.body_charge"


def charge_of(body: bytes) -> int:
    """What ``body`` may cost once read: its bytes, and ``VALUE_BYTES`` for every value it may
    hold (each container opens with a bracket or brace; each element after the first follows
    a comma)."""
    values = body.count(b"[") + body.count(b"{") + body.count(b",") + 1
    return len(body) + VALUE_BYTES * values


class BodyBudget:
    def __init__(self, limit: int, per_request: int) -> None:
        self.limit = limit
        self.per_request = per_request
        self.held = 0
        self.refused = 0

    def fits(self, charge: int) -> str:
        """Why a body of that charge cannot be held now ("" when it can)."""
        if charge > self.per_request:
            return (
                f"the body would take about {charge >> 20} MiB once read, past the "
                f"{self.per_request >> 20} MiB a request may (it holds too many values for "
                "its size)"
            )
        if self.held + charge > self.limit:
            return (
                f"the requests in flight hold {self.held >> 20} MiB of the "
                f"{self.limit >> 20} MiB their bodies may; try again shortly"
            )
        return ""

    def take(self, scope: MutableMapping[str, Any], charge: int) -> None:
        """Hold ``charge`` for the request of ``scope`` until it is answered (``HoldBodies``);
        the caller checked ``fits``."""
        held = scope.get(_HELD)
        if held is None:  # no HoldBodies around this app (a test's): nothing to give back
            return
        held[0] += charge
        self.held += charge

    def give_back(self, charge: int) -> None:
        self.held -= charge


class HoldBodies:
    """ASGI middleware: what a request's body was charged is given back once it is answered."""

    def __init__(self, app: ASGIApp, budget: BodyBudget) -> None:
        self.app = app
        self.budget = budget

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        held = [0]
        scope[_HELD] = held
        try:
            await self.app(scope, receive, send)
        finally:
            self.budget.give_back(held[0])
            held[0] = 0
