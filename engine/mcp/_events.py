"""A running call's events, as MCP clients show them.

Events come in bursts (what a worker wrote between two reads of its pipe), and an MCP client
pays for each notification: the SDK's client spawns two tasks for every one, about 0.3 ms of
CPU. So a burst is relayed as what a host shows of it: its last progress, and each artifact's
chunks joined; status lines and log messages each stay their own.

- ``progress``: a progress notification (``pct`` of 100, with its message), when the client
  sent a progress token: the burst's last. MCP wants progress to grow, so one that does not
  is not sent.
- ``status``: a log message at ``info``, from the logger ``<tool>/status``.
- ``log``: a log message at its level (an unknown level is ``info``), from ``<tool>``.
- ``artifact``: a log message at ``info`` from ``<tool>/<artifact name>`` (for example
  ``python_eval/stdout``), its chunks of the burst joined; the whole output is in the result
  as well.

Log messages are MCP's ``notifications/message``: sent to clients of the handshake era, and to
clients of the 2026-07-28 era only when their request asked for a log level.
"""

from __future__ import annotations

import warnings
from typing import Any, get_args

from mcp import types
from mcp.server.context import ServerRequestContext
from mcp.shared.exceptions import MCPDeprecationWarning

from a2e.caps.tools._models import EventKind, ToolEvent

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

    async def forward(self, burst: list[ToolEvent]) -> None:
        """Relay one burst of events in order: its last progress, each run of one artifact's
        chunks as one message, every status line and log message."""
        last_progress = max(
            (i for i, event in enumerate(burst) if event.kind is EventKind.PROGRESS), default=-1
        )
        artifact, chunks = "", list[str]()

        async def flush() -> None:
            if chunks:
                await self._log("info", "".join(chunks), f"{self._tool}/{artifact}")
                chunks.clear()

        for i, event in enumerate(burst):
            data = event.data
            if event.kind is EventKind.ARTIFACT:
                if data["name"] != artifact:
                    await flush()
                artifact = data["name"]
                chunks.append(data["chunk"])
                continue
            await flush()
            if event.kind is EventKind.PROGRESS:
                if i == last_progress and data["pct"] > self._progress:
                    self._progress = data["pct"]
                    await self._ctx.session.report_progress(
                        data["pct"], 100, data["message"] or None
                    )
            elif event.kind is EventKind.STATUS:
                await self._log("info", data["message"], f"{self._tool}/status")
            elif event.kind is EventKind.LOG:
                level = data["level"] if data["level"] in _LEVELS else "info"
                await self._log(level, data["message"], self._tool)
        await flush()

    async def _log(self, level: str, message: str, logger: str) -> None:
        await self._ctx.session.send_log_message(
            level,  # type: ignore[arg-type]
            message,
            logger=logger,
            related_request_id=self._ctx.request_id,
        )
