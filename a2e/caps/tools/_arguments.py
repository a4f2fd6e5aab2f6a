"""A tool's arguments as one pydantic model, made from its one declaration (the
``ToolParameter`` list of its ``ToolDefinition``): the model checks a call's arguments and gives
their JSON Schema, so the two cannot disagree.

The check is strict, as JSON is: an ``integer`` is not ``true`` nor ``1.5``, a ``string`` is not
``null`` (an optional argument is left out, not sent as ``null``), an argument the tool does
not declare is refused at any depth: a misspelt optional argument that is silently ignored is
worse than a clear error. Each problem is a sentence naming the field by its path
(``options.depth``) and saying what was expected, so that the model that made the call can fix
it. Models are built once per declaration and kept.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Sequence
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, create_model
from pydantic.json_schema import GenerateJsonSchema, JsonSchemaValue
from pydantic_core import ErrorDetails, core_schema

from a2e import _jsonwire as jsonwire
from a2e.caps.tools._models import ToolParameter

__all__ = ["Arguments", "arguments_of", "decode_json_text"]

_PYTHON_TYPES: dict[str, Any] = {
    "string": str,
    "integer": int,
    "number": float,
    "boolean": bool,
    "object": dict[str, Any],
    "array": list[Any],
    "null": None,
}
_CONFIG = ConfigDict(extra="forbid", strict=True)


class Arguments:
    """One tool's arguments: ``problems`` with a call's, ``json_schema`` for a model API."""

    def __init__(self, parameters: Sequence[ToolParameter]) -> None:
        self.parameters = {p.name: p for p in parameters}
        self.model = _model("Arguments", self.parameters)

    def problems(self, arguments: dict[str, Any]) -> list[str]:
        """Every problem found, each a sentence naming its field; empty when they are valid."""
        try:
            self.model.__pydantic_validator__.validate_python(arguments)
        except ValidationError as exc:
            return [self._sentence(error) for error in exc.errors()]
        return []

    def json_schema(self) -> dict[str, Any]:
        """The arguments as a JSON Schema object: types, descriptions, ``required``, ``enum``,
        nested ``properties``, and no other keys (``additionalProperties: false``), at every
        depth, as the check refuses them. A fresh copy each time (a tool list asks for every
        tool's), made once."""
        return json.loads(self._schema_text)

    @functools.cached_property
    def _schema_text(self) -> str:
        schema = self.model.model_json_schema(schema_generator=_PlainSchema)
        return json.dumps(_inlined(schema, schema.pop("$defs", {})))

    def _sentence(self, error: ErrorDetails) -> str:
        *above, last = error["loc"]
        where = ".".join(str(part) for part in error["loc"])
        siblings = self.parameters
        for part in above:
            siblings = _properties(siblings.get(str(part)))
        param = siblings.get(str(last))
        if error["type"] == "extra_forbidden" or param is None:
            known = sorted(siblings)
            expected = f"; expected one of {known}" if known else "; this takes no arguments"
            return f"unexpected argument '{where}'{expected}"
        if error["type"] == "missing":
            return f"missing required argument '{where}' ({param.type}: {param.description})"
        given = _json_type(error["input"])
        if error["type"] == "literal_error" and given == param.type:
            return f"argument '{where}' must be one of {param.enum}, not {error['input']!r}"
        return f"argument '{where}' must be of type {param.type}, not {given}"


@functools.lru_cache(maxsize=1024)
def _arguments_by_text(text: str) -> Arguments:
    return Arguments([ToolParameter.model_validate(p) for p in json.loads(text)])


def arguments_of(parameters: Sequence[ToolParameter]) -> Arguments:
    """The ``Arguments`` of a declaration, built once for each distinct one."""
    text = json.dumps([p.model_dump(mode="json") for p in parameters], sort_keys=True)
    return _arguments_by_text(text)


def _model(name: str, parameters: dict[str, ToolParameter]) -> type[BaseModel]:
    # Each field under a name of ours and the argument's as its alias: a tool may name an
    # argument anything, ``json``, ``model_config`` or ``_x``, which are not field names.
    # An optional argument's default is never checked, so it may be left out; sent, it is
    # checked as any other (a null for a string is refused).
    fields: dict[str, Any] = {
        f"argument_{index}": (
            _annotation(param),
            Field(... if param.required else None, alias=pname, description=param.description),
        )
        for index, (pname, param) in enumerate(parameters.items())
    }
    return create_model(name, __config__=_CONFIG, **fields)


def _annotation(param: ToolParameter) -> Any:
    if param.enum:
        return Literal[tuple(param.enum)]
    if param.type == "object" and param.properties is not None:
        return _model("Object", _properties(param))
    return _PYTHON_TYPES[param.type]


def _properties(param: ToolParameter | None) -> dict[str, ToolParameter]:
    """An object parameter's properties, each under its key (which the spec makes its name)."""
    if param is None or param.properties is None:
        return {}
    return {key: p.model_copy(update={"name": key}) for key, p in param.properties.items()}


class _PlainSchema(GenerateJsonSchema):
    """JSON Schema as a model API reads it: no titles and no defaults."""

    def field_title_should_be_set(self, schema: Any) -> bool:
        return False

    def model_schema(self, schema: core_schema.ModelSchema) -> JsonSchemaValue:
        value = super().model_schema(schema)
        value.pop("title", None)
        return value

    def default_schema(self, schema: core_schema.WithDefaultSchema) -> JsonSchemaValue:
        return self.generate_inner(schema["schema"])

    def dict_schema(self, schema: core_schema.DictSchema) -> JsonSchemaValue:
        return {"type": "object"}

    def literal_schema(self, schema: core_schema.LiteralSchema) -> JsonSchemaValue:
        return {"type": "string", "enum": list(schema["expected"])}


def _inlined(value: Any, definitions: dict[str, Any]) -> Any:
    """``value`` with each ``$ref`` replaced by its definition (declarations cannot recurse)."""
    if isinstance(value, dict):
        ref = value.get("$ref")
        if isinstance(ref, str):
            inner = _inlined(definitions[ref.rsplit("/", 1)[-1]], definitions)
            return {**inner, **{k: v for k, v in value.items() if k != "$ref"}}
        return {key: _inlined(inner, definitions) for key, inner in value.items()}
    if isinstance(value, list):
        return [_inlined(inner, definitions) for inner in value]
    return value


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


_DECODED_TYPES = {"object": dict, "array": list}


def decode_json_text(
    params: Sequence[ToolParameter], arguments: dict[str, Any]
) -> dict[str, Any] | None:
    """``arguments`` with each top-level ``object`` or ``array`` argument that came as its JSON
    text decoded; None when none did. Datasets store such values as text (APPS's and TACO's
    ``input_output``) and models often send them so; text that is not JSON of the declared type
    is left as it came, for the check to refuse."""
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
