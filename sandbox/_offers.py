"""The worker's side of what calls share (``sandbox._sharing`` has the protocol and the
supervisor's side): a tool offers what it made, one frame on the result pipe, and hears nothing
back. Workers import this alone, not the supervisor's store."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from a2e_engine.sandbox._frames import encode_frame
from a2e_engine.sandbox._messages import share_frame

__all__ = ["offer", "set_share_sink"]

#: Writes one encoded frame to the worker's result pipe (set by the worker for its job).
_sink: Callable[[bytes], None] | None = None
#: The largest frame the supervisor reads from this worker.
_max_frame = 0


def set_share_sink(sink: Callable[[bytes], None] | None, max_frame: int = 0) -> None:
    """In the worker, for its job: where ``offer`` writes (``None``: nowhere)."""
    global _sink, _max_frame
    _sink, _max_frame = sink, max_frame


def offer(what: str, data: dict[str, Any]) -> bool:
    """Offer ``data`` to the store of this worker's plugin; whether it was sent (not in a
    worker, or too large for one frame: not). Whether it is kept is the store's to decide,
    after the call: nothing comes back."""
    if _sink is None:
        return False
    frame = encode_frame(share_frame(what, data))
    if len(frame) > _max_frame:
        return False
    _sink(frame)
    return True
