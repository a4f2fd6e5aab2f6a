"""Tool definitions as JSON Schema, and in the function-calling formats of the model APIs.

An A2E ``ToolDefinition`` describes its inputs as ``ToolParameter`` trees; model APIs want a
JSON Schema object. ``input_schema`` makes one (types, descriptions, ``required``, ``enum``,
nested ``properties``), and ``openai_tool``/``anthropic_tool`` wrap it the way each API expects,
so a host can offer the engine's tools to a model without writing schemas by hand.
"""

from __future__ import annotations

from typing import Any

from a2e.caps.tools._models import ToolDefinition, ToolParameter

__all__ = ["anthropic_tool", "input_schema", "openai_tool"]


def _parameter_schema(parameter: ToolParameter) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": str(parameter.type)}
    if parameter.description:
        schema["description"] = parameter.description
    if parameter.enum:
        schema["enum"] = list(parameter.enum)
    if parameter.properties:
        schema.update(_object_schema(list(parameter.properties.values())))
    if parameter.type == "array":
        schema["items"] = {}  # any JSON value: ToolParameter does not describe items
    return schema


def _object_schema(parameters: list[ToolParameter]) -> dict[str, Any]:
    schema: dict[str, Any] = {
        "type": "object",
        "properties": {p.name: _parameter_schema(p) for p in parameters},
    }
    required = [p.name for p in parameters if p.required]
    if required:
        schema["required"] = required
    return schema


def input_schema(tool: ToolDefinition) -> dict[str, Any]:
    """The JSON Schema of the tool's arguments (an object; extra keys are refused by the engine,
    so the schema says so too)."""
    return {**_object_schema(tool.input_parameters), "additionalProperties": False}


def openai_tool(tool: ToolDefinition) -> dict[str, Any]:
    """The OpenAI function-calling form: ``{"type": "function", "function": {...}}``."""
    return {
        "type": "function",
        "function": {
            "name": tool.name,
            "description": tool.description,
            "parameters": input_schema(tool),
        },
    }


def anthropic_tool(tool: ToolDefinition) -> dict[str, Any]:
    """The Anthropic tool-use form: ``{"name", "description", "input_schema"}``."""
    return {"name": tool.name, "description": tool.description, "input_schema": input_schema(tool)}
