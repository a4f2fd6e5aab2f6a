"""``/openapi.json`` is the contract of ``a2e serve --http``: schemathesis checks a real server
against it (every check it has: statuses, content types, headers, response schemas, and that
what the document refuses the server refuses, and the other way round), and each way it was
once broken is a test of its own.

The server has a token (the auth path is part of the contract) and ``--max-timeout 3``, so that
no generated call can hold the run.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import httpx
import pytest
from pydantic import BaseModel

from a2e.caps.tools._models import ToolResult
from a2e_engine.engine.service._bodies import ErrorBody
from a2e_engine.engine.service._probes import Liveness, Readiness
from a2e_engine.engine.service._rest import CallBody, ToolList
from a2e_engine.engine.service._sandbox_fusion import (
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
from tests.service_process import ServiceProcess

TOKEN = "contract-tests-token"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
HOOKS = Path(__file__).with_name("schemathesis_hooks.py")
#: Fixed, so that each run tries the same cases and a failure reproduces (st run --seed).
SEED = "20261203"
#: A schema-valid call may still be 400 (invalid_arguments) when its arguments do not fit the
#: tool's input_parameters, which the document cannot state for every tool.
TOOL_RUNS_CONFIG = """
[[operations]]
include-path = "/v1/tools/{tool_name}"
parameters = { tool_name = "python_eval" }
checks.positive_data_acceptance.expected-statuses = ["2xx", "400", "401", "403", "404", "409", "429", "5xx"]
"""
#: SandboxFusion's dataset endpoints answer a schema-valid request 400 when its dataset, class
#: or rows cannot be judged (which dataset names and rows can, the document cannot state).
ONLINE_JUDGE_CONFIG = "".join(
    f"""
[[operations]]
include-path = "{path}"
checks.positive_data_acceptance.expected-statuses = ["2xx", "400", "401", "429", "5xx"]
"""
    for path in ("/submit", "/get_prompts", "/get_prompt_by_id", "/list_ids")
)


@pytest.fixture(scope="module")
def service() -> Iterator[ServiceProcess]:
    server = ServiceProcess("--token", TOKEN, "--max-timeout", "3")
    yield server
    assert server.stop() == 0


@pytest.fixture()
def http(service: ServiceProcess) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=service.url, headers=AUTH, timeout=30) as client:
        yield client


@pytest.fixture(scope="module")
def document(service: ServiceProcess) -> dict[str, Any]:
    response = httpx.get(f"{service.url}/openapi.json", headers=AUTH, timeout=30)
    assert response.status_code == 200
    return dict(response.json())


def _schemathesis(
    service: ServiceProcess,
    tmp_path: Path,
    config: str = "",
    only: Sequence[str] = (),
    env: dict[str, str] | None = None,
) -> None:
    """``st run --checks all`` against ``service`` (with the TOML ``config``, on the paths
    ``only``), bounded; fails with schemathesis's report."""
    settings = tmp_path / "schemathesis.toml"
    settings.write_text(config)
    command = [
        sys.executable,
        "-m",
        "schemathesis.cli",
        "--config-file",
        str(settings),
        "run",
        *(option for path in only for option in ("--include-path", path)),
        f"{service.url}/openapi.json",
        "--checks",
        "all",
        "--header",
        f"Authorization: Bearer {TOKEN}",
        "--max-examples",
        "30",
        "--workers",
        "2",
        "--seed",
        SEED,
        "--request-timeout",
        "20",
        "--no-color",
    ]
    # In a directory of its own: no example database carried from one run to the next.
    finished = subprocess.run(
        command,
        cwd=tmp_path,
        env={**os.environ, **(env or {})},
        capture_output=True,
        text=True,
        timeout=120,
    )
    report = finished.stdout + finished.stderr
    assert finished.returncode == 0 and "Failures:" not in report, report[-8000:]
    assert " passed" in report, report[-8000:]


def _documented(document: dict[str, Any], method: str, path: str, response: httpx.Response) -> None:
    """The response's status is listed for the operation, with its content type."""
    listed = document["paths"][path][method]["responses"]
    assert str(response.status_code) in listed, (response.status_code, sorted(listed))
    content = listed[str(response.status_code)].get("content", {})
    media_type = response.headers.get("content-type", "").partition(";")[0]
    assert media_type in content, (response.status_code, media_type, sorted(content))


# -- schemathesis --


def test_the_whole_api_keeps_its_contract(service: ServiceProcess, tmp_path: Path) -> None:
    """As a client sees it: every operation, any tool name (unknown ones: 404)."""
    _schemathesis(service, tmp_path, ONLINE_JUDGE_CONFIG)


def test_tool_calls_and_runs_keep_their_contract(service: ServiceProcess, tmp_path: Path) -> None:
    """Calls of python_eval and SandboxFusion runs that reach the sandbox, their results checked
    against the document (tests/schemathesis_hooks.py shapes the bodies)."""
    _schemathesis(
        service,
        tmp_path,
        TOOL_RUNS_CONFIG,
        only=("/v1/tools/{tool_name}", "/run_code"),
        env={"SCHEMATHESIS_HOOKS": str(HOOKS)},
    )


# -- the document is built from the models the handlers use --


@pytest.mark.parametrize(
    "model",
    [
        ErrorBody,
        CallBody,
        ToolResult,
        ToolList,
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
        Readiness,
        Liveness,
    ],
)
def test_each_schema_is_its_model(document: dict[str, Any], model: type[BaseModel]) -> None:
    schema = model.model_json_schema(ref_template="#/components/schemas/{model}")
    schema.pop("$defs", None)
    assert document["components"]["schemas"][model.__name__] == schema


# -- each contract failure schemathesis once found --


@pytest.mark.parametrize("path", ["/metrics", "/readyz", "/v1/ping"])
def test_the_operations_statuses_are_documented(
    service: ServiceProcess, http: httpx.Client, document: dict[str, Any], path: str
) -> None:
    _documented(document, "get", path, http.get(path))
    _documented(document, "get", path, httpx.get(f"{service.url}{path}", timeout=30))
    listed = document["paths"][path]["get"]["responses"]
    assert {"401", "431", "503"} <= set(listed)


def test_include_deferred_is_a_boolean_as_the_document_says(
    http: httpx.Client, document: dict[str, Any]
) -> None:
    for given in ("null", "1", "yes", "True", ""):
        refused = http.get("/v1/tools", params={"include_deferred": given})
        assert refused.status_code == 400, given
        assert refused.json()["message"].startswith("include_deferred: "), refused.text
        _documented(document, "get", "/v1/tools", refused)
    twice = http.get("/v1/tools?include_deferred=true&include_deferred=true")
    assert twice.status_code == 400 and "once" in twice.json()["message"]
    for given in ("true", "false"):
        listed = http.get("/v1/tools", params={"include_deferred": given, "tags": "judge"})
        assert listed.status_code == 200, listed.text
        assert [tool["name"] for tool in listed.json()["tools"]] == ["code_eval", "run_code"]
        _documented(document, "get", "/v1/tools", listed)


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("memory_limit_MB", False),
        ("memory_limit_MB", 1024.5),
        ("memory_limit_MB", "1024"),
        ("run_timeout", "10"),
        ("compile_timeout", True),
        ("stdin", 5),
        ("fetch_files", "out.txt"),
    ],
)
def test_run_code_refuses_what_its_schema_refuses(
    http: httpx.Client, document: dict[str, Any], field: str, value: object
) -> None:
    body = {"code": "print(1)", "language": "python", field: value}
    refused = http.post("/run_code", json=body)
    assert refused.status_code == 422, refused.text
    assert refused.json()["message"].startswith(f"{field}: "), refused.text
    _documented(document, "post", "/run_code", refused)


def test_run_code_takes_what_sandbox_fusion_clients_send(
    http: httpx.Client, document: dict[str, Any]
) -> None:
    """verl and SandboxFusion's SDK: memory_limit_MB an integer, the timeouts an integer or a
    float, and fields this server does not read (ignored, as SandboxFusion ignores unknown
    ones)."""
    for timeouts in ({"compile_timeout": 10, "run_timeout": 10}, {"run_timeout": 2.5}):
        body: dict[str, object] = {
            "code": "print(6 * 7)",
            "language": "python",
            "stdin": None,
            "memory_limit_MB": 512,
            "files": {},
            "fetch_files": [],
            "args": [],
            "client_version": "0.1",
            "compile_timeout": 10.0,
            **timeouts,
        }
        answer = http.post("/run_code", json=body)
        assert answer.status_code == 200, answer.text
        assert answer.json()["run_result"]["stdout"] == "42\n"
        _documented(document, "post", "/run_code", answer)


def test_run_code_wants_a_body(http: httpx.Client, document: dict[str, Any]) -> None:
    operation = document["paths"]["/run_code"]["post"]
    assert operation["requestBody"]["required"] is True
    assert set(document["components"]["schemas"]["RunCodeRequest"]["required"]) == {
        "code",
        "language",
    }
    for headers in ({}, {"Content-Type": "application/json"}):
        refused = http.post("/run_code", headers=headers)
        assert refused.status_code == 422, refused.text
        assert refused.json()["message"] == "code: Field required; language: Field required"
        _documented(document, "post", "/run_code", refused)


def test_run_code_timeouts_past_a_double_are_refused_or_capped(
    http: httpx.Client, document: dict[str, Any]
) -> None:
    """1e400 parses to infinity, and two timeouts near a double's largest add up to it: neither
    may reach the arithmetic of the call's own timeout."""
    infinite = http.post(
        "/run_code",
        content=b'{"code": "print(1)", "language": "python", "run_timeout": 1e400}',
        headers={"Content-Type": "application/json"},
    )
    assert infinite.status_code == 422, infinite.text
    assert infinite.json()["message"] == "run_timeout: Input should be a finite number"
    _documented(document, "post", "/run_code", infinite)
    huge = {"code": "print(1)", "language": "python", "run_timeout": 1e308}
    answer = http.post("/run_code", json={**huge, "compile_timeout": 1e308})
    assert answer.status_code == 200, answer.text
    assert answer.json()["status"] == "Success"
    _documented(document, "post", "/run_code", answer)


@pytest.mark.parametrize("timeout", [-1, 0, -0.5])
def test_a_call_timeout_is_positive_as_the_document_says(
    http: httpx.Client, document: dict[str, Any], timeout: float
) -> None:
    stated = document["components"]["schemas"]["CallBody"]["properties"]["timeout"]
    assert stated["type"] == "number" and stated["exclusiveMinimum"] == 0
    refused = http.post(
        "/v1/tools/python_eval", json={"arguments": {"code": "1"}, "timeout": timeout}
    )
    assert refused.status_code == 400, refused.text
    assert refused.json() == {
        "error": "invalid_request",
        "message": "timeout: Input should be greater than 0",
    }
    _documented(document, "post", "/v1/tools/{tool_name}", refused)


@pytest.mark.parametrize("timeout", ["true", '"5"', "1e400", "{}"])
def test_a_call_timeout_is_a_finite_number(
    http: httpx.Client, document: dict[str, Any], timeout: str
) -> None:
    """``timeout`` as JSON text: 1e400 parses to infinity, which the model refuses."""
    refused = http.post(
        "/v1/tools/python_eval",
        content=b'{"arguments": {"code": "1"}, "timeout": %s}' % timeout.encode(),
        headers={"Content-Type": "application/json"},
    )
    assert refused.status_code == 400, refused.text
    assert refused.json()["message"].startswith("timeout: "), refused.text
    _documented(document, "post", "/v1/tools/{tool_name}", refused)


def test_every_answer_of_a_call_is_documented(http: httpx.Client, document: dict[str, Any]) -> None:
    path = "/v1/tools/{tool_name}"
    ran = http.post(
        "/v1/tools/python_eval", json={"arguments": {"code": "print(1)"}, "timeout": 2.5}
    )
    assert ran.status_code == 200 and ran.json()["success"]
    invalid = http.post("/v1/tools/python_eval", json={"arguments": {"code": 5}})
    assert invalid.status_code == 400 and invalid.json()["reason"] == "invalid_arguments"
    unknown = http.post("/v1/tools/nope", json={})
    assert unknown.status_code == 404 and unknown.json()["reason"] == "unknown_tool"
    unreadable = http.post(
        "/v1/tools/python_eval", content=b"{", headers={"Content-Type": "application/json"}
    )
    assert unreadable.status_code == 400 and unreadable.json()["error"] == "invalid_json"
    for response in (ran, invalid, unknown, unreadable):
        _documented(document, "post", path, response)
    answers = document["paths"][path]["post"]["responses"]["400"]["content"]["application/json"]
    assert answers["schema"] == {
        "anyOf": [
            {"$ref": "#/components/schemas/ToolResult"},
            {"$ref": "#/components/schemas/ErrorBody"},
        ]
    }


@pytest.mark.parametrize(("sent", "name"), [("a%2Fb", "a/b"), ("a%0Ab", "a\nb"), ("%2F", "/")])
def test_any_tool_name_reaches_the_handler(
    http: httpx.Client, document: dict[str, Any], sent: str, name: str
) -> None:
    """A name with a slash or a newline is a tool's name like any other: here an unknown one,
    answered as the document says (not the router's plain-text 404)."""
    unknown = http.post(f"/v1/tools/{sent}", json={})
    assert unknown.status_code == 404, unknown.text
    assert unknown.json()["reason"] == "unknown_tool" and unknown.json()["tool_name"] == name
    _documented(document, "post", "/v1/tools/{tool_name}", unknown)


def test_refusals_before_the_handler_are_documented(
    service: ServiceProcess, document: dict[str, Any]
) -> None:
    no_token = httpx.post(f"{service.url}/run_code", json={"code": "1", "language": "python"})
    assert no_token.status_code == 401
    assert no_token.json() == {
        "error": "unauthorized",
        "message": "missing token: send 'Authorization: Bearer <token>', 'X-API-Key: <token>' or ?token=",
    }
    _documented(document, "post", "/run_code", no_token)
    for path, operation in document["paths"].items():
        for method, spec in operation.items():
            listed = spec["responses"]
            assert {"431", "503"} <= set(listed), (method, path)
            assert ("401" in listed) == (path != "/healthz"), (method, path)
    assert document["paths"]["/healthz"]["get"]["security"] == []
