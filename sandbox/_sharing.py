"""What calls share, and the one way into it: a worker offers, the supervisor keeps.

The engine is fast because calls share what one of them made (a compile's outputs, a
precompiled header); whatever they share must be safe against a tenant who attacks it. So no
worker ever writes shared state. A plugin that owns a store (the engine gives ``run_code`` and
``code_eval`` its compile cache) has its directories to read (``ZygoteSettings.plugin_dirs``:
under Landlock its jobs may read a file there by its name, and list or change nothing); its
tool code offers what it made with ``sandbox._offers.offer``, one frame on its result pipe
(the worker's side, in a module of its own); the supervisor hands each offer, with the tool
and arguments of the call that made it, to the store of the job's plugin (``SharedStore``,
here), which checks it (a key it works out from the arguments itself, sizes, names) and keeps
it, from the supervisor's own process, or drops it. A worker whose plugin owns no store and
offers something breaks the rules of its pipe (``sandbox._run``).

What is made once is also made once at a time: before a call takes its worker, the store may
say that another call in flight is making what this one would (``claim``), and the call waits,
within its own deadline and holding no worker slot, until that is kept or given up; then it
goes on and finds it, or makes it itself. Only what the store kept after its own checks is
shared that way: a call that waited is never handed another call's failure.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    import asyncio

__all__ = ["NO_CLAIM", "Claim", "SharedStore"]


@dataclass(frozen=True)
class Claim:
    """A store's word on one call, before the call takes a worker.

    With ``wait``, another call in flight is making what this one would: the call waits for
    it, within its own deadline and holding no worker slot, and then goes on without a claim,
    or claims once more where ``wait`` gives True (what it waited for was something it needs
    before its own claim: a precompiled header being built). Otherwise the call goes on, and
    ``end``, if any, is called when it ends (it may be the one making it)."""

    wait: asyncio.Future[bool] | None = None
    end: Callable[[], None] | None = None


#: The word on a call that waits for nothing and whose end nobody needs to hear of.
NO_CLAIM = Claim()


class SharedStore(Protocol):
    """The supervisor's side of what one plugin's calls share."""

    def offer(
        self, tool: str, arguments: Mapping[str, Any], what: str, data: dict[str, Any]
    ) -> None:
        """On the engine's loop, as the frame arrives: check what a worker offered for the
        call of ``tool`` with ``arguments`` and keep it (off the loop) or drop it. Never
        raises; never blocks."""

    def claim(self, tool: str, arguments: Mapping[str, Any]) -> Claim:
        """On the engine's loop, before the call of ``tool`` with ``arguments`` takes a worker:
        its ``Claim``. Never raises; never blocks."""

    def close(self) -> None:
        """The engine stops: end what is under way."""
