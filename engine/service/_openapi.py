"""The service's OpenAPI document (``/openapi.json``): the contract its HTTP endpoints keep.

Every schema in it is generated from a model a handler reads or answers with (the request's,
read strictly, so that what the document allows is what the handler takes, and the other way
round), and every status an endpoint can answer with is listed, with its body: the endpoint's
own, the host's refusals (``REFUSAL_STATUS``), a body that cannot be read, and what every request
may get before it reaches its endpoint (no token, the service draining, too many connections, a
head too large). A client generated from it, or a fuzzer checking the server against it, meets
no surprise. The token may also come as a path prefix (``/t/TOKEN/run_code``), which OpenAPI
cannot state: the security schemes name the other two ways.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel
from pydantic.json_schema import models_json_schema

from a2e.caps.tools._models import ToolResult
from a2e_engine.engine.service._bodies import ErrorBody
from a2e_engine.engine.service._metrics import CONTENT_TYPE
from a2e_engine.engine.service._probes import Liveness, Readiness
from a2e_engine.engine.service._request_heads import MAX_HEAD_BYTES
from a2e_engine.engine.service._responses import OTHER_REFUSAL_STATUS, REFUSAL_STATUS
from a2e_engine.engine.service._rest import RESULT_STATUS, CallBody, ToolList, ToolListQuery
from a2e_engine.engine.service._sandbox_fusion import (
    PONG,
    RunCodeRequest,
    RunCodeResponse,
    RunJupyterRequest,
    RunJupyterResponse,
)
from a2e_engine.engine.service._sandbox_fusion_oj_types import (
    EvalResult,
    GetPromptByIdRequest,
    GetPromptsRequest,
    OJErrorBody,
    Prompt,
    SubmitRequest,
)

__all__ = ["openapi_document"]

_REF = "#/components/schemas/{model}"
_MODELS: tuple[type[BaseModel], ...] = (
    ErrorBody,
    ToolListQuery,
    ToolList,
    CallBody,
    ToolResult,
    RunCodeRequest,
    RunCodeResponse,
    RunJupyterRequest,
    RunJupyterResponse,
    SubmitRequest,
    EvalResult,
    GetPromptsRequest,
    GetPromptByIdRequest,
    Prompt,
    OJErrorBody,
    Liveness,
    Readiness,
)
_TEXT = {"type": "string"}
_HEADERS = {
    "Retry-After": "seconds to wait before asking again",
    "WWW-Authenticate": "how to show the token: Bearer",
}


@dataclass(frozen=True)
class _Answer:
    """One way an operation can answer: answers that share a status are listed as one."""

    status: int
    description: str
    body: type[BaseModel] | dict[str, Any] | None = None
    media_type: str = "application/json"
    headers: tuple[str, ...] = ()


class _Document:
    def __init__(self, open_paths: frozenset[str], undrained_paths: frozenset[str]) -> None:
        self.open_paths = open_paths
        self.undrained_paths = undrained_paths
        refs, top = models_json_schema(
            [(model, "validation") for model in _MODELS], ref_template=_REF
        )
        self.refs = {model: ref for (model, _), ref in refs.items()}
        self.schemas: dict[str, Any] = top["$defs"]

    def schema(self, body: type[BaseModel] | dict[str, Any]) -> dict[str, Any]:
        return body if isinstance(body, dict) else self.refs[body]

    def query_parameters(self, model: type[BaseModel]) -> list[dict[str, Any]]:
        schema = self.schemas[self.refs[model]["$ref"].rpartition("/")[2]]
        required = set(schema.get("required", ()))
        return [
            {
                "name": name,
                "in": "query",
                "required": name in required,
                "description": field.get("description", ""),
                "schema": field,
            }
            for name, field in schema["properties"].items()
        ]

    def request_body(self, model: type[BaseModel], required: bool) -> dict[str, Any]:
        return {
            "required": required,
            "content": {"application/json": {"schema": self.schema(model)}},
        }

    def sandbox_fusion_post(
        self, summary: str, request: type[BaseModel], *answers: _Answer
    ) -> dict[str, Any]:
        """One of SandboxFusion's POSTs: a body it must read (422 where it cannot), and the
        host's refusals."""
        return {
            "method": "post",
            "summary": summary,
            "requestBody": self.request_body(request, required=True),
            "answers": [*answers, *_unreadable(422), *_refusals()],
        }

    def responses(self, path: str, answers: Iterable[_Answer]) -> dict[str, Any]:
        grouped: dict[int, list[_Answer]] = {}
        for answer in (*answers, *self.before_the_endpoint(path)):
            grouped.setdefault(answer.status, []).append(answer)
        return {str(status): self.response(grouped[status]) for status in sorted(grouped)}

    def response(self, answers: Sequence[_Answer]) -> dict[str, Any]:
        descriptions = dict.fromkeys(answer.description for answer in answers)
        response: dict[str, Any] = {"description": "; or ".join(descriptions)}
        content: dict[str, list[dict[str, Any]]] = {}
        for answer in answers:
            if answer.body is not None:
                schemas = content.setdefault(answer.media_type, [])
                if self.schema(answer.body) not in schemas:
                    schemas.append(self.schema(answer.body))
        if content:
            response["content"] = {
                media_type: {"schema": schemas[0] if len(schemas) == 1 else {"anyOf": schemas}}
                for media_type, schemas in content.items()
            }
        named = dict.fromkeys(name for answer in answers for name in answer.headers)
        if named:
            response["headers"] = {
                name: {
                    "description": _HEADERS[name],
                    "required": all(name in answer.headers for answer in answers),
                    "schema": _TEXT,
                }
                for name in named
            }
        return response

    def before_the_endpoint(self, path: str) -> list[_Answer]:
        """What any request to ``path`` may get from the layers in front of its handler."""
        answers = [
            _Answer(
                431,
                f"the request line and headers are over {MAX_HEAD_BYTES} bytes",
                ErrorBody,
            ),
            _Answer(503, "too many connections at once (max_connections)", _TEXT, "text/plain"),
        ]
        if path not in self.open_paths:
            answers.append(
                _Answer(401, "no token, or a wrong one", ErrorBody, headers=("WWW-Authenticate",))
            )
        if path not in self.undrained_paths:
            answers.append(
                _Answer(
                    503,
                    "the service is shutting down: ask another instance",
                    ErrorBody,
                    headers=("Retry-After",),
                )
            )
        return answers

    def security(self, path: str) -> dict[str, Any]:
        return {"security": []} if path in self.open_paths else {}


def _refusals() -> list[_Answer]:
    """The host turning a request away (``refusal_response``); ``error`` says why."""
    answers = [
        _Answer(
            status,
            f"the engine refused: {code}",
            ErrorBody,
            headers=("Retry-After",) if status == 429 else (),
        )
        for code, status in REFUSAL_STATUS.items()
    ]
    answers.append(_Answer(OTHER_REFUSAL_STATUS, "the engine failed: internal_error", ErrorBody))
    return answers


def _cannot_judge() -> list[_Answer]:
    """SandboxFusion's dataset endpoints' own refusals, in its shape (``{"detail"}``)."""
    return [
        _Answer(400, "the dataset or its rows cannot be judged: detail says why", OJErrorBody),
        _Answer(500, "a run the sandbox could not make: detail says why", OJErrorBody),
    ]


def _unreadable(status: int) -> list[_Answer]:
    """A body ``read_model`` cannot read: ``status`` for one that is not the model's."""
    return [
        _Answer(status, "the body is not JSON, or not the request (the field is named)", ErrorBody),
        _Answer(408, "the body did not arrive in time (request_timeout_s)", ErrorBody),
        _Answer(413, "the body is over the limit (max_message_bytes)", ErrorBody),
    ]


def openapi_document(
    version: str,
    open_paths: frozenset[str] = frozenset(),
    undrained_paths: frozenset[str] = frozenset(),
) -> dict[str, Any]:
    """``open_paths`` want no token; ``undrained_paths`` still answer while the service drains."""
    doc = _Document(open_paths, undrained_paths)
    result_statuses = [
        _Answer(status, f"no tool ran: reason {reason}", ToolResult)
        for reason, status in RESULT_STATUS.items()
    ]
    operations: dict[str, dict[str, Any]] = {
        "/v1/tools": {
            "summary": "List the tools, or search them",
            "parameters": doc.query_parameters(ToolListQuery),
            "answers": [
                _Answer(200, "the tools", ToolList),
                _Answer(400, "a query parameter is not as its schema says", ErrorBody),
                *_refusals(),
            ],
        },
        "/v1/tools/{tool_name}": {
            "method": "post",
            "summary": "Call a tool in a fresh sandboxed worker",
            "description": "With Accept: text/event-stream, the call's events as server-sent "
            "events ('tool/event'), then 'result' with the ToolResult, or 'error' with an Error "
            "if the engine turned the call away.",
            "parameters": [
                {"name": "tool_name", "in": "path", "required": True, "schema": _TEXT},
            ],
            "requestBody": doc.request_body(CallBody, required=False),
            "answers": [
                _Answer(200, "the result, whatever the tool did", ToolResult),
                _Answer(200, "the result, whatever the tool did", _TEXT, "text/event-stream"),
                *result_statuses,
                *_unreadable(400),
                *_refusals(),
            ],
        },
        "/run_code": doc.sandbox_fusion_post(
            "SandboxFusion's run_code",
            RunCodeRequest,
            _Answer(200, "how the run went, SandboxFusion's RunCodeResponse", RunCodeResponse),
        ),
        "/run_jupyter": doc.sandbox_fusion_post(
            "SandboxFusion's run_jupyter: Python cells in one interpreter",
            RunJupyterRequest,
            _Answer(
                200, "how the cells went, SandboxFusion's RunJupyterResponse", RunJupyterResponse
            ),
        ),
        "/submit": doc.sandbox_fusion_post(
            "SandboxFusion's submit: a completion judged against the row given with it",
            SubmitRequest,
            _Answer(200, "the verdict, SandboxFusion's EvalResult", EvalResult),
            *_cannot_judge(),
        ),
        "/get_prompts": doc.sandbox_fusion_post(
            "SandboxFusion's get_prompts: the prompts of the rows given",
            GetPromptsRequest,
            _Answer(200, "a prompt per row", {"type": "array", "items": doc.schema(Prompt)}),
            *_cannot_judge(),
        ),
        "/get_prompt_by_id": doc.sandbox_fusion_post(
            "SandboxFusion's get_prompt_by_id: the prompt of the row given",
            GetPromptByIdRequest,
            _Answer(200, "the row's prompt", Prompt),
            *_cannot_judge(),
        ),
        "/list_ids": doc.sandbox_fusion_post(
            "SandboxFusion's list_ids: the ids of the rows given",
            GetPromptsRequest,
            _Answer(200, "their ids", {"type": "array", "items": {"type": ["integer", "string"]}}),
            *_cannot_judge(),
        ),
        "/list_datasets": {
            "summary": "SandboxFusion's list_datasets: the dataset ids whose classes are served",
            "answers": [_Answer(200, "dataset ids", {"type": "array", "items": _TEXT})],
        },
        "/v1/ping": {
            "summary": "SandboxFusion's ping",
            "answers": [_Answer(200, "pong", {"type": "string", "enum": [PONG]})],
        },
        "/healthz": {
            "summary": "The process is alive",
            "answers": [_Answer(200, "alive", Liveness)],
        },
        "/readyz": {
            "summary": "Calls can run now",
            "answers": [
                _Answer(200, "ready", Readiness),
                _Answer(503, "not ready, or draining: reason says why", Readiness),
            ],
        },
        "/metrics": {
            "summary": "Prometheus text",
            "answers": [_Answer(200, "the metrics", _TEXT, CONTENT_TYPE.partition(";")[0])],
        },
        "/openapi.json": {
            "summary": "This document",
            "answers": [_Answer(200, "the OpenAPI document", {"type": "object"})],
        },
    }
    paths: dict[str, Any] = {}
    for path, spec in operations.items():
        method = spec.pop("method", "get")
        answers = spec.pop("answers")
        paths[path] = {
            method: {
                **spec,
                **doc.security(path),
                "responses": doc.responses(path, answers),
            }
        }
    return {
        "openapi": "3.1.0",
        "info": {"title": "a2e-engine", "version": version},
        "components": {
            "schemas": doc.schemas,
            "securitySchemes": {
                "bearer": {"type": "http", "scheme": "bearer"},
                "query_token": {"type": "apiKey", "in": "query", "name": "token"},
                "api_key": {"type": "apiKey", "in": "header", "name": "X-API-Key"},
            },
        },
        "security": [{"bearer": []}, {"query_token": []}, {"api_key": []}],
        "paths": paths,
    }
