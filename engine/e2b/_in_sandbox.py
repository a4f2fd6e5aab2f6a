"""What the sandbox side does inside a sandbox: a tool of the engine called in its session
(so every command, cell and file operation runs in a fresh or resident worker under the
sandbox's uid, namespaces, Landlock rules and limits, never in the server), and paths as the
SDK names them turned into the workspace's and back.

E2B's sandboxes work in ``/home/user``; here that is the sandbox's workspace. A path under it,
or a relative one, is taken in the workspace; any other absolute path is given to the tool as
it is, which reads it only where the engine's read roots allow and never writes it.
"""

from __future__ import annotations

import posixpath
from typing import Any

from a2e.caps.tools._models import ToolCallRequest, ToolResult
from a2e_engine.engine._host import HostSession

__all__ = ["HOME", "Paths", "call_tool", "failure_of"]

#: The sandbox's home, as E2B's SDK and its users name it.
HOME = "/home/user"


class Paths:
    """One sandbox's paths: E2B's names for them, and the workspace's."""

    def __init__(self, workspace: str) -> None:
        self.workspace = workspace.rstrip("/") or "/"

    def inside(self, path: str) -> str:
        """``path`` as the sandbox's tools take it: relative to the workspace, or absolute
        outside ``HOME``."""
        if not path:
            return "."
        if not path.startswith("/"):
            return path
        normal = posixpath.normpath(path)
        if normal == HOME:
            return "."
        if normal.startswith(HOME + "/"):
            return normal[len(HOME) + 1 :]
        return normal

    def told(self, message: str) -> str:
        """A message of a tool's as the SDK's user reads it: the workspace named ``HOME``."""
        return message.replace(self.workspace, HOME)

    def outside(self, path: str) -> str:
        """A path a tool gave (the real one) as the SDK knows it."""
        if path == self.workspace:
            return HOME
        if path.startswith(self.workspace + "/"):
            return HOME + path[len(self.workspace) :]
        return path


async def call_tool(
    session: HostSession, tool: str, arguments: dict[str, Any], timeout: int
) -> ToolResult:
    """``tool`` run in ``session`` to its result; ``Refused`` when the engine turns it away."""
    request = ToolCallRequest(tool_name=tool, arguments=arguments, timeout=timeout)
    async for batch in session.call(request):
        last = batch[-1]
        if isinstance(last, ToolResult):
            return last
    raise RuntimeError(f"{tool} ended without a result")  # session.call ends with one


def failure_of(result: ToolResult) -> tuple[str, str]:
    """A failed tool's exception type (``FileNotFoundError``, ...; ``""`` when the engine,
    not the tool, ended it) and its message."""
    error = result.error or "failed"
    kind, sep, message = error.partition(": ")
    if sep and kind.isidentifier() and result.reason == "tool_failed":
        return kind, message
    return "", error
