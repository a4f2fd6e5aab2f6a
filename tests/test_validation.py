from __future__ import annotations

from a2e.caps.tools._models import ToolParameter
from a2e_engine.engine._validation import decode_json_text, validate_arguments

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
        validate_arguments(PARAMS, {"path": "a", "count": 2, "mode": "r", "opts": {"depth": 1.5}})
        == []
    )


def test_each_problem_names_its_field() -> None:
    problems = validate_arguments(
        PARAMS, {"count": True, "mode": "x", "opts": {"depth": "deep"}, "extra": 1}
    )
    text = " | ".join(problems)
    assert "missing required argument 'path'" in text
    assert "'count' must be of type integer, not boolean" in text
    assert "'mode' must be one of ['r', 'w']" in text
    assert "'opts.depth' must be of type number, not string" in text
    assert "unexpected argument 'extra'" in text
    assert validate_arguments(PARAMS, {"path": "a", "opts": {}}) == [
        "missing required argument 'opts.depth' (number: d)"
    ]


def test_an_object_or_array_given_as_its_json_text_is_decoded_once() -> None:
    params = [*PARAMS, ToolParameter(name="items", type="array", description="i")]
    given = {"path": "[1]", "opts": '{"depth": 2}', "items": "[1, 2]", "mode": "r"}
    decoded = decode_json_text(params, given)
    assert decoded == {"path": "[1]", "opts": {"depth": 2}, "items": [1, 2], "mode": "r"}
    assert given["opts"] == '{"depth": 2}'  # the caller's own is left alone
    assert validate_arguments(params, decoded) == []
    # Nothing to decode, or text that is not JSON of the declared type: left for validation.
    assert decode_json_text(params, {"path": "a", "opts": {"depth": 1}}) is None
    for text in ("{depth: 1}", "[1]", '"{}"', "[" * 10_000):
        assert decode_json_text(params, {"opts": text}) is None
        assert (
            "'opts' must be of type object, not string"
            in validate_arguments(params, {"path": "a", "opts": text})[0]
        )
