"""Checking call arguments against a tool's ``ToolParameter`` schema before any worker starts.

Errors name the field by its path (``options.depth``) and say what was expected, so a model that
produced the call can fix it. Unknown arguments are refused: a misspelt optional argument that
is silently ignored is worse than a clear error.
"""

from __future__ import annotations

from typing import Any

from a2e import _jsonwire as jsonwire
from a2e.caps.tools._models import ToolParameter

__all__ = ["decode_json_text", "validate_arguments"]

_DECODED_TYPES = {"object": dict, "array": list}


def decode_json_text(
    params: list[ToolParameter], arguments: dict[str, Any]
) -> dict[str, Any] | None:
    """``arguments`` with each top-level ``object`` or ``array`` argument that came as its JSON
    text decoded; None when none did. Datasets store such values as text (APPS's and TACO's
    ``input_output``) and models often send them so; text that is not JSON of the declared type
    is left as it came, for validation to refuse."""
    decoded: dict[str, Any] | None = None
    for param in params:
        value = arguments.get(param.name)
        wanted = _DECODED_TYPES.get(param.type)
        if wanted is None or not isinstance(value, str):
            continue
        try:
            parsed = jsonwire.loads(value)
        except (ValueError, RecursionError):
            continue
        if isinstance(parsed, wanted):
            decoded = decoded if decoded is not None else dict(arguments)
            decoded[param.name] = parsed
    return decoded


def _type_ok(expected: str, value: Any) -> bool:
    if expected == "string":
        return isinstance(value, str)
    if expected == "integer":
        return isinstance(value, int) and not isinstance(value, bool)
    if expected == "number":
        return isinstance(value, int | float) and not isinstance(value, bool)
    if expected == "boolean":
        return isinstance(value, bool)
    if expected == "object":
        return isinstance(value, dict)
    if expected == "array":
        return isinstance(value, list)
    if expected == "null":
        return value is None
    return False


def _json_type(value: Any) -> str:
    names = {
        bool: "boolean",
        int: "integer",
        float: "number",
        str: "string",
        list: "array",
        dict: "object",
        type(None): "null",
    }
    return names.get(type(value), type(value).__name__)


def validate_arguments(
    params: list[ToolParameter] | dict[str, ToolParameter],
    arguments: dict[str, Any],
    path: str = "",
) -> list[str]:
    """All problems found, each a sentence naming the field; empty when the arguments are valid."""
    if isinstance(params, dict):
        params = [p.model_copy(update={"name": name}) for name, p in params.items()]
    problems: list[str] = []
    known = {p.name for p in params}
    for param in params:
        where = f"{path}{param.name}"
        if param.name not in arguments:
            if param.required:
                problems.append(
                    f"missing required argument '{where}' ({param.type}: {param.description})"
                )
            continue
        value = arguments[param.name]
        if not _type_ok(param.type, value):
            problems.append(
                f"argument '{where}' must be of type {param.type}, not {_json_type(value)}"
            )
            continue
        if param.enum is not None and value not in param.enum:
            problems.append(f"argument '{where}' must be one of {param.enum}, not {value!r}")
        if param.type == "object" and param.properties is not None:
            problems.extend(validate_arguments(param.properties, value, f"{where}."))
    for name in arguments:
        if name not in known:
            problems.append(
                f"unexpected argument '{path}{name}'"
                + (f"; expected one of {sorted(known)}" if known else "; this takes no arguments")
            )
    return problems
