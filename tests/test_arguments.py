"""A tool's arguments checked against the model made from its declaration, and the JSON Schema
the same model gives."""

from __future__ import annotations

from a2e.caps.tools._arguments import arguments_of, decode_json_text
from a2e.caps.tools._models import ToolParameter

PARAMS = [
    ToolParameter(name="path", type="string", description="p", required=True),
    ToolParameter(name="count", type="integer", description="c"),
    ToolParameter(name="mode", type="string", description="m", enum=["r", "w"]),
    ToolParameter(
        name="opts",
        type="object",
        description="o",
        properties={
            "depth": ToolParameter(name="depth", type="number", description="d", required=True),
        },
    ),
]


def test_valid_arguments_pass() -> None:
    assert (
        arguments_of(PARAMS).problems(
            {"path": "a", "count": 2, "mode": "r", "opts": {"depth": 1.5}}
        )
        == []
    )


def test_each_problem_names_its_field() -> None:
    problems = arguments_of(PARAMS).problems(
        {"count": True, "mode": "x", "opts": {"depth": "deep"}, "extra": 1}
    )
    text = " | ".join(problems)
    assert "missing required argument 'path'" in text
    assert "'count' must be of type integer, not boolean" in text
    assert "'mode' must be one of ['r', 'w']" in text
    assert "'opts.depth' must be of type number, not string" in text
    assert "unexpected argument 'extra'" in text
    assert arguments_of(PARAMS).problems({"path": "a", "opts": {}}) == [
        "missing required argument 'opts.depth' (number: d)"
    ]


def test_an_object_or_array_given_as_its_json_text_is_decoded_once() -> None:
    params = [*PARAMS, ToolParameter(name="items", type="array", description="i")]
    given = {"path": "[1]", "opts": '{"depth": 2}', "items": "[1, 2]", "mode": "r"}
    decoded = decode_json_text(params, given)
    assert decoded == {"path": "[1]", "opts": {"depth": 2}, "items": [1, 2], "mode": "r"}
    assert given["opts"] == '{"depth": 2}'  # the caller's own is left alone
    assert arguments_of(params).problems(decoded) == []
    # Nothing to decode, or text that is not JSON of the declared type: left for validation.
    assert decode_json_text(params, {"path": "a", "opts": {"depth": 1}}) is None
    for text in ("{depth: 1}", "[1]", '"{}"', "[" * 10_000):
        assert decode_json_text(params, {"opts": text}) is None
        assert (
            "'opts' must be of type object, not string"
            in arguments_of(params).problems({"path": "a", "opts": text})[0]
        )


def test_the_check_is_strict_as_json_and_refuses_what_the_declaration_does_not_name() -> None:
    """A null for an optional argument, a float for an integer, text of digits for a number,
    and a key the declaration does not name at any depth: each refused, by name."""
    check = arguments_of(PARAMS).problems
    assert check({"path": "a", "count": None}) == [
        "argument 'count' must be of type integer, not null"
    ]
    assert check({"path": "a", "count": 2.0}) == [
        "argument 'count' must be of type integer, not number"
    ]
    assert check({"path": "a", "opts": {"depth": "1.5"}}) == [
        "argument 'opts.depth' must be of type number, not string"
    ]
    assert check({"path": "a", "mode": 1}) == [
        "argument 'mode' must be of type string, not integer"
    ]
    assert check({"path": "a", "opts": {"depth": 1, "deep": 2}}) == [
        "unexpected argument 'opts.deep'; expected one of ['depth']"
    ]
    assert arguments_of([]).problems({"x": 1}) == [
        "unexpected argument 'x'; this takes no arguments"
    ]
    assert check({"path": "a", "count": 3, "opts": {"depth": 2}}) == []  # an int is a number


def test_the_schema_says_what_the_check_refuses() -> None:
    """The schema comes from the model that checks: what it marks required the check asks
    for, and it closes every object the check closes."""
    schema = arguments_of(PARAMS).json_schema()
    assert schema["required"] == ["path"] and schema["additionalProperties"] is False
    opts = schema["properties"]["opts"]
    assert opts["required"] == ["depth"] and opts["additionalProperties"] is False
    assert schema["properties"]["mode"] == {
        "type": "string",
        "description": "m",
        "enum": ["r", "w"],
    }
    assert (
        "title" not in repr(schema) and "$ref" not in repr(schema) and "default" not in repr(schema)
    )
    assert arguments_of(list(PARAMS)) is arguments_of(PARAMS)  # built once per declaration
