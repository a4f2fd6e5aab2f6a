"""Tool definitions as JSON Schema, and in the function-calling formats of the model APIs.

An A2E ``ToolDefinition`` describes its inputs as ``ToolParameter`` trees; model APIs want a
JSON Schema object. ``input_schema`` gives the one the engine checks arguments against, and
``openai_tool``/``anthropic_tool`` wrap it the way each API expects, so a host can offer the
engine's tools to a model without writing schemas by hand.
"""

from __future__ import annotations

from typing import Any

from a2e.caps.tools._arguments import arguments_of
from a2e.caps.tools._models import ToolDefinition

__all__ = ["anthropic_tool", "input_schema", "openai_tool"]


def input_schema(tool: ToolDefinition) -> dict[str, Any]:
    """The JSON Schema of the tool's arguments, from the model that checks them
    (``a2e.caps.tools._arguments``): an object whose keys, at every depth, are those declared."""
    return arguments_of(tool.input_parameters).json_schema()


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
