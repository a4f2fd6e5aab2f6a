"""SandboxFusion's online-judge API for rows that come with the request: ``POST /submit``,
``/get_prompts``, ``/get_prompt_by_id``, ``/list_ids`` and ``GET /list_datasets``, so that its
own client (``sandbox_fusion.submit``) and the harnesses built on it switch by changing a URL.

Every request names a dataset: a dataset id SandboxFusion registers (``code_contests``,
``humaneval_python``, ``mbpp``, ...) picks its class, and any other name takes the class from
``config.dataset_type`` (``_sandbox_fusion_datasets``). The rows are ``config.provided_data``:
a list for ``/get_prompts`` and ``/list_ids`` (whose ``offset`` and ``limit`` it ignores, as
SandboxFusion does with provided rows), one row for ``/get_prompt_by_id`` and ``/submit``. This
engine keeps no dataset tables: a request without rows is a 400 that says so, and
``/list_datasets`` names the dataset ids whose classes are served.

A submission is judged by ``code_eval``, each call of it a call of the engine's: a CommonOJ
row's cases in batches, a one-run dataset's program by its exit (``by_exit``); a run that
brings files goes through ``/run_code``'s path (``_sandbox_fusion.run_code``), which takes
them. An engine that cannot take a run now (overloaded, draining) answers the whole request as
it answers ``/run_code``. Errors are
SandboxFusion's: ``{"detail": ...}`` with 400 for a request it cannot judge, 500 for a run the
sandbox could not make, 422 for a body that does not read as its model.
"""

from __future__ import annotations

from typing import Any, cast

from pydantic import BaseModel, ValidationError
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from a2e._codec import describe_validation_error
from a2e.caps.tools._models import ToolResult
from a2e.caps.tools._reasons import FailureReason
from a2e_engine.engine.service._responses import json_response
from a2e_engine.engine.service._sandbox_fusion import (
    RunCodeRequest,
    RunCodeResponse,
    call_tool,
    read_request,
    run_code,
)
from a2e_engine.engine.service._sandbox_fusion_datasets._base import (
    MAX_COMPLETION_CHARS,
    MAX_ROWS,
    DatasetType,
    OJError,
    Sandbox,
    bounded,
)
from a2e_engine.engine.service._sandbox_fusion_datasets._registry import (
    DATASET_TYPES,
    dataset_type_of,
)
from a2e_engine.engine.service._sandbox_fusion_oj_types import (
    GetPromptByIdRequest,
    GetPromptsRequest,
    SubmitRequest,
    TestConfig,
)
from a2e_engine.engine.service._state import ServiceState

__all__ = ["online_judge_routes"]

#: Where a verdict is reached out of the program's reach: ``code_eval``'s function tests and
#: stdin/stdout cases (docs/grading.md).
UNFORGEABLE_MODE = (
    "code_eval: Python function tests judged outside the program's process, and stdin/stdout "
    "cases compared outside it"
)


class _Refused(Exception):
    """The engine's answer to a run it did not make (429, 503): the request's answer too."""

    def __init__(self, response: Response) -> None:
        super().__init__("refused")
        self.response = response


def _rows(config: TestConfig) -> list[dict[str, Any]]:
    return cast(list[dict[str, Any]], _provided(config, list, "a list of str -> str | int"))


def _row(config: TestConfig) -> dict[str, Any]:
    return cast(dict[str, Any], _provided(config, dict, "a dict with str -> str | int"))


def _provided(config: TestConfig, kind: type, otherwise: str) -> Any:
    """The rows given, as ``kind``; SandboxFusion's sentence where they are not."""
    rows = config.provided_data
    if not rows:
        raise OJError(400, _NO_TABLES)
    if not isinstance(rows, kind):
        raise OJError(400, f"request.config.provided_data should be {otherwise}")
    if isinstance(rows, list) and len(rows) > MAX_ROWS:
        raise OJError(400, f"at most {MAX_ROWS} rows a request, got {len(rows)}")
    return rows


_NO_TABLES = (
    "this engine keeps no dataset tables: give the rows in config.provided_data "
    "(a list for /get_prompts and /list_ids, one row for /get_prompt_by_id and /submit)"
)


def _trust(kind: DatasetType) -> dict[str, Any]:
    """What a result says of how far its verdict can be trusted: whether the program could
    have forged it, and where it could not have."""
    if not kind.forgeable:
        return {"forgeable": False}
    return {"forgeable": True, "unforgeable_mode": UNFORGEABLE_MODE}


def _dumped(answer: BaseModel) -> dict[str, Any]:
    """``answer`` as JSON data; a row's labels nested deeper than pydantic writes are a 400."""
    try:
        return answer.model_dump(mode="json")
    except (ValueError, RecursionError) as exc:
        raise OJError(400, f"the answer cannot be written as JSON: {exc}") from None


def _judged(result: ToolResult) -> dict[str, Any]:
    """A ``code_eval`` call's verdict; what it refused (a checker that is no checker) is the
    request's 400, a call that did not finish a 500, as SandboxFusion answers a run it could not
    make."""
    if result.success and isinstance(result.data, dict):
        return result.data
    error = result.error or "the judge gave no verdict"
    refused = result.reason == FailureReason.INVALID_ARGUMENTS
    if refused or error.startswith(_REFUSED):
        raise OJError(400, error.removeprefix(_REFUSED))
    raise OJError(500, f"failed to request sandbox: {error}")


#: How a tool's refusal of its arguments reads (``sandbox._worker``).
_REFUSED = "ValueError: "


def online_judge_routes(state: ServiceState) -> list[Route]:
    async def answered(request: Request, model: Any, handle: Any) -> Response:
        body = await read_request(state, request, model)
        if isinstance(body, Response):
            return body
        try:
            return json_response(await handle(request, body))
        except OJError as exc:
            return json_response({"detail": exc.detail}, status=exc.status)
        except ValidationError as exc:  # a row's id, prompt or labels of the wrong kind
            return json_response({"detail": describe_validation_error(exc)}, status=400)
        except _Refused as refused:
            return refused.response

    async def prompts(request: Request, body: GetPromptsRequest) -> list[dict[str, Any]]:
        kind = dataset_type_of(body.dataset, body.config)
        listed = kind.prompts(_rows(body.config), body.dataset, body.config)
        return [_dumped(prompt) for prompt in listed]

    async def ids(request: Request, body: GetPromptsRequest) -> list[Any]:
        return [prompt["id"] for prompt in await prompts(request, body)]

    async def prompt_by_id(request: Request, body: GetPromptByIdRequest) -> dict[str, Any]:
        kind = dataset_type_of(body.dataset, body.config)
        return _dumped(kind.prompt(_row(body.config), body.dataset, body.config))

    async def submit(request: Request, body: SubmitRequest) -> dict[str, Any]:
        bounded(len(body.completion), "the completion", MAX_COMPLETION_CHARS)
        kind = dataset_type_of(body.dataset, body.config)
        row = _row(body.config)

        async def run(program: RunCodeRequest) -> RunCodeResponse:
            answer = await run_code(state, request, program)
            if isinstance(answer, Response):
                raise _Refused(answer)
            return answer

        async def judge(arguments: dict[str, Any], seconds: float) -> dict[str, Any]:
            result = await call_tool(state, request, "code_eval", arguments, seconds)
            if isinstance(result, Response):
                raise _Refused(result)
            return _judged(result)

        sandbox = Sandbox(run, judge, state.host.status().max_timeout)
        result = await kind.submit(body, row, sandbox)
        result.extra = {**(result.extra or {}), **_trust(kind)}
        return _dumped(result)

    async def list_datasets(request: Request) -> Response:
        return json_response([i for kind in DATASET_TYPES.values() for i in kind.dataset_ids])

    async def get_prompts_route(request: Request) -> Response:
        return await answered(request, GetPromptsRequest, prompts)

    async def list_ids_route(request: Request) -> Response:
        return await answered(request, GetPromptsRequest, ids)

    async def get_prompt_by_id_route(request: Request) -> Response:
        return await answered(request, GetPromptByIdRequest, prompt_by_id)

    async def submit_route(request: Request) -> Response:
        return await answered(request, SubmitRequest, submit)

    return [
        Route("/submit", submit_route, methods=["POST"]),
        Route("/get_prompts", get_prompts_route, methods=["POST"]),
        Route("/get_prompt_by_id", get_prompt_by_id_route, methods=["POST"]),
        Route("/list_ids", list_ids_route, methods=["POST"]),
        Route("/list_datasets", list_datasets, methods=["GET"]),
    ]
