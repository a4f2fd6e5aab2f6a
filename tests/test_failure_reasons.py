"""Every failed result says why in ``reason`` (a ``FailureReason``), beside the spec's
``error_code``, which stays the spec's: each reason produced for real, by a real worker, a real
policy or a real limit; a success carries none, on the wire or off it."""

from __future__ import annotations

import threading

import pytest

from a2e.caps.tools._client import ToolAPI
from a2e.caps.tools._models import FailureReason, ToolResult
from a2e_engine.engine import Engine, EngineConfig, Limits, ToolPolicy
from a2e_engine.sandbox._messages import Result, check_worker_frame, failure_frame


def _failed(result: ToolResult, reason: FailureReason, code: str = "tool_error") -> None:
    assert not result.success and result.reason == reason, result
    assert result.error_code == code and result.error, result
    assert result.model_dump_wire()["reason"] == reason.value


def test_a_success_carries_no_reason(tools: ToolAPI) -> None:
    result = tools.call(tool_name="python_eval", arguments={"code": "1"})
    assert result.success and result.reason is None
    assert "reason" not in result.model_dump_wire()


def test_refusals_before_any_worker(engine: Engine, tools: ToolAPI) -> None:
    _failed(tools.call(tool_name="no_such_tool", arguments={}), FailureReason.UNKNOWN_TOOL,
            "unknown_tool")  # fmt: skip
    _failed(tools.call(tool_name="python_eval", arguments={"code": 3}),
            FailureReason.INVALID_ARGUMENTS)  # fmt: skip
    _failed(tools.call(tool_name="sleep", arguments={}), FailureReason.INVALID_ARGUMENTS)
    guest = ToolAPI(engine.connect(policy=ToolPolicy(deny=["python_*"])))
    try:
        denied = guest.call(tool_name="python_eval", arguments={"code": "1"})
    finally:
        guest.client.close()
    _failed(denied, FailureReason.POLICY_DENIED, "tool_denied")


def test_how_a_worker_ended(tools: ToolAPI) -> None:
    _failed(tools.call(tool_name="python_eval", arguments={"code": "1 / 0"}),
            FailureReason.TOOL_FAILED)  # fmt: skip
    _failed(tools.call(tool_name="python_eval", arguments={"code": "bytearray(8 * 1024**3)"}),
            FailureReason.OUT_OF_MEMORY)  # fmt: skip
    _failed(tools.call(tool_name="sleep", arguments={"seconds": 10}, timeout=1),
            FailureReason.TIMEOUT)  # fmt: skip
    for how in ("segfault", "exit"):
        crashed = tools.call(tool_name="crash", arguments={"how": how})
        _failed(crashed, FailureReason.WORKER_CRASHED)


def test_a_result_larger_than_a_frame(engine: Engine, tools: ToolAPI) -> None:
    mb = (engine.config.output.max_frame >> 20) + 1
    big = tools.call(tool_name="big_result", arguments={"mb": mb}, timeout=60)
    _failed(big, FailureReason.OUTPUT_LIMIT)
    assert "exceeds the limit" in (big.error or "")


def test_a_cancelled_call(tools: ToolAPI) -> None:
    sleeping = threading.Event()
    pending = tools.start(tool_name="sleep", arguments={"seconds": 30}, timeout=60,
                          streaming=True, on_event=lambda _: sleeping.set())  # fmt: skip
    assert sleeping.wait(20)  # the tool said it is sleeping
    pending.cancel()
    _failed(pending.result(), FailureReason.CANCELLED)


def test_the_cpu_time_limit() -> None:
    config = EngineConfig(prefork=1, limits=Limits(cpu_seconds=1))
    with Engine(config=config) as engine:
        tools = ToolAPI(engine.connect())
        spun = tools.call(tool_name="python_eval", arguments={"code": "while True: pass"},
                          timeout=20)  # fmt: skip
    _failed(spun, FailureReason.CPU_LIMIT)
    assert spun.usage is not None and spun.usage.signal in ("SIGXCPU", "SIGKILL"), spun.usage
    assert "used up its 1 s of CPU time" in (spun.error or "")


def test_a_connection_that_ends_first(engine: Engine) -> None:
    client = engine.connect()
    tools = ToolAPI(client)
    pending = tools.start(tool_name="sleep", arguments={"seconds": 30}, timeout=60)
    client.close()
    result = pending.result()
    assert not result.success and result.reason == FailureReason.CONNECTION_LOST, result


@pytest.mark.parametrize(
    ("claimed", "kept"),
    [
        ("out_of_memory", "out_of_memory"),
        ("invalid_arguments", "invalid_arguments"),
        ("policy_denied", None),  # the host's to say, not a worker's
        ("sandbox_unavailable", None),
        ("x" * 10_000, None),
        (["timeout"], None),
    ],
)
def test_a_worker_may_only_claim_a_reason_of_its_own(claimed: object, kept: str | None) -> None:
    frame = {**failure_frame("it failed"), "reason": claimed}
    said = check_worker_frame(frame)
    assert isinstance(said, Result) and said.reason == kept
