"""``ToolPlugin`` as the spec describes it: list/search dispatch, events, in-process calls."""

from __future__ import annotations

from typing import Any

import pytest

from a2e.caps.tools._models import ToolCallRequest, ToolDefinition, ToolEvent, ToolListRequest
from a2e.caps.tools._plugin import ToolPlugin


class Catalog(ToolPlugin):
    name = "catalog"

    def _list_tools(self) -> list[ToolDefinition]:
        return [
            ToolDefinition(
                name="read_file", description="Read a file", tags=["fs", "read"], toolkit="fs"
            ),
            ToolDefinition(
                name="write_file", description="Write a file", tags=["fs", "write"], toolkit="fs"
            ),
            ToolDefinition(
                name="github_search",
                description="Search GitHub issues",
                tags=["network", "github"],
                defer_loading=True,
            ),
            ToolDefinition(name="http_get", description="Fetch a URL", tags=["network"]),
        ]

    def _execute_tool(self, tool_name: str, arguments: dict[str, Any]) -> dict[str, Any]:
        if tool_name == "read_file":
            self.emit("progress", {"pct": 50, "message": "Reading..."})
            return {"content": "my-host"}
        raise OSError("disk on fire")


def names(tools: list[ToolDefinition]) -> list[str]:
    return [t.name for t in tools]


def test_list_mode_leaves_deferred_tools_out() -> None:
    response = Catalog().handle_list(ToolListRequest(id="r1"))
    assert response.req_id == "r1"
    assert names(response.tools) == ["read_file", "write_file", "http_get"]


def test_search_mode_finds_deferred_only_when_asked() -> None:
    plugin = Catalog()
    assert names(plugin.handle_list(ToolListRequest(query="github")).tools) == []
    found = plugin.handle_list(ToolListRequest(query="github", include_deferred=True)).tools
    assert names(found) == ["github_search"]
    assert names(plugin.handle_list(ToolListRequest(query="FILE")).tools) == [
        "read_file",
        "write_file",
    ]


def test_filter_tags_are_anded_in_both_modes() -> None:
    plugin = Catalog()
    assert names(plugin.handle_list(ToolListRequest(filter_tags=["fs"])).tools) == [
        "read_file",
        "write_file",
    ]
    assert names(plugin.handle_list(ToolListRequest(filter_tags=["fs", "write"])).tools) == [
        "write_file"
    ]
    assert (
        names(
            plugin.handle_list(
                ToolListRequest(
                    query="search", include_deferred=True, filter_tags=["network", "fs"]
                )
            ).tools
        )
        == []
    )


def test_filter_kind_matches_toolkit_or_tag() -> None:
    plugin = Catalog()
    assert names(plugin.handle_list(ToolListRequest(filter_kind="fs")).tools) == [
        "read_file",
        "write_file",
    ]
    assert names(plugin.handle_list(ToolListRequest(filter_kind="network")).tools) == ["http_get"]


def test_handle_call_collects_events_and_converts_failures() -> None:
    plugin = Catalog()
    ok = plugin.handle_call(ToolCallRequest(id="c1", tool_name="read_file", arguments={})).data
    assert ok.success and ok.data == {"content": "my-host"}
    assert [(e.kind, e.seq, e.req_id) for e in ok.events] == [("progress", 0, "c1")]
    failed = plugin.handle_call(ToolCallRequest(tool_name="write_file", arguments={})).data
    assert not failed.success and failed.error_code == "tool_error"
    assert "disk on fire" in (failed.error or "")
    unknown = plugin.handle_call(ToolCallRequest(tool_name="nope", arguments={})).data
    assert unknown.error_code == "unknown_tool"


def test_emit_validates_shape_and_calls_the_callback() -> None:
    plugin = Catalog()
    seen: list[ToolEvent] = []
    plugin.set_event_callback(seen.append)
    plugin.emit("status", {"message": "working"})
    assert seen[0].kind == "status" and seen[0].data == {"message": "working"}
    with pytest.raises(ValueError):
        plugin.emit("status", {"msg": "wrong field"})
    with pytest.raises(ValueError):
        plugin.emit("shout", {})


def test_an_event_sink_gets_the_checked_data_instead_of_a_tool_event() -> None:
    plugin = Catalog()
    raw: list[tuple[str, dict[str, object]]] = []
    events: list[ToolEvent] = []
    plugin.set_event_callback(events.append)
    plugin.set_event_sink(lambda kind, data: raw.append((kind, data)))
    plugin.emit("progress", {"pct": 40, "message": "m", "extra": "dropped"})
    assert raw == [("progress", {"pct": 40, "message": "m"})] and events == []
    with pytest.raises(ValueError):
        plugin.emit("progress", {"pct": 400})  # checked before any receiver sees it
    assert len(raw) == 1
