"""``LazySession``: the engine session behind one MCP session, opened with its first request
(concurrent first requests share the one opening) and ended with it."""

from __future__ import annotations

import asyncio
import time

from a2e_engine.engine._host import Host, HostSession

__all__ = ["LazySession"]


class LazySession:
    """Opens the ``HostSession`` of one MCP session when first asked (``get``), once."""

    def __init__(self, host: Host, name: str, stateless: bool = False) -> None:
        """``stateless``: for one request alone (a session prepared ahead, ``Host``)."""
        self._host = host
        self._name = name
        self._stateless = stateless
        self._opened: asyncio.Future[HostSession] | None = None
        self.last_used = time.monotonic()

    async def get(self) -> HostSession:
        self.last_used = time.monotonic()
        if self._opened is None:
            self._opened = asyncio.ensure_future(
                self._host.open_session(self._name, stateless=self._stateless)
            )
        return await asyncio.shield(self._opened)

    def close(self) -> None:
        """End the engine session (its calls still running are cancelled); idempotent."""
        opened = self._opened
        if opened is None or not opened.done() or opened.cancelled() or opened.exception():
            return
        opened.result().close()
