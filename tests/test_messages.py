"""The sandbox's messages (``sandbox._messages``): what the worker and the zygote build is what
the supervisor accepts, and what breaks a declaration is refused with a sentence."""

from __future__ import annotations

import json
import os
from typing import Any, cast

import pytest

from a2e_engine.sandbox._footprint import MAX_PACKAGES, check_footprint, measure
from a2e_engine.sandbox._frames import EVENT_PREFIX, encode_frame
from a2e_engine.sandbox._messages import (
    CONTROL,
    ControlMessage,
    Event,
    Job,
    MalformedMessage,
    Result,
    SetupError,
    check_control,
    check_worker_frame,
    control,
    encode_job,
    event_frame,
    failure_frame,
    job_with_payload,
    read_layers,
    read_payload,
    result_frame,
    setup_error_frame,
)


def test_what_the_worker_builds_is_what_the_supervisor_reads() -> None:
    assert check_worker_frame(event_frame("log", {"level": "info", "message": "hi"})) == Event(
        "log", {"level": "info", "message": "hi"}
    )
    assert check_worker_frame(setup_error_frame("no landlock")) == SetupError("no landlock")
    failed = failure_frame("ValueError: x", retryable=False)
    assert check_worker_frame({**failed, "usage": {"cpu_ms": 3, "maxrss_kb": 9}}) == Result(
        ok=False, error="ValueError: x", retryable=False, cpu_ms=3, maxrss_kb=9
    )
    success = json.loads(result_frame('{"v":1}', 5, 7)[4:])
    assert check_worker_frame(success) == Result(ok=True, data={"v": 1}, cpu_ms=5, maxrss_kb=7)
    # A reader past the event cap knows an event frame by how the worker encodes its start.
    assert encode_frame(event_frame("log", {}))[4:].startswith(EVENT_PREFIX)


@pytest.mark.parametrize(
    ("frame", "why"),
    [
        ({"t": "event", "kind": 3, "data": {}}, "event frame without kind and data"),
        ({"t": "event", "kind": "log", "data": []}, "event frame without kind and data"),
        ({"t": "result", "ok": "yes"}, "malformed result frame"),
        ({"t": "result", "ok": False}, "malformed result frame"),
        ({"t": "setup_error", "error": 1}, "unknown type 'setup_error'"),
        ({"t": "exec", "code": "..."}, "unknown type 'exec'"),
        ({}, "unknown type 'None'"),
    ],
)
def test_a_frame_that_breaks_its_declaration_is_refused(frame: dict[str, Any], why: str) -> None:
    with pytest.raises(MalformedMessage, match=why):
        check_worker_frame(frame)


def test_a_forged_usage_is_not_taken() -> None:
    said = check_worker_frame(
        {"t": "result", "ok": True, "usage": {"cpu_ms": -1, "maxrss_kb": True}}
    )
    assert isinstance(said, Result) and (said.cpu_ms, said.maxrss_kb) == (None, None)


EXAMPLES: dict[str, dict[str, Any]] = {
    "spawn": {"profile": "compute", "count": 2},
    "stop": {},
    "narrow": {"pid": 8, "keep": "/var/tmp/state/abc/session"},
    "adopt": {
        "pid": 8,
        "copies": [{"pid": 2, "job": 9, "result": 10}],
        "binds": [[["/var/tmp/state/def/session", "/var/tmp/state/abc/session"]]],
        "uids": [1500000001],
    },
    "copied": {"parent": 8, "pid": 12},
    "adopted": {"parent": 8, "error": ""},
    "placed": {"parent": 8, "pid": 12, "error": ""},
    "ready": {"layers": {}, "pid": 7, "footprint": {}},
    "worker": {"pid": 8, "profile": "compute"},
    "exit": {"pid": 8, "status": 0, "cpu_ms": 1, "maxrss_kb": 2, "oom": False},
    "spawn_failed": {"profile": "compute", "error": "EAGAIN"},
    "fatal": {"error": "boom", "traceback": "..."},
}


def test_every_control_message_is_read_as_built() -> None:
    assert set(EXAMPLES) == set(CONTROL)
    for op, fields in EXAMPLES.items():
        message = cast(ControlMessage, {"op": op, **fields})
        assert check_control(json.loads(control(message))) == message


@pytest.mark.parametrize(
    "message",
    [
        {"op": "spawn", "profile": "compute", "count": True},
        {"op": "spawn", "profile": "compute"},
        {"op": "exit", "pid": "8", "status": 0, "cpu_ms": 1, "maxrss_kb": 2, "oom": False},
        {"op": "fork_bomb"},
        ["op", "stop"],
    ],
)
def test_a_control_message_that_breaks_its_declaration_is_refused(message: Any) -> None:
    with pytest.raises(MalformedMessage):
        check_control(message)


def test_a_zygotes_own_footprint_is_read_back() -> None:
    measured = measure()
    assert check_footprint(json.loads(json.dumps(measured))) == measured
    assert measured["rss_kib"] > 0 and measured["modules"] > 0
    assert measured["mapped_kib"] >= measured["rss_kib"]
    assert "a2e_engine" in measured["packages"] and "json" in measured["packages"]


@pytest.mark.parametrize(
    "report",
    [
        [],
        {"rss_kib": -1, "private_kib": 0, "mapped_kib": 1, "modules": 1, "packages": []},
        {"rss_kib": True, "private_kib": 0, "mapped_kib": 1, "modules": 1, "packages": []},
        {"rss_kib": 1, "private_kib": 0, "mapped_kib": 1, "modules": 1, "packages": "pydantic"},
        {"rss_kib": 1, "private_kib": 0, "mapped_kib": 1, "modules": 1, "packages": [""]},
        {
            "rss_kib": 1,
            "private_kib": 0,
            "mapped_kib": 1,
            "modules": 1,
            "packages": ["x"] * (MAX_PACKAGES + 1),
        },
        {"rss_kib": 1, "private_kib": 0, "mapped_kib": 1, "packages": []},
        {"rss_kib": 1, "private_kib": 0, "modules": 1, "packages": []},
    ],
)
def test_a_footprint_that_breaks_its_shape_is_refused(report: Any) -> None:
    with pytest.raises(ValueError):
        check_footprint(report)


def test_a_job_comes_as_its_layers_and_then_its_payload() -> None:
    """The worker reads the first frame alone (and may fork its clean template then): it holds
    none of the arguments or secrets, which come whole in the second."""
    job = cast(
        Job,
        {
            "zygote": "z",
            "plugin": 0,
            "tool": "code_eval",
            "arguments": {"program": "print(1)", "test_cases": [{"output": "answer-7f3a"}]},
            "profile": "process",
            "workspace": "/w",
            "tmp_dir": "/t",
            "streaming": False,
            "read_roots": [],
            "call_id": "c",
            "uid": 1000,
            "cancel_grace_s": 0.0,
            "secrets": {"TOKEN": "secret-91c2"},
        },
    )
    read_end, write_end = os.pipe()
    try:
        os.write(write_end, encode_job(job))
        layers = read_layers(read_end, 1 << 20)
        assert layers["arguments"] == {} and layers["secrets"] == {}
        assert "answer-7f3a" not in json.dumps(layers) and "secret-91c2" not in json.dumps(layers)
        assert job_with_payload(layers, read_payload(read_end, 1 << 20)) == job
    finally:
        os.close(read_end)
        os.close(write_end)


@pytest.mark.parametrize("payload", [{"arguments": [1]}, {"secrets": "x"}])
def test_a_payload_that_is_not_objects_is_refused(payload: dict[str, Any]) -> None:
    with pytest.raises(ValueError, match="objects"):
        job_with_payload(cast(Job, {"tool": "t"}), payload)
