"""``run_shell``: a command through ``/bin/sh`` inside the sandbox.

Runs under the ``process`` profile: it may fork and exec (that is what a shell is for) but has no
sockets and, where the host allows, no network namespace to use one in. The working directory
is the session workspace or a directory inside it; ``env`` adds variables to the worker's
scrubbed environment (names must be plain identifiers). stdout and stderr travel as
``artifact`` events, line by line when the call streams, and the result carries the capped
output (``tools.output``) and the command's ``exit_code``: a non-zero exit fails the call with
the output kept. Background jobs the command leaves behind do not hold the call up: once the
shell exits, what is already written is collected and its process group is killed.
"""

from __future__ import annotations

import codecs
import os
import re
import selectors
import signal
import subprocess
import threading
import time
from typing import Any

from a2e.caps.tools.models import ToolDefinition, ToolParameter
from a2e.caps.tools.plugin import SandboxProfile, ToolExecutionError, ToolPlugin
from a2e_engine.tools.files import resolve_confined
from a2e_engine.tools.output import EventStream, Flusher, results_of

__all__ = ["Shell"]

SHELL = "/bin/sh"
#: After the shell exits, how long output already in flight may take to arrive.
DRAIN_S = 0.2
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")


class Shell(ToolPlugin):
    name = "shell"
    sandbox_profile = SandboxProfile.PROCESS

    def _list_tools(self) -> list[ToolDefinition]:
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
            code = _run(str(arguments["command"]), cwd, env, arguments.get("stdin"), out, err)
        finally:
            flusher.stop()
        result: dict[str, Any] = {"exit_code": code, **results_of(out, err)}
        if code != 0:
            how = (
                f"was killed by {signal.Signals(-code).name}"
                if code < 0
                else f"exited with code {code}"
            )
            raise ToolExecutionError(f"the command {how}", result, retryable=False)
        return result


def _run(
    command: str,
    cwd: str,
    env: dict[str, str],
    stdin: str | None,
    out: EventStream,
    err: EventStream,
) -> int:
    proc = subprocess.Popen(
        [SHELL, "-c", command],
        cwd=cwd,
        env=env,
        stdin=subprocess.PIPE if stdin else subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,  # its own process group, killed as a whole at the end
    )
    if stdin:
        threading.Thread(target=_feed, args=(proc, stdin), daemon=True).start()
    assert proc.stdout is not None and proc.stderr is not None
    selector = selectors.DefaultSelector()
    for pipe, stream in ((proc.stdout, out), (proc.stderr, err)):
        decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        selector.register(pipe, selectors.EVENT_READ, (stream, decoder))
    drain_until: float | None = None
    while selector.get_map():
        if drain_until is None and proc.poll() is not None:
            drain_until = time.monotonic() + DRAIN_S
        timeout = 0.05 if drain_until is None else max(0.0, drain_until - time.monotonic())
        events = selector.select(timeout)
        for key, _ in events:
            stream, decoder = key.data
            data = os.read(key.fd, 65536)
            if data:
                stream.write(decoder.decode(data))
            else:
                stream.write(decoder.decode(b"", final=True))
                selector.unregister(key.fileobj)
        if drain_until is not None and time.monotonic() >= drain_until:
            break  # a background job holds the pipes open: do not wait for it
    selector.close()
    code = proc.wait()
    try:
        os.killpg(proc.pid, signal.SIGKILL)  # what the command left running in its group
    except ProcessLookupError:
        pass
    for pipe in (proc.stdout, proc.stderr):
        pipe.close()
    return code


def _feed(proc: subprocess.Popen[bytes], text: str) -> None:
    assert proc.stdin is not None
    try:
        proc.stdin.write(text.encode())
        proc.stdin.close()
    except (BrokenPipeError, OSError):
        pass  # the command did not read it all
