"""A tool that asked for a cancel grace hears about its cancel or timeout (``ToolCancelled``)
and may clean up, e.g. cancel work it started elsewhere, before its worker is killed."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest

from a2e.caps.tools._client import ToolAPI
from a2e.caps.tools._models import ToolDefinition, ToolParameter
from a2e.caps.tools._plugin import ToolCancelled, ToolPlugin
from a2e_engine.engine import Engine, EngineConfig


class Remote(ToolPlugin):
    """Stands for a tool that started work elsewhere and must call it off."""

    name = "remote"
    cancel_grace_s = 2.0

    def _list_tools(self) -> list[ToolDefinition]:
        marker = ToolParameter(name="marker", type="string", description="file", required=True)
        return [ToolDefinition(name="remote_work", description="waits", input_parameters=[marker])]

    def _execute_tool(self, tool_name: str, arguments: dict[str, Any]) -> dict[str, Any]:
        try:
            time.sleep(60)
        except ToolCancelled:
            with open(arguments["marker"], "w") as fh:
                fh.write("remote task cancelled")
            raise
        return {}


class Abrupt(Remote):
    name = "abrupt"
    cancel_grace_s = 0.0

    def _list_tools(self) -> list[ToolDefinition]:
        (tool,) = super()._list_tools()
        return [tool.model_copy(update={"name": "abrupt_work"})]


@pytest.fixture(scope="module")
def tools() -> Iterator[ToolAPI]:
    # Every zygote warm before the first call: these calls' one-second timeouts are for the
    # tools, not for starting their zygotes.
    config = EngineConfig(prefork=1, start_all_zygotes=True)
    with Engine(plugins=[Remote(), Abrupt()], config=config) as engine:
        client = engine.connect()
        yield ToolAPI(client)
        client.close()


def marker_text(tools: ToolAPI, name: str) -> str | None:
    result = tools.call(tool_name="read_file", arguments={"path": name})
    return result.data["content"] if result.success else None


def test_a_timeout_lets_the_tool_clean_up_first(tools: ToolAPI) -> None:
    started = time.monotonic()
    result = tools.call(tool_name="remote_work", arguments={"marker": "timeout.txt"}, timeout=1)
    assert not result.success and "timed out" in (result.error or "")
    assert time.monotonic() - started < 1 + 2 + 2  # the deadline, the grace, a margin
    assert marker_text(tools, "timeout.txt") == "remote task cancelled"


def test_a_cancel_lets_the_tool_clean_up_first(tools: ToolAPI) -> None:
    pending = tools.start(tool_name="remote_work", arguments={"marker": "cancel.txt"}, timeout=30)
    time.sleep(0.5)
    pending.cancel()
    result = pending.result()
    assert not result.success and "cancel" in (result.error or "")
    assert marker_text(tools, "cancel.txt") == "remote task cancelled"


def test_without_a_grace_the_worker_is_killed_outright(tools: ToolAPI) -> None:
    result = tools.call(tool_name="abrupt_work", arguments={"marker": "abrupt.txt"}, timeout=1)
    assert not result.success and "timed out" in (result.error or "")
    assert marker_text(tools, "abrupt.txt") is None
