"""The supervisor's side of the zygote (``sandbox._zygote_control``), where a unit of it has a
behaviour of its own to pin."""

from __future__ import annotations

import asyncio
import gc
from typing import Any

from a2e_engine.sandbox._zygote_control import SandboxUnavailable, _unplaced


def test_copies_killed_before_they_were_placed_leave_no_unretrieved_error() -> None:
    """A fork whose copies are killed at once (the placement then finds them gone) has nobody
    waiting for its ``placed``: its failure must not reach the loop's exception handler as
    "Future exception was never retrieved" (seen in a node's log over Ray)."""
    loop = asyncio.new_event_loop()
    reported: list[dict[str, Any]] = []
    loop.set_exception_handler(lambda _, context: reported.append(context))
    try:
        for callback in ((_unplaced,), ()):
            placed: asyncio.Future[None] = loop.create_future()
            for done in callback:
                placed.add_done_callback(done)
            placed.set_exception(SandboxUnavailable("the copies could not be placed"))
            loop.run_until_complete(asyncio.sleep(0))
            del placed
            gc.collect()
        assert len(reported) == 1  # only the one without the callback
        assert "never retrieved" in str(reported[0].get("message"))
    finally:
        loop.close()
