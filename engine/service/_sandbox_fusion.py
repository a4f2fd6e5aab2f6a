"""SandboxFusion's endpoints, so that its clients switch by changing one URL: ``POST /run_code``,
``POST /run_jupyter`` and ``GET /v1/ping``.

``/run_code`` takes SandboxFusion's request (``code``, ``language``, ``stdin``,
``compile_timeout``, ``run_timeout``, ``memory_limit_MB``, ``files``, ``fetch_files``; other
fields are ignored, as it ignores them) and answers in its shape (``RunCodeResponse``): 200 with
``status`` ``Success``, ``Failed`` or ``SandboxError``, ``message``, ``compile_result``,
``run_result``, ``executor_pod_name``, ``files``. It is a mapping onto the ``run_code`` tool,
whose result has that shape already; ``LANGUAGES`` maps SandboxFusion's names to the tool's, one
entry each. A language not served (``NOT_SERVED`` names SandboxFusion's own with the reason), or
a call that could not run, is a ``SandboxError`` that says why. ``memory_limit_MB`` above 0 is
the run's ``memory_mb``. Beyond SandboxFusion's fields, ``cpu_time_limit`` limits the run's CPU
time as well (``run_timeout`` stays its wall-clock limit), and a step past a time limit says
which (``exceeded``: ``cpu_time`` or ``wall_time``).

``/run_jupyter`` takes its ``RunJupyterRequest`` (``cells``, ``cell_timeout``, ``total_timeout``,
``kernel`` ``python3``, ``files``, ``fetch_files``) and maps onto the ``python_cells`` tool: 200
with ``status``, ``message``, ``driver`` (how the run as a whole ended), ``cells`` (each one's
``stdout``, ``stderr``, ``display``, ``error``) and ``files``. Past ``total_timeout`` the status is
``Failed`` and the driver's ``TimeLimitExceeded``, as SandboxFusion has it; where SandboxFusion
then answers no cells, this answers those that ran. ``cell_timeout`` is kept (SandboxFusion's
kernel ignores it): a cell past it ends with a ``CellTimeoutError`` and the next one runs.
``memory_limit_MB`` is ignored, as SandboxFusion's jupyter mode ignores it; the engine's memory
limit per call holds.

The requests are read strictly (``RunCodeRequest``: a number where its schema says number, an
integer where it says integer), which is what SandboxFusion's clients (verl, its own SDK) send:
``memory_limit_MB`` an integer, the timeouts an integer or a float.

Clients that can only be given a URL pass the token as ``?token=`` (verl's
``sandbox_fusion_url``) or, for those that append ``/run_code`` to a base URL (SkyRL's
``SANDBOX_FUSION_URL``, SandboxFusion's own SDK), as a path prefix: ``http://host/t/TOKEN``.
"""

from __future__ import annotations

import signal
from typing import Any, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from a2e._codec import describe_validation_error
from a2e.adapters import SANDBOX_FUSION_LANGUAGES as LANGUAGES
from a2e.adapters import SANDBOX_FUSION_NOT_SERVED as NOT_SERVED
from a2e.caps.tools._models import ToolCallRequest, ToolResult
from a2e.caps.tools._reasons import FailureReason
from a2e_engine.engine.service._bodies import STRICT, BadRequest, read_model
from a2e_engine.engine.service._responses import json_response
from a2e_engine.engine.service._state import ServiceState
from a2e_engine.tools._python_cells import MAX_CELLS

__all__ = [
    "LANGUAGES",
    "NOT_SERVED",
    "PONG",
    "SLACK_S",
    "CommandRunResult",
    "RunCodeRequest",
    "RunCodeResponse",
    "RunJupyterRequest",
    "RunJupyterResponse",
    "as_sandbox_fusion_says",
    "call_tool",
    "not_served",
    "read_request",
    "run_code",
    "sandbox_error",
    "sandbox_fusion_routes",
]

#: Time the call gets past the program's own limits (starting it, writing files, fetching).
SLACK_S = 5
#: Time a ``/run_jupyter`` call gets past ``total_timeout`` (the files; nothing to compile).
JUPYTER_SLACK_S = 2
#: The longest call ``/run_code`` asks for; the engine's ``max_timeout`` caps it lower still.
#: It keeps two timeouts near a double's largest from adding up to infinity.
LONGEST_CALL_S = 10**9
#: ``/v1/ping``'s answer.
PONG = "pong"
Body = TypeVar("Body", bound=BaseModel)


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
    cpu_time_limit: float | None = Field(
        None, gt=0, lt=1e9, description="CPU seconds the run may spend (its wall: run_timeout)"
    )


class CommandRunResult(BaseModel):
    """One step, compile or run. Beyond SandboxFusion's fields: ``cpu_time``, ``peak_memory_kb``,
    ``memory_exceeded`` (the step went past its memory limit: ``Finished``, with the exit it
    had, as SandboxFusion says it), ``exceeded`` (the time limit it ran past: ``cpu_time`` or
    ``wall_time``), and the compile step's ``cached``."""

    model_config = ConfigDict(extra="allow")

    status: str = Field(description="Finished, Error (it could not start), TimeLimitExceeded")
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


class RunJupyterRequest(BaseModel):
    model_config = ConfigDict(**STRICT, extra="ignore")

    cells: list[str] = Field(max_length=MAX_CELLS)
    cell_timeout: float = Field(0, ge=0, description="seconds each cell may run; 0: no limit")
    total_timeout: float = Field(45, gt=0, description="seconds all cells may run")
    memory_limit_MB: int = Field(-1, description="ignored, as SandboxFusion ignores it here")
    kernel: Literal["python3"] = "python3"
    files: dict[str, str] = Field({}, description="path (relative) to base64 content")
    fetch_files: list[str] = []


class CellRunResult(BaseModel):
    """One cell, as a Jupyter kernel reports it; beyond SandboxFusion's: ``execution_time``."""

    model_config = ConfigDict(extra="allow")

    stdout: str
    stderr: str
    display: list[dict[str, Any]] = Field(description="MIME bundles: text/plain, text/html, ...")
    error: list[dict[str, Any]] = Field(description="ename, evalue, traceback")


class RunJupyterResponse(BaseModel):
    status: Literal["Success", "Failed", "SandboxError"]
    message: str
    driver: CommandRunResult | None
    cells: list[CellRunResult]
    executor_pod_name: str | None
    files: dict[str, str] = Field(description="path to base64 content, as fetch_files asked")


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
    answer = {name: data.get(name) for name in RunCodeResponse.model_fields}
    for step in ("compile_result", "run_result"):
        answer[step] = as_sandbox_fusion_says(answer[step])
    try:
        return RunCodeResponse.model_validate(answer)
    except ValidationError as exc:
        why = describe_validation_error(exc)
        return sandbox_error(f"the run_code tool's result is not SandboxFusion's: {why}")


def as_sandbox_fusion_says(step: Any) -> Any:
    """A step past its memory limit as SandboxFusion gives it: ``Finished``, with the exit of
    the program (1 for Python's ``MemoryError``; -9, SIGKILL, when it was killed for it). Its
    clients know no other status (verl scores an unknown one as a sandbox error, SandboxFusion's
    own client refuses it); ``memory_exceeded`` says what happened."""
    if not isinstance(step, dict) or step.get("status") != "MemoryLimitExceeded":
        return step
    code = step.get("return_code")
    return {
        **step,
        "status": "Finished",
        "return_code": code if isinstance(code, int) and code != 0 else -signal.SIGKILL,
        "memory_exceeded": True,
    }


def _jupyter_response(result: ToolResult) -> RunJupyterResponse:
    """The ``python_cells`` call's result in SandboxFusion's shape; a call killed at its
    deadline is the driver's ``TimeLimitExceeded``, another failure a ``SandboxError``."""
    seconds = result.duration_ms / 1000
    if not result.success:
        timed_out = result.reason == FailureReason.TIMEOUT
        return RunJupyterResponse(
            status="Failed" if timed_out else "SandboxError",
            message="" if timed_out else result.error or "the run failed",
            driver=CommandRunResult(
                status="TimeLimitExceeded" if timed_out else "Error",
                execution_time=seconds,
                return_code=None,
            ),
            cells=[],
            executor_pod_name=None,
            files={},
        )
    data = result.data if isinstance(result.data, dict) else {}
    finished = data.get("status") == "Finished"
    try:
        return RunJupyterResponse.model_validate(
            {
                "status": "Success" if finished else "Failed",
                "message": "",
                "driver": {
                    "status": "Finished" if finished else "TimeLimitExceeded",
                    "execution_time": seconds,
                    "return_code": 0 if finished else None,
                    "stdout": "",
                    "stderr": "",
                },
                "cells": data.get("cells"),
                "executor_pod_name": None,
                "files": data.get("files") or {},
            }
        )
    except ValidationError as exc:
        why = describe_validation_error(exc)
        return RunJupyterResponse(
            status="SandboxError",
            message=f"the python_cells tool's result is not SandboxFusion's: {why}",
            driver=None,
            cells=[],
            executor_pod_name=None,
            files={},
        )


async def call_tool(
    state: ServiceState, request: Request, tool_name: str, arguments: dict[str, Any], seconds: float
) -> ToolResult | Response:
    """The call's result, or the response that says why there is none; ``seconds`` is its
    deadline, rounded up to the protocol's whole seconds."""
    call = ToolCallRequest(
        tool_name=tool_name,
        arguments=arguments,
        timeout=min(seconds, LONGEST_CALL_S),  # type: ignore[arg-type]  # rounded up by the model
    )
    return await state.call_once(request, "sandbox-fusion", call)


def not_served(language: str) -> str | None:
    """Why SandboxFusion's ``language`` cannot run here, or None when it can."""
    if language in NOT_SERVED:
        return f"language {language!r} is not served here: {NOT_SERVED[language]}"
    if language not in LANGUAGES:
        served = ", ".join(sorted(LANGUAGES))
        return f"language {language!r} is not served here; served: {served}"
    return None


async def run_code(
    state: ServiceState, request: Request, body: RunCodeRequest
) -> RunCodeResponse | Response:
    """One ``/run_code`` request's answer, or the response that says why the engine gave none
    (overloaded, draining): also each run of a submission (``_sandbox_fusion_oj``)."""
    why = not_served(body.language)
    if why is not None:
        return sandbox_error(why)
    arguments: dict[str, Any] = {
        "language": LANGUAGES[body.language],
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
    if body.cpu_time_limit is not None:
        arguments["cpu_time_limit"] = body.cpu_time_limit
    seconds = body.compile_timeout + body.run_timeout + SLACK_S
    result = await call_tool(state, request, "run_code", arguments, seconds)
    if isinstance(result, Response):
        return result
    if not result.success:
        return sandbox_error(result.error or "the run failed")
    return _response(result.data)


async def read_request(state: ServiceState, request: Request, model: type[Body]) -> Body | Response:
    """The body read as ``model``; one that cannot be read is 422, SandboxFusion's status."""
    config = state.config
    try:
        return await read_model(
            request, model, config.max_message_bytes, config.request_timeout_s, state.bodies
        )
    except BadRequest as exc:
        state.metrics.reject(exc.error)
        if exc.status == 400:
            exc.status = 422
        return exc.response()


def sandbox_fusion_routes(state: ServiceState) -> list[Route]:
    async def ping(request: Request) -> Response:
        return json_response(PONG)

    async def run_code_route(request: Request) -> Response:
        body = await read_request(state, request, RunCodeRequest)
        if isinstance(body, Response):
            return body
        answer = await run_code(state, request, body)
        return answer if isinstance(answer, Response) else json_response(answer.wire())

    async def run_jupyter(request: Request) -> Response:
        body = await read_request(state, request, RunJupyterRequest)
        if isinstance(body, Response):
            return body
        arguments: dict[str, Any] = {
            "cells": body.cells,
            "cell_timeout": min(body.cell_timeout, LONGEST_CALL_S),
            "total_timeout": min(body.total_timeout, LONGEST_CALL_S),
            "files": body.files,
            "fetch_files": body.fetch_files,
        }
        seconds = body.total_timeout + JUPYTER_SLACK_S
        result = await call_tool(state, request, "python_cells", arguments, seconds)
        if isinstance(result, Response):
            return result
        return json_response(_jupyter_response(result).model_dump(mode="json"))

    return [
        Route("/run_code", run_code_route, methods=["POST"]),
        Route("/run_jupyter", run_jupyter, methods=["POST"]),
        Route("/v1/ping", ping, methods=["GET"]),
    ]
