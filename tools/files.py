"""File tools confined to allowed roots: the session workspace (read-write) and the engine's
configured read-only roots (e.g. ``/etc``).

Paths are resolved *after* following symlinks, then checked against the roots, so ``..`` and
symlinks that point outside are refused with a clear error rather than followed.
"""

from __future__ import annotations

import os
from typing import Any

from a2e.caps.tools.models import ToolDefinition, ToolParameter
from a2e.caps.tools.plugin import SandboxProfile, ToolPlugin

__all__ = ["FileTools", "resolve_confined"]

MAX_READ_BYTES = 4 * 1024 * 1024


def resolve_confined(path: str, workspace: str, roots: tuple[str, ...]) -> str:
    """The real path of ``path`` (relative to the workspace) if it lies inside an allowed root."""
    if "\x00" in path:
        raise ValueError("path contains a NUL byte")
    candidate = path if os.path.isabs(path) else os.path.join(workspace, path)
    real = os.path.realpath(candidate)
    for root in (workspace, *roots):
        real_root = os.path.realpath(root)
        if real == real_root or real.startswith(real_root.rstrip("/") + "/"):
            return real
    allowed = ", ".join((workspace, *roots))
    raise PermissionError(f"{path!r} resolves to {real!r}, outside the allowed roots ({allowed})")


class FileTools(ToolPlugin):
    name = "files"
    sandbox_profile = SandboxProfile.COMPUTE

    def _list_tools(self) -> list[ToolDefinition]:
        return [
            ToolDefinition(
                name="read_file",
                description="Read a UTF-8 text file from the session workspace or an allowed "
                "read-only root.",
                input_parameters=[
                    ToolParameter(
                        name="path",
                        type="string",
                        required=True,
                        description="File path, relative to the workspace or absolute",
                    ),
                ],
                output_parameters=[
                    ToolParameter(name="content", type="string", description="The file's text"),
                ],
                streaming=True,
                idempotent=True,
                tags=["fs"],
                toolkit="fs",
            )
        ]

    def _execute_tool(self, tool_name: str, arguments: dict[str, Any]) -> dict[str, Any]:
        if tool_name != "read_file":
            raise ValueError(f"unknown tool {tool_name!r}")
        context = self.context
        workspace = context.workspace if context else os.getcwd()
        roots = context.read_roots if context else ()
        real = resolve_confined(arguments["path"], workspace, roots)
        size = os.path.getsize(real)
        if size > MAX_READ_BYTES:
            raise ValueError(
                f"{arguments['path']!r} is {size} bytes; the limit is {MAX_READ_BYTES}"
            )
        with open(real, "rb") as fh:
            raw = fh.read(MAX_READ_BYTES + 1)
        try:
            content = raw.decode("utf-8")
        except UnicodeDecodeError:
            raise ValueError(f"{arguments['path']!r} is not UTF-8 text") from None
        return {"content": content}
