"""``LazyConversation``: the engine session behind one MCP session, opened with its first
request (concurrent first requests share the one opening) and ended with it."""

from __future__ import annotations

import asyncio
import time

from a2e_engine.engine.host import Host
from a2e_engine.engine.transports.conversation import Conversation

__all__ = ["LazyConversation"]


class LazyConversation:
    def __init__(self, host: Host, name: str) -> None:
        self._host = host
        self._name = name
        self._opened: asyncio.Future[Conversation] | None = None
        self.last_used = time.monotonic()

    async def get(self) -> Conversation:
        self.last_used = time.monotonic()
        if self._opened is None:
            self._opened = asyncio.ensure_future(self._open())
        return await asyncio.shield(self._opened)

    async def _open(self) -> Conversation:
        conversation = Conversation(self._host, lambda message: None, self._name, "mcp")
        try:
            await conversation.open()
        except BaseException:
            conversation.close()
            raise
        return conversation

    def close(self) -> None:
        """End the engine session (its calls still running are cancelled); idempotent."""
        opened = self._opened
        if opened is None or not opened.done() or opened.cancelled() or opened.exception():
            return
        opened.result().close()
