"""Engine tools offered to models (JSON Schema, OpenAI and Anthropic formats) and to agent
frameworks shaped like llm-agents-from-scratch, through a real engine."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from types import SimpleNamespace
from typing import Any

import pytest

from a2e.adapters._llm_agents import EngineTool, engine_tools
from a2e.caps.tools._client import ToolAPI
from a2e.caps.tools._models import ToolDefinition, ToolParameter
from a2e.caps.tools._schema import anthropic_tool, input_schema, openai_tool
from a2e_engine.engine import Engine, EngineConfig


def test_json_schema_of_a_nested_definition() -> None:
    tool = ToolDefinition(
        name="book",
        description="Book a room",
        input_parameters=[
            ToolParameter(
                name="room", type="string", description="which", required=True, enum=["a", "b"]
            ),
            ToolParameter(
                name="guest",
                type="object",
                description="who",
                properties={
                    "age": ToolParameter(
                        name="age", type="integer", description="years", required=True
                    )
                },
            ),
            ToolParameter(name="nights", type="array", description="dates"),
        ],
    )
    assert input_schema(tool) == {
        "type": "object",
        "properties": {
            "room": {"type": "string", "description": "which", "enum": ["a", "b"]},
            "guest": {
                "type": "object",
                "description": "who",
                "properties": {"age": {"type": "integer", "description": "years"}},
                "required": ["age"],
                "additionalProperties": False,  # the engine refuses other keys here too
            },
            "nights": {"type": "array", "description": "dates", "items": {}},
        },
        "required": ["room"],
        "additionalProperties": False,
    }
    assert openai_tool(tool)["function"]["parameters"] == input_schema(tool)
    assert anthropic_tool(tool) == {
        "name": "book",
        "description": "Book a room",
        "input_schema": input_schema(tool),
    }


@pytest.fixture(scope="module")
def tools() -> Iterator[ToolAPI]:
    with Engine(config=EngineConfig(prefork=1)) as engine:
        client = engine.connect()
        yield ToolAPI(client)
        client.close()


def test_every_engine_tool_exports_a_schema_the_engine_accepts(tools: ToolAPI) -> None:
    adapted = {tool.name: tool for tool in engine_tools(tools)}
    assert {"python_eval", "code_eval", "run_shell", "read_file", "http_request"} <= set(adapted)
    for tool in adapted.values():
        schema = tool.parameters_json_schema
        assert schema["type"] == "object" and set(schema.get("required", [])) <= set(
            schema["properties"]
        )
    assert adapted["python_eval"].parameters_json_schema["required"] == ["code"]


def test_the_framework_shape_calls_through_the_sandbox(tools: ToolAPI) -> None:
    adapted = {tool.name: tool for tool in engine_tools(tools)}

    async def run() -> tuple[Any, ...]:
        ok_call = SimpleNamespace(id_="c1", tool_name="python_eval", arguments={"code": "6 * 7"})
        bad_call = SimpleNamespace(id_="c2", tool_name="python_eval", arguments={"code": "1/0"})
        wrong = SimpleNamespace(id_="c3", tool_name="python_eval", arguments={"nope": 1})
        return await asyncio.gather(
            adapted["python_eval"](ok_call),
            adapted["python_eval"](bad_call),
            adapted["python_eval"](wrong),
        )

    ok, failed, invalid = asyncio.run(run())
    assert (ok.tool_call_id, ok.error) == ("c1", False)
    assert json.loads(ok.content)["value"] == 42
    assert failed.error and json.loads(failed.content)["message"] == (
        "ZeroDivisionError: division by zero"
    )
    assert json.loads(failed.content)["data"]["exception"]["type"] == "ZeroDivisionError"
    assert invalid.error and "nope" in json.loads(invalid.content)["message"]


def test_a_dead_engine_is_an_error_result_not_a_raise() -> None:
    with Engine(config=EngineConfig(prefork=1)) as engine:
        api = ToolAPI(engine.connect())
        tool = EngineTool(api, next(t for t in api.list() if t.name == "python_eval"))
    result = asyncio.run(tool(SimpleNamespace(id_="x", arguments={"code": "1"})))
    assert result.error and json.loads(result.content)["error_type"]
