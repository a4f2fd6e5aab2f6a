"""``run_shell``: a command through ``/bin/sh`` inside the sandbox.

Runs under the ``process`` profile: it may fork and exec (that is what a shell is for) but has no
sockets and, where the host allows, no network namespace to use one in. The working directory
is the session workspace or a directory inside it; ``env`` adds variables to the worker's
scrubbed environment (names must be plain identifiers). Its stdin is ``stdin``, or, for a call
made to take input after its start (``ToolContext.input``: E2B's ``SendInput``), that input as
it comes. stdout and stderr travel as
``artifact`` events, line by line when the call streams, and the result carries the capped
output (``tools._output``) and the command's ``exit_code``: a non-zero exit fails the call with
the output kept. Background jobs the command leaves behind do not hold the call up: once the
shell exits, what is already written is collected and its process group is killed.
"""

from __future__ import annotations

import os
import re
from typing import TYPE_CHECKING, Any

from a2e.caps.tools._plugin import SandboxProfile, ToolExecutionError, ToolPlugin
from a2e_engine.sandbox._exits import how_it_ended
from a2e_engine.tools._confined import resolve_confined
from a2e_engine.tools._output import EventStream, Flusher, results_of
from a2e_engine.tools._processes import run_captured

if TYPE_CHECKING:
    from a2e.caps.tools._models import ToolDefinition

__all__ = ["Shell"]

SHELL = "/bin/sh"
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")


class Shell(ToolPlugin):
    name = "shell"
    sandbox_profile = SandboxProfile.PROCESS

    def _list_tools(self) -> list[ToolDefinition]:
        from a2e.caps.tools._models import ToolDefinition, ToolParameter

        return [
            ToolDefinition(
                name="run_shell",
                description="Run a command with /bin/sh in the sandbox (no network) and return "
                "its exit code, stdout and stderr.",
                input_parameters=[
                    ToolParameter(
                        name="command",
                        type="string",
                        description="the shell command",
                        required=True,
                    ),
                    ToolParameter(
                        name="cwd",
                        type="string",
                        description="working directory, inside the workspace (default: it)",
                    ),
                    ToolParameter(
                        name="env",
                        type="object",
                        description="extra environment variables (string values)",
                    ),
                    ToolParameter(name="stdin", type="string", description="text for stdin"),
                ],
                output_parameters=[
                    ToolParameter(name="exit_code", type="integer", description="0 is success"),
                    ToolParameter(name="stdout", type="string", description="standard output"),
                    ToolParameter(name="stderr", type="string", description="standard error"),
                ],
                streaming=True,
                tags=["shell", "process"],
                toolkit="shell",
            )
        ]

    def _execute_tool(self, tool_name: str, arguments: dict[str, Any]) -> dict[str, Any]:
        workspace = self.context.workspace if self.context else os.getcwd()
        cwd = resolve_confined(str(arguments.get("cwd") or "."), workspace, ())
        if not os.path.isdir(cwd):
            raise NotADirectoryError(f"cwd {arguments.get('cwd')!r} is not a directory")
        env = dict(os.environ)
        for name, value in (arguments.get("env") or {}).items():
            if not _ENV_NAME.match(name):
                raise ValueError(f"env: {name!r} is not a valid variable name")
            if not isinstance(value, str) or "\x00" in value:
                raise ValueError(f"env: the value of {name} must be a string without NUL bytes")
            env[name] = value
        line_by_line = bool(self.context and self.context.streaming)
        out = EventStream(self, "stdout", line_by_line)
        err = EventStream(self, "stderr", line_by_line)
        flusher = Flusher(out, err)
        flusher.start()
        try:
            given = self.context.input if self.context else None
            stdin = given if given is not None else arguments.get("stdin")
            code = run_captured(
                [SHELL, "-c", str(arguments["command"])], cwd, env, stdin, out, err
            ).exit_code
            assert code is not None  # no time limit of its own: the call's deadline ends it
        finally:
            flusher.stop()
        result: dict[str, Any] = {"exit_code": code, **results_of(out, err)}
        if code != 0:
            raise ToolExecutionError(f"the command {how_it_ended(code)}", result, retryable=False)
        return result
