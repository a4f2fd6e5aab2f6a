"""SandboxFusion's endpoints, so that its clients switch by changing one URL: ``POST /run_code``
and ``GET /v1/ping``.

``/run_code`` takes SandboxFusion's request (``code``, ``language``, ``stdin``,
``compile_timeout``, ``run_timeout``, ``memory_limit_MB``, ``files``, ``fetch_files``; other
fields are ignored, as it ignores them) and answers in its shape (``RunCodeResponse``): 200 with
``status`` ``Success``, ``Failed`` or ``SandboxError``, ``message``, ``compile_result``,
``run_result``, ``executor_pod_name``, ``files``. It is a mapping onto the ``run_code`` tool,
whose result has that shape already; ``LANGUAGES`` maps SandboxFusion's names to the tool's, one
entry each. A language not served, or a call that could not run, is a ``SandboxError`` that says
why. ``memory_limit_MB`` above 0 is the run's ``memory_mb``.

The request is read strictly (``RunCodeRequest``: a number where its schema says number, an
integer where it says integer), which is what SandboxFusion's clients (verl, its own SDK) send:
``memory_limit_MB`` an integer, the timeouts an integer or a float.

Clients that can only be given a URL pass the token as ``?token=`` (verl's
``sandbox_fusion_url``) or, for those that append ``/run_code`` to a base URL (SkyRL's
``SANDBOX_FUSION_URL``, SandboxFusion's own SDK), as a path prefix: ``http://host/t/TOKEN``.
"""

from __future__ import annotations

import math
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from a2e.caps.tools.models import ToolCallRequest
from a2e.codec import describe_validation_error
from a2e_engine.engine.host import Refused
from a2e_engine.engine.service.bodies import STRICT, BadRequest, read_model
from a2e_engine.engine.service.responses import json_response, result_or_gone
from a2e_engine.engine.service.state import ServiceState

__all__ = [
    "LANGUAGES",
    "PONG",
    "CommandRunResult",
    "RunCodeRequest",
    "RunCodeResponse",
    "sandbox_fusion_routes",
]

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
    "php": "php",
    "R": "r",
    "D_ut": "d",
    "csharp": "csharp",
    "pytest": "pytest",
    "junit": "junit",
    "verilog": "verilog",
    "js": "nodejs",
    "ts": "typescript",
}
#: Time the call gets past the program's own limits (starting it, writing files, fetching).
SLACK_S = 5
#: The longest call ``/run_code`` asks for; the engine's ``max_timeout`` caps it lower still.
#: It keeps two timeouts near a double's largest from adding up to infinity.
LONGEST_CALL_S = 10**9
#: ``/v1/ping``'s answer.
PONG = "pong"


class RunCodeRequest(BaseModel):
    model_config = ConfigDict(**STRICT, extra="ignore")

    code: str
    language: str = Field(description="one of LANGUAGES; another is a SandboxError")
    stdin: str | None = None
    compile_timeout: float = Field(10, gt=0, description="seconds")
    run_timeout: float = Field(10, gt=0, description="seconds")
    memory_limit_MB: int = Field(-1, description="above 0, the program's resident memory limit")
    files: dict[str, str | None] = Field({}, description="path (relative) to base64 content")
    fetch_files: list[str] = []


class CommandRunResult(BaseModel):
    """One step, compile or run. Beyond SandboxFusion's fields: ``cpu_time``, ``peak_memory_kb``,
    the status ``MemoryLimitExceeded``, and the compile step's ``cached``."""

    model_config = ConfigDict(extra="allow")

    status: str = Field(
        description="Finished, Error (it could not start), TimeLimitExceeded, MemoryLimitExceeded"
    )
    execution_time: float | None = None
    return_code: int | None = Field(None, description="null past a limit")
    stdout: str | None = None
    stderr: str | None = None
    cpu_time: float | None = None
    peak_memory_kb: int | None = None


class RunCodeResponse(BaseModel):
    status: Literal["Success", "Failed", "SandboxError"]
    message: str
    compile_result: CommandRunResult | None
    run_result: CommandRunResult | None
    executor_pod_name: str | None
    files: dict[str, str] = Field(description="path to base64 content, as fetch_files asked")

    def wire(self) -> dict[str, Any]:
        """SandboxFusion's keys in its order; a step's keys as the tool gave them."""
        return self.model_dump(mode="json", exclude_unset=True)


def sandbox_error(message: str) -> RunCodeResponse:
    return RunCodeResponse(
        status="SandboxError",
        message=message,
        compile_result=None,
        run_result=None,
        executor_pod_name=None,
        files={},
    )


def _response(data: Any) -> RunCodeResponse:
    """The tool's result as SandboxFusion's answer; one not in that shape (a plugin's own
    ``run_code``) is a ``SandboxError`` that says why."""
    if not isinstance(data, dict):
        return sandbox_error("the run_code tool's result is not an object")
    try:
        return RunCodeResponse.model_validate(
            {name: data.get(name) for name in RunCodeResponse.model_fields}
        )
    except ValidationError as exc:
        why = describe_validation_error(exc)
        return sandbox_error(f"the run_code tool's result is not SandboxFusion's: {why}")


def sandbox_fusion_routes(state: ServiceState) -> list[Route]:
    host, config = state.host, state.config

    async def ping(request: Request) -> Response:
        return json_response(PONG)

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
            why = f"language {body.language!r} is not served here; served: {served}"
            return json_response(sandbox_error(why).wire())
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
            timeout=math.ceil(
                min(body.compile_timeout + body.run_timeout + SLACK_S, LONGEST_CALL_S)
            ),
        )
        try:
            session = await host.open_session("sandbox-fusion", stateless=True)
        except Refused as exc:
            return state.refusal(exc)
        try:
            result = await result_or_gone(request, session, call)
        except Refused as exc:
            return state.refusal(exc)
        finally:
            session.close()
        if result is None:
            return Response(status_code=499)  # nobody is there to read it
        state.metrics.observe(result)
        if not result.success:
            return json_response(sandbox_error(result.error or "the run failed").wire())
        return json_response(_response(result.data).wire())

    return [
        Route("/run_code", run_code, methods=["POST"]),
        Route("/v1/ping", ping, methods=["GET"]),
    ]
