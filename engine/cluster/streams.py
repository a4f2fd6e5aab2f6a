"""The driver's side of the nodes' streams: one asyncio loop that reads every call's replies.

A request to a node is one ``exchange`` of its actor, a Ray streaming generator; ``StreamPump``
reads each one on its loop as its items arrive and hands the decoded messages over, in order.
One loop for all of them, rather than a thread per call, so that thousands of calls in flight
cost a coroutine each. A stream that fails (the actor died, its node was lost) is reported
with Ray's own account of why.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator, Callable
from typing import Any

from a2e import codec
from a2e.messages import A2EMessage

__all__ = ["StreamPump", "one_line"]

Deliver = Callable[[A2EMessage], None]
#: Why a stream failed, and whether its node is lost (its actor died or cannot be reached)
#: rather than only this request (the actor's method raised).
Lost = Callable[[str, bool], None]


class StreamPump:
    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(
            target=self.loop.run_forever, name="a2e-ray-streams", daemon=True
        )
        self._thread.start()

    def drain(self, stream: Any, deliver: Deliver, lost: Lost) -> None:
        """Read ``stream`` (an ``ObjectRefGenerator``) to its end on the loop."""
        asyncio.run_coroutine_threadsafe(self._hand_over(stream, deliver, lost), self.loop)

    def resolve(self, ref: Any, deliver: Deliver, lost: Lost) -> None:
        """Wait for ``ref`` (a plain actor call's list of replies) on the loop."""
        asyncio.run_coroutine_threadsafe(self._hand_over(_once(ref), deliver, lost), self.loop)

    async def _hand_over(self, refs: Any, deliver: Deliver, lost: Lost) -> None:
        """Each ref's lines, decoded, to ``deliver``; a failure to ``lost``, with whether the
        node is gone."""
        import ray.exceptions

        try:
            async for ref in refs:
                for line in await ref:
                    deliver(codec.decode(line))
        except ray.exceptions.RayActorError as exc:
            lost(one_line(exc), True)
        except ray.exceptions.RayError as exc:
            lost(one_line(exc), False)
        except codec.ProtocolError as exc:  # a node of ours sent what it must not
            lost(f"the node sent an unreadable reply: {exc}", False)

    def close(self) -> None:
        if self.loop.is_closed():
            return
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(timeout=5)


async def _once(ref: Any) -> AsyncIterator[Any]:
    yield ref


def one_line(exc: BaseException) -> str:
    """Ray's errors carry tracebacks and banners; the first line that says something."""
    for line in str(exc).splitlines():
        line = line.strip()
        if line and not set(line) <= set("-=*"):
            return f"{type(exc).__name__}: {line}"[:500]
    return type(exc).__name__
