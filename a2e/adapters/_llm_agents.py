"""Engine tools in the shape of llm-agents-from-scratch's tools, without depending on it.

That framework's tools have a ``name``, a ``description``, a ``parameters_json_schema`` and an
async ``__call__(tool_call)`` that returns a result with ``tool_call_id``, ``content`` and an
``error`` flag. ``EngineTool`` gives any engine tool that shape: the call goes through
``ToolAPI`` (and so through the sandbox), a failure comes back as ``error=True`` with JSON
content (``error_type``, ``tool``, ``message``, and the tool's partial ``data``; or the tool's
own object when it fails with one that has ``error_type`` and ``message``, as
``use_a2a_agent`` does) so the agent can re-plan, and nothing raises into the agent's loop. If
the framework is installed its own ``ToolCallResult`` class is used; otherwise a dataclass with
the same fields.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from a2e.caps.tools._client import ToolAPI
from a2e.caps.tools._models import DEFAULT_TIMEOUT_S, ToolDefinition
from a2e.caps.tools._schema import input_schema

__all__ = ["EngineTool", "ToolCallResult", "engine_tools"]


@dataclass
class ToolCallResult:
    """The result shape the framework expects, for when it is not installed."""

    tool_call_id: str
    content: str
    error: bool = False


def _result_class() -> Callable[..., Any]:
    try:
        from llm_agents_from_scratch.data_structures import ToolCallResult as Theirs
    except ImportError:
        return ToolCallResult
    return Theirs  # type: ignore[no-any-return]


class EngineTool:
    def __init__(
        self, tools: ToolAPI, definition: ToolDefinition, timeout: int = DEFAULT_TIMEOUT_S
    ) -> None:
        self._tools = tools
        self.definition = definition
        self.timeout = timeout
        self._make_result = _result_class()

    @property
    def name(self) -> str:
        return self.definition.name

    @property
    def description(self) -> str:
        return self.definition.description

    @property
    def parameters_json_schema(self) -> dict[str, Any]:
        return input_schema(self.definition)

    async def __call__(self, tool_call: Any, *args: Any, **kwargs: Any) -> Any:
        call_id = str(getattr(tool_call, "id_", getattr(tool_call, "id", "")))
        arguments = getattr(tool_call, "arguments", None)
        if not isinstance(arguments, dict):
            return self._failure(call_id, "InvalidArguments", "arguments must be a JSON object")
        try:
            result = await asyncio.to_thread(
                self._tools.call, tool_name=self.name, arguments=arguments, timeout=self.timeout
            )
        except Exception as exc:
            return self._failure(call_id, type(exc).__name__, str(exc))
        if result.success:
            return self._make_result(
                tool_call_id=call_id, content=json.dumps(result.data), error=False
            )
        data = result.data
        if isinstance(data, dict) and {"error_type", "message"} <= data.keys():
            # The tool fails in its own structured shape (use_a2a_agent's): pass it on as is.
            return self._make_result(tool_call_id=call_id, content=json.dumps(data), error=True)
        return self._failure(
            call_id, str(result.error_code or "tool_error"), result.error or "", result.data
        )

    def _failure(self, call_id: str, kind: str, message: str, data: Any = None) -> Any:
        content = {"error_type": kind, "tool": self.name, "message": message}
        if data is not None:
            content["data"] = data
        return self._make_result(tool_call_id=call_id, content=json.dumps(content), error=True)


def engine_tools(tools: ToolAPI, timeout: int = DEFAULT_TIMEOUT_S) -> list[EngineTool]:
    """Every tool the engine lists, adapted."""
    return [EngineTool(tools, definition, timeout) for definition in tools.list()]
