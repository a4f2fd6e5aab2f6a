"""A running call's events, as MCP clients show them.

- ``progress``: a progress notification (``pct`` of 100, with its message), when the client
  sent a progress token. MCP wants progress to grow, so one that does not is not sent.
- ``status``: a log message at ``info``, from the logger ``<tool>/status``.
- ``log``: a log message at its level (an unknown level is ``info``), from ``<tool>``.
- ``artifact``: each chunk a log message at ``info``, from ``<tool>/<artifact name>`` (for
  example ``python_eval/stdout``); the whole output is in the result as well.

Log messages are MCP's ``notifications/message``: sent to clients of the handshake era, and to
clients of the 2026-07-28 era only when their request asked for a log level.
"""

from __future__ import annotations

import warnings
from typing import Any, get_args

from mcp import types
from mcp.server.context import ServerRequestContext
from mcp.shared.exceptions import MCPDeprecationWarning

from a2e.caps.tools.models import EventKind, ToolEvent

__all__ = ["EventRelay"]

_LEVELS: frozenset[str] = frozenset(get_args(types.LoggingLevel))

# Logging is deprecated for the 2026-07-28 protocol, and still what hosts of the handshake era
# show: the SDK's warning on each use says nothing a log reader can act on.
warnings.filterwarnings("ignore", message="The logging capability", category=MCPDeprecationWarning)


class EventRelay:
    def __init__(self, ctx: ServerRequestContext[Any], tool_name: str) -> None:
        self._ctx = ctx
        self._tool = tool_name
        self._progress = -1

    async def forward(self, event: ToolEvent) -> None:
        data = event.data
        if event.kind is EventKind.PROGRESS:
            if data["pct"] > self._progress:
                self._progress = data["pct"]
                await self._ctx.session.report_progress(data["pct"], 100, data["message"] or None)
        elif event.kind is EventKind.STATUS:
            await self._log("info", data["message"], f"{self._tool}/status")
        elif event.kind is EventKind.LOG:
            level = data["level"] if data["level"] in _LEVELS else "info"
            await self._log(level, data["message"], self._tool)
        elif event.kind is EventKind.ARTIFACT:
            await self._log("info", data["chunk"], f"{self._tool}/{data['name']}")

    async def _log(self, level: str, message: str, logger: str) -> None:
        await self._ctx.session.send_log_message(
            level,  # type: ignore[arg-type]
            message,
            logger=logger,
            related_request_id=self._ctx.request_id,
        )
