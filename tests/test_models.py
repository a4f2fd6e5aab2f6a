"""The wire contract: the spec's examples, defaults, and errors that name the problem."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from a2e._codec import ProtocolError, decode, encode
from a2e._messages import A2ECapability, A2EError, ErrorCode, HandshakeRequest, HandshakeResponse
from a2e.caps.tools._models import (
    EventKind,
    ToolCallRequest,
    ToolCallResponse,
    ToolCancelRequest,
    ToolDefinition,
    ToolErrorCode,
    ToolEvent,
    ToolListRequest,
    ToolParameter,
    ToolResult,
)

SPEC = Path(__file__).resolve().parents[2] / "shared" / "spec" / "tools-capability.txt"

SPEC_EXAMPLES = [
    '{"type":"tool/list/req","id":"a1b2c3","version":"1.0","ts":1716123456.789,"filter_kind":"","filter_tags":[]}',
    '{"type":"tool/list/resp","id":"d4e5f6","version":"1.0","ts":1716123456.800,"req_id":"a1b2c3","tools":[{"name":"read_file","description":"Read file contents","input_parameters":[{"name":"path","type":"string","description":"File path","required":true}],"output_parameters":[],"streaming":true,"idempotent":true,"tags":["fs"],"version":"1.0.0","toolkit":null}]}',
    '{"type":"tool/call/req","id":"g7h8i9","version":"1.0","ts":1716123457.100,"session_id":"s1k2l3","tool_name":"read_file","arguments":{"path":"/etc/hostname"},"correlation_id":"","streaming":true,"timeout":30}',
    '{"type":"tool/event","id":"j0k1l2","version":"1.0","ts":1716123457.150,"kind":"progress","req_id":"g7h8i9","data":{"pct":50,"message":"Reading..."},"seq":0}',
    '{"type":"tool/call/resp","id":"m3n4o5","version":"1.0","ts":1716123457.200,"req_id":"g7h8i9","data":{"success":true,"tool_name":"read_file","data":{"content":"my-host"},"duration_ms":100},"created_at":1716123457.200}',
]


def test_the_examples_here_are_the_specs_own() -> None:
    if not SPEC.exists():
        pytest.skip("shared/spec is not beside this checkout")
    lines = {line.strip() for line in SPEC.read_text().splitlines()}
    for example in SPEC_EXAMPLES:
        assert example in lines


def _contains(expected: object, actual: object) -> bool:
    """Every key of ``expected`` is in ``actual`` with an equal value (recursively)."""
    if isinstance(expected, dict):
        return isinstance(actual, dict) and all(
            k in actual and _contains(v, actual[k]) for k, v in expected.items()
        )
    if isinstance(expected, list):
        return (
            isinstance(actual, list)
            and len(expected) == len(actual)
            and all(_contains(e, a) for e, a in zip(expected, actual, strict=True))
        )
    return expected == actual


@pytest.mark.parametrize("line", SPEC_EXAMPLES)
def test_spec_examples_round_trip(line: str) -> None:
    message = decode(line)
    dumped = json.loads(encode(message))
    assert _contains(json.loads(line), dumped)
    assert decode(encode(message)) == message


def test_defaults_match_the_spec() -> None:
    call = ToolCallRequest(tool_name="x", arguments={})
    assert (call.version, call.timeout, call.streaming, call.correlation_id, call.session_id) == (
        "1.0",
        30,
        False,
        "",
        "",
    )
    assert re.fullmatch(r"[0-9a-f-]{36}", call.id) and call.ts > 1e9
    assert ToolCallRequest(tool_name="x", arguments={}).id != call.id
    listing = ToolListRequest()
    assert (listing.query, listing.include_deferred, listing.filter_tags, listing.filter_kind) == (
        "",
        False,
        [],
        "",
    )
    tool = ToolDefinition(name="t", description="d")
    assert (tool.streaming, tool.idempotent, tool.defer_loading, tool.version, tool.toolkit) == (
        True,
        False,
        False,
        "1.0.0",
        None,
    )
    result = ToolResult(success=True, tool_name="t", duration_ms=1)
    assert (result.truncated, result.events, result.error_code, result.exit_code) == (
        False,
        [],
        None,
        None,
    )


def test_error_codes_know_which_is_retryable() -> None:
    assert [c.value for c in ToolErrorCode] == ["unknown_tool", "tool_denied", "tool_error"]
    assert [c.retryable for c in ToolErrorCode] == [False, False, True]
    assert A2ECapability.TOOLS == "tools"


def test_tool_parameter_is_recursive() -> None:
    param = ToolParameter.model_validate(
        {
            "name": "opts",
            "type": "object",
            "description": "options",
            "properties": {
                "depth": {
                    "name": "depth",
                    "type": "object",
                    "description": "d",
                    "properties": {"n": {"name": "n", "type": "integer", "description": "n"}},
                }
            },
        }
    )
    assert param.properties is not None
    inner = param.properties["depth"].properties
    assert inner is not None and inner["n"].type == "integer"


def test_event_data_is_typed_by_kind() -> None:
    ToolEvent.model_validate(
        {
            "kind": "artifact",
            "data": {"name": "out", "mime": "text/plain", "chunk": "x", "final": True},
        }
    )
    with pytest.raises(ValueError, match="pct"):
        ToolEvent.model_validate({"kind": "progress", "data": {"message": "no pct"}})
    with pytest.raises(ValueError):
        ToolEvent.model_validate({"kind": "telepathy", "data": {}})


def test_handshake_error_and_cancel_wire_forms() -> None:
    for message in (
        HandshakeRequest(client="c", capabilities=["tools"], token=None),
        HandshakeResponse(req_id="r", session_id="s", capabilities=["tools"], server="x"),
        A2EError(req_id="r", code="invalid_json", message="m", retryable=False),
        ToolCancelRequest(session_id="s", req_id="r"),
    ):
        wire = json.loads(encode(message))
        assert {"type", "id", "version", "ts"} <= set(wire)
        assert decode(encode(message)) == message
    assert set(json.loads(encode(A2EError(code="c", message="m")))) == {
        "type",
        "id",
        "version",
        "ts",
        "req_id",
        "code",
        "message",
        "retryable",
    }


def test_usage_extension_only_on_the_wire_when_present() -> None:
    result = ToolResult(success=True, tool_name="t", duration_ms=1)
    assert "usage" not in json.loads(encode(ToolCallResponse(data=result)))["data"]


@pytest.mark.parametrize(
    ("line", "code", "needle"),
    [
        ("not json", ErrorCode.INVALID_JSON, "not valid JSON"),
        ("[1, 2]", ErrorCode.INVALID_MESSAGE, "JSON object"),
        ('{"id": "x"}', ErrorCode.INVALID_MESSAGE, "'type'"),
        ('{"type": "tool/teleport", "id": "x"}', ErrorCode.UNKNOWN_TYPE, "tool/teleport"),
        (
            '{"type": "tool/call/req", "id": "x", "tool_name": 5, "arguments": {}}',
            ErrorCode.INVALID_MESSAGE,
            "tool_name",
        ),
        (
            '{"type": "tool/call/req", "id": "x", "tool_name": "t", "arguments": []}',
            ErrorCode.INVALID_MESSAGE,
            "arguments",
        ),
        (
            '{"type": "tool/call/req", "id": "x", "tool_name": "t", "arguments": {}, "timeout": -1}',
            ErrorCode.INVALID_MESSAGE,
            "timeout",
        ),
        (
            '{"type": "tool/call/req", "id": "x", "tool_name": "t", "arguments": {}, "timeout": 0.0}',
            ErrorCode.INVALID_MESSAGE,
            "timeout must be a positive number",
        ),
        (
            '{"type": "tool/call/req", "id": "x", "tool_name": "t", "arguments": {}, "timeout": true}',
            ErrorCode.INVALID_MESSAGE,
            "not a boolean",
        ),
    ],
)
def test_bad_lines_get_errors_that_name_the_problem(
    line: str, code: ErrorCode, needle: str
) -> None:
    with pytest.raises(ProtocolError) as caught:
        decode(line)
    assert caught.value.code == code
    assert needle in caught.value.message
    reply = caught.value.to_message()
    assert reply.type == "error" and reply.code == code
    if '"id": "x"' in line:
        assert reply.req_id == "x"


@pytest.mark.parametrize(
    "chunk", ["plain\n", "héllo \u2603 \U0001f600", "a lone surrogate \ud800 printed", '\x00\x1f"']
)
def test_events_cross_the_wire_as_one_line_and_come_back_the_same(chunk: str) -> None:
    event = ToolEvent(
        kind=EventKind.ARTIFACT, data={"name": "stdout", "chunk": chunk}, req_id="r", seq=3
    )
    line = encode(event)
    assert "\n" not in line
    assert decode(line.encode("utf-8", "surrogatepass")) == decode(line) == event
    assert json.loads(line)["data"]["chunk"] == chunk


@pytest.mark.parametrize(("given", "granted"), [(2.5, 3), (0.2, 1), (7, 7), (7.0, 7)])
def test_a_fractional_timeout_is_rounded_up_to_whole_seconds(given: float, granted: int) -> None:
    line = json.dumps(
        {"type": "tool/call/req", "id": "x", "tool_name": "t", "arguments": {}, "timeout": given}
    )
    request = decode(line)
    assert isinstance(request, ToolCallRequest) and request.timeout == granted
