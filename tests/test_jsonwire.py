"""The shared strict JSON of every wire: same text as ``json.dumps`` with the same options, and
the same refusals."""

from __future__ import annotations

import json
import math

import pytest

from a2e import jsonwire


@pytest.mark.parametrize(
    "value", [{"a": [1, 2.5, None, True], "b": "\ud800 é\n"}, [], "x", 0, {"nested": {"k": []}}]
)
def test_dumps_matches_json_with_the_same_options(value: object) -> None:
    expected = json.dumps(value, separators=(",", ":"), allow_nan=False)
    assert jsonwire.dumps(value) == expected
    assert jsonwire.dumps(value).isascii()


@pytest.mark.parametrize("value", [math.nan, math.inf, {"x": [-math.inf]}])
def test_dumps_refuses_what_is_not_json(value: object) -> None:
    with pytest.raises(ValueError):
        jsonwire.dumps(value)
    with pytest.raises(TypeError):
        jsonwire.dumps({"x": object()})


@pytest.mark.parametrize("text", ["NaN", '{"x": Infinity}', "[-Infinity]", "{", b"\xff\xfe{"])
def test_loads_refuses_what_is_not_strict_json(text: str | bytes) -> None:
    with pytest.raises(ValueError):
        jsonwire.loads(text)


def test_loads_reads_text_and_bytes_as_json_loads_does() -> None:
    value = {"a": ["é", 1, None]}
    for text in (json.dumps(value), json.dumps(value).encode(), json.dumps(value).encode("utf-16")):
        assert jsonwire.loads(text) == json.loads(text) == value


@pytest.mark.parametrize(
    "encoding", ["utf-8", "utf-8-sig", "utf-16", "utf-16-le", "utf-16-be", "utf-32-le", "utf-32-be"]
)
@pytest.mark.parametrize("value", [{"a": "é"}, ["x"], 7, "s"])
def test_loads_finds_the_encoding_of_bytes_as_json_does(encoding: str, value: object) -> None:
    # Our own lines take a shortcut to UTF-8; everything else must still be told apart.
    data = json.dumps(value, ensure_ascii=False).encode(encoding)
    assert jsonwire.loads(data) == json.loads(data) == value
    assert jsonwire.loads(bytearray(data)) == value
