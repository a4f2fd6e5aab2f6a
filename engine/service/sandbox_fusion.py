"""SandboxFusion's endpoints, so that its clients switch by changing one URL: ``POST /run_code``
and ``GET /v1/ping``.

``/run_code`` takes SandboxFusion's request (``code``, ``language``, ``stdin``,
``compile_timeout``, ``run_timeout``, ``memory_limit_MB``, ``files``, ``fetch_files``; other
fields are ignored, as it ignores them) and answers in its shape: 200 with ``status``
``Success``, ``Failed`` or ``SandboxError``, ``message``, ``compile_result``, ``run_result``,
``executor_pod_name``, ``files``. It is a mapping onto the ``run_code`` tool, whose result has
that shape already; ``LANGUAGES`` maps SandboxFusion's names to the tool's, one entry each. A
language not served, or a call that could not run, is a ``SandboxError`` that says why.
``memory_limit_MB`` above 0 is the run's ``memory_mb``.

Clients that can only be given a URL pass the token as ``?token=`` (verl's
``sandbox_fusion_url``) or, for those that append ``/run_code`` to a base URL (SkyRL's
``SANDBOX_FUSION_URL``, SandboxFusion's own SDK), as a path prefix: ``http://host/t/TOKEN``.
"""

from __future__ import annotations

import math
from typing import Any

from pydantic import BaseModel, ConfigDict, Field
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from a2e.caps.tools.models import ToolCallRequest
from a2e_engine.engine.service.bodies import BadRequest, read_model
from a2e_engine.engine.service.responses import json_response, refusal_response, result_or_gone
from a2e_engine.engine.service.state import ServiceState
from a2e_engine.engine.transports.conversation import Conversation, Refused

__all__ = ["LANGUAGES", "RunCodeRequest", "sandbox_fusion_routes"]

#: SandboxFusion's language name -> the ``run_code`` tool's (``tools.languages``).
LANGUAGES: dict[str, str] = {
    "python": "python",
    "bash": "bash",
    "cpp": "cpp",
    "c": "c",
    "java": "java",
    "nodejs": "nodejs",
    "typescript": "typescript",
    "go": "go",
    "rust": "rust",
    "perl": "perl",
    "ruby": "ruby",
    "lua": "lua",
}
#: SandboxFusion's response, in its order.
RESPONSE_KEYS = ("status", "message", "compile_result", "run_result", "executor_pod_name", "files")
#: Time the call gets past the program's own limits (starting it, writing files, fetching).
SLACK_S = 5


class RunCodeRequest(BaseModel):
    model_config = ConfigDict(extra="ignore")

    code: str
    language: str
    stdin: str | None = None
    compile_timeout: float = Field(10, gt=0)
    run_timeout: float = Field(10, gt=0)
    memory_limit_MB: int = -1
    files: dict[str, str | None] = {}
    fetch_files: list[str] = []


def sandbox_error(message: str) -> dict[str, Any]:
    return {
        "status": "SandboxError",
        "message": message,
        "compile_result": None,
        "run_result": None,
        "executor_pod_name": None,
        "files": {},
    }


def sandbox_fusion_routes(state: ServiceState) -> list[Route]:
    host, config = state.host, state.config

    async def ping(request: Request) -> Response:
        return json_response("pong")

    async def run_code(request: Request) -> Response:
        try:
            body = await read_model(
                request, RunCodeRequest, config.max_message_bytes, config.request_timeout_s
            )
        except BadRequest as exc:
            state.metrics.reject(exc.error)
            if exc.status == 400:
                exc.status = 422  # SandboxFusion's status for a request it cannot read
            return exc.response()
        language = LANGUAGES.get(body.language)
        if language is None:
            served = ", ".join(sorted(LANGUAGES))
            return json_response(
                sandbox_error(f"language {body.language!r} is not served here; served: {served}")
            )
        arguments: dict[str, Any] = {
            "language": language,
            "code": body.code,
            "compile_timeout": body.compile_timeout,
            "run_timeout": body.run_timeout,
            "files": body.files,
            "fetch_files": body.fetch_files,
        }
        if body.stdin is not None:
            arguments["stdin"] = body.stdin
        if body.memory_limit_MB > 0:
            arguments["memory_mb"] = body.memory_limit_MB
        call = ToolCallRequest(
            tool_name="run_code",
            arguments=arguments,
            timeout=math.ceil(body.compile_timeout + body.run_timeout + SLACK_S),
        )
        conversation = Conversation(host, state.watch, "sandbox-fusion")
        try:
            await conversation.open()
            result = await result_or_gone(request, conversation, call)
        except Refused as exc:
            return refusal_response(exc)
        finally:
            conversation.close()
        if result is None:
            return Response(status_code=499)  # nobody is there to read it
        if not result.success or not isinstance(result.data, dict):
            return json_response(sandbox_error(result.error or "the run failed"))
        return json_response({key: result.data.get(key) for key in RESPONSE_KEYS})

    return [
        Route("/run_code", run_code, methods=["POST"]),
        Route("/v1/ping", ping, methods=["GET"]),
    ]
