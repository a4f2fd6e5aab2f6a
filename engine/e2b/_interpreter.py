"""E2B's code interpreter (``POST /execute``, ``/contexts``), over a sandbox's session.

A Python cell runs in the sandbox's resident interpreter (``python_session``: a worker the
session keeps, under its uid and in its workspace), in the context it names: each context is
a namespace of its own there, with its own directory. A ``bash`` cell is a ``run_shell`` call.
The answer is the SDK's NDJSON stream: ``stdout``, ``stderr``, a ``result`` per value shown
(the cell's final expression ``is_main_result``), an ``error``, and the cell's number; a
client that goes away before the end interrupts its cell.

``/contexts`` requests carry no access token (the SDK sends none), so only a sandbox's id,
which only its owner is told, guards them; what they can do is bounded to naming, resetting
and forgetting namespaces.
"""

from __future__ import annotations

import posixpath
import secrets
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel, ConfigDict, Field
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse

from a2e import _jsonwire as jsonwire
from a2e.caps.tools._models import ToolCallRequest, ToolResult
from a2e_engine.engine._host import Refused
from a2e_engine.engine.e2b._errors import E2BError, error_response, read_body
from a2e_engine.engine.e2b._in_sandbox import HOME, Paths, call_tool
from a2e_engine.engine.e2b._sandboxes import Sandbox
from a2e_engine.engine.service._responses import json_response

__all__ = ["Interpreter"]

#: A cell's source and its variables, at most.
MAX_BODY_BYTES = 4 << 20
#: Contexts one sandbox may hold (the interpreter's bound, ``tools._python_cells``).
MAX_CONTEXTS = 64
DEFAULT_CONTEXT = "default"
#: A context's directory, at most.
MAX_CWD_CHARS = 1024
#: The languages a cell may be in.
LANGUAGES = ("python", "bash")
#: A value's MIME type as a ``result`` line names it.
_MIME_KEYS = {
    "text/plain": "text",
    "text/html": "html",
    "text/markdown": "markdown",
    "text/latex": "latex",
    "image/svg+xml": "svg",
    "image/png": "png",
    "image/jpeg": "jpeg",
    "application/pdf": "pdf",
    "application/json": "json",
    "application/javascript": "javascript",
}


class _Execute(BaseModel):
    model_config = ConfigDict(extra="ignore", strict=True)

    code: str
    context_id: str | None = None
    language: str | None = None
    env_vars: dict[str, str] | None = None


class _NewContext(BaseModel):
    model_config = ConfigDict(extra="ignore", strict=True)

    language: str | None = Field(None, max_length=64)
    cwd: str | None = Field(None, min_length=1, max_length=MAX_CWD_CHARS, pattern=r"^[^\x00]*$")


@dataclass
class _Context:
    id: str
    language: str
    cwd: str

    def wire(self) -> dict[str, str]:
        return {"id": self.id, "language": self.language, "cwd": self.cwd}


@dataclass
class _Contexts:
    """One sandbox's contexts, the default one first."""

    by_id: dict[str, _Context] = field(
        default_factory=lambda: {DEFAULT_CONTEXT: _Context(DEFAULT_CONTEXT, "python", HOME)}
    )


class Interpreter:
    """The code interpreter of every sandbox."""

    def __init__(self, max_timeout: int) -> None:
        """``max_timeout``: the engine's longest call, a cell's longest run."""
        self.max_timeout = max_timeout
        self._contexts: dict[str, _Contexts] = {}

    def forget(self, sandbox: Sandbox) -> None:
        self._contexts.pop(sandbox.id, None)

    def _of(self, sandbox: Sandbox) -> _Contexts:
        return self._contexts.setdefault(sandbox.id, _Contexts())

    async def execute(self, request: Request, sandbox: Sandbox) -> Response:
        try:
            body = await read_body(request, _Execute, MAX_BODY_BYTES)
            context = self._context(sandbox, body)
        except E2BError as exc:
            return exc.response()
        env = {**sandbox.env_vars, **(body.env_vars or {})}
        paths = Paths(sandbox.workspace)
        cwd = paths.inside(context.cwd)
        if context.language == "bash":
            tool = "run_shell"
            arguments = {"command": body.code, "env": {"PWD": context.cwd, **env}, "cwd": cwd}
        else:
            tool = "python_session"
            arguments = {"code": body.code, "context": context.id, "env": env, "cwd": cwd}
        call = ToolCallRequest(tool_name=tool, arguments=arguments, timeout=self.max_timeout)
        return StreamingResponse(_lines(sandbox, call, paths), media_type="application/x-ndjson")

    def _context(self, sandbox: Sandbox, body: _Execute) -> _Context:
        if body.context_id is not None and body.language is not None:
            raise E2BError(400, "give a context or a language, not both")
        contexts = self._of(sandbox).by_id
        if body.context_id is not None:
            found = contexts.get(body.context_id)
            if found is None:
                raise E2BError(404, f"context {body.context_id!r} not found")
            return found
        language = _language(body.language)
        if language == "bash":
            return _Context("bash", "bash", HOME)
        return contexts[DEFAULT_CONTEXT]

    async def create_context(self, request: Request, sandbox: Sandbox) -> Response:
        try:
            body = await read_body(request, _NewContext, MAX_BODY_BYTES)
            language = _language(body.language)
            contexts = self._of(sandbox).by_id
            if len(contexts) >= MAX_CONTEXTS:
                raise E2BError(429, f"this sandbox holds {MAX_CONTEXTS} contexts already")
        except E2BError as exc:
            return exc.response()
        cwd = posixpath.normpath(posixpath.join(HOME, body.cwd or HOME))
        context = _Context(secrets.token_hex(16), language, cwd)
        contexts[context.id] = context
        return json_response(context.wire())

    async def list_contexts(self, request: Request, sandbox: Sandbox) -> Response:
        return json_response([context.wire() for context in self._of(sandbox).by_id.values()])

    async def restart_context(self, request: Request, sandbox: Sandbox) -> Response:
        context = self._of(sandbox).by_id.get(request.path_params["context_id"])
        if context is None:
            return error_response(404, "context not found")
        if context.language == "python":
            arguments = {"code": "", "context": context.id, "reset": True}
            try:
                await call_tool(sandbox.session, "python_session", arguments, 30)
            except Refused as exc:
                return error_response(429, exc.error.message)
        return Response(status_code=204)

    async def delete_context(self, request: Request, sandbox: Sandbox) -> Response:
        context_id = request.path_params["context_id"]
        contexts = self._of(sandbox).by_id
        if context_id not in contexts or context_id == DEFAULT_CONTEXT:
            return error_response(404, "context not found")
        response = await self.restart_context(request, sandbox)  # its namespace let go
        if response.status_code == 204:
            del contexts[context_id]
        return response


def _language(given: str | None) -> str:
    language = (given or "python").lower()
    if language in ("python3", "py"):
        language = "python"
    if language not in LANGUAGES:
        raise E2BError(400, f"language {given!r} is not served; served: {', '.join(LANGUAGES)}")
    return language


async def _lines(sandbox: Sandbox, call: ToolCallRequest, paths: Paths) -> AsyncIterator[bytes]:
    """The cell's NDJSON lines, once it has run (a client gone first interrupts it)."""
    result: ToolResult | None = None
    try:
        async for burst in sandbox.session.call(call):
            last = burst[-1]
            if isinstance(last, ToolResult):
                result = last
    except Refused as exc:
        yield _line({"type": "error", "name": "Overloaded", "value": exc.error.message})
        return
    assert result is not None  # session.call ends with one
    for line in _output(result, call.tool_name == "run_shell", paths):
        yield _line(line)


def _output(result: ToolResult, shell: bool, paths: Paths) -> list[dict[str, Any]]:
    data = result.data if isinstance(result.data, dict) else {}
    now = time.time_ns()
    lines: list[dict[str, Any]] = []
    for stream in ("stdout", "stderr"):
        text = data.get(stream)
        if isinstance(text, str) and text:
            lines.append({"type": stream, "text": text, "timestamp": now})
    main = data.get("main_display")
    for index, bundle in enumerate(data.get("display") or []):
        shown = {_MIME_KEYS[k]: v for k, v in bundle.items() if k in _MIME_KEYS}
        lines.append({"type": "result", **shown, "is_main_result": index == main})
    for error in data.get("error") or []:
        traceback = error.get("traceback", "")
        lines.append(
            {
                "type": "error",
                "name": str(error.get("ename", "")),
                "value": str(error.get("evalue", "")),
                "traceback": "".join(traceback) if isinstance(traceback, list) else traceback,
            }
        )
    exited = shell and isinstance(data.get("exit_code"), int)
    if not result.success and not exited and not data.get("error"):
        name = "TimeoutError" if result.reason == "timeout" else "ExecutionError"
        message = paths.told(result.error or "the cell failed")
        lines.append({"type": "error", "name": name, "value": message, "traceback": ""})
    if shell and isinstance(data.get("exit_code"), int) and data["exit_code"] != 0:
        code = data["exit_code"]
        lines.append(
            {"type": "error", "name": "ExitCode", "value": f"exit code {code}", "traceback": ""}
        )
    if isinstance(data.get("execution_count"), int):
        lines.append({"type": "number_of_executions", "execution_count": data["execution_count"]})
    return lines


def _line(value: dict[str, Any]) -> bytes:
    return jsonwire.dumps(value).encode() + b"\n"
