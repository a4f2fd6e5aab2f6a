"""``a2e._requests.Requests``: the one table both clients route the host's messages by."""

from __future__ import annotations

import logging

import pytest

from a2e._messages import A2EError, ErrorCode
from a2e._requests import MAX_UNANSWERED, Requests
from a2e.caps.tools._models import EventKind, ToolCallResponse, ToolEvent, ToolResult


def _event(req_id: str) -> ToolEvent:
    return ToolEvent(req_id=req_id, kind=EventKind.STATUS, data={"message": "working"})


def _reply(req_id: str) -> ToolCallResponse:
    return ToolCallResponse(
        req_id=req_id, data=ToolResult(success=True, tool_name="t", duration_ms=1)
    )


def test_events_leave_their_request_waiting_and_its_reply_ends_it() -> None:
    requests: Requests[str] = Requests()
    requests.add("r1", "call one")
    assert requests.route(_event("r1")) == ("call one", False)
    assert requests.get("r1") == "call one"
    assert requests.route(_reply("r1")) == ("call one", True)
    assert requests.get("r1") is None
    assert requests.route(_reply("r1")) is None  # answered once only


def test_a_second_request_with_an_id_in_flight_is_refused() -> None:
    requests: Requests[str] = Requests()
    requests.add("r1", "first")
    with pytest.raises(ValueError, match="already in flight"):
        requests.add("r1", "second")
    assert requests.drain() == ["first"] and requests.drain() == []


def test_an_error_for_what_was_sent_without_waiting_is_expected_and_any_other_is_not(
    caplog: pytest.LogCaptureFixture,
) -> None:
    requests: Requests[str] = Requests()
    requests.sent_without_waiting("cancel-1")
    late = A2EError(req_id="cancel-1", code=ErrorCode.UNKNOWN_REQUEST, message="no such call")
    stray = A2EError(req_id="who", code=ErrorCode.INTERNAL, message="broken")
    with caplog.at_level(logging.DEBUG, logger="a2e.client"):
        assert requests.route(late) is None
        assert requests.route(stray) is None
        assert requests.route(late) is None  # expected once: a second one is a stray
    levels = [(r.levelno, r.getMessage().split(":")[0]) for r in caplog.records]
    assert levels == [
        (logging.DEBUG, "unknown_request answered a message sent without waiting"),
        (logging.WARNING, "host error not tied to a request"),
        (logging.WARNING, "host error not tied to a request"),
    ]


def test_what_was_sent_without_waiting_is_remembered_within_a_bound() -> None:
    requests: Requests[str] = Requests()
    for i in range(MAX_UNANSWERED + 10):
        requests.sent_without_waiting(f"c{i}")
    assert len(requests._unanswered) == MAX_UNANSWERED
    assert "c0" not in requests._unanswered and f"c{MAX_UNANSWERED + 9}" in requests._unanswered
