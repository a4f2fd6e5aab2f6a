"""The shared strict JSON of every wire: same text as ``json.dumps`` with the same options, and
the same refusals."""

from __future__ import annotations

import json
import math

import pytest

from a2e import _jsonwire as jsonwire


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


@pytest.mark.parametrize(
    "text",
    [
        '"\\ud800"',  # a lone surrogate escape: valid JSON text, Python keeps it
        '"\\ud83d\\ude00 \\u00e9 \\n"',
        "[" * 300 + "]" * 300,  # deeper than pydantic-core's parser goes
        "9" * 4300,
        '{"a": 1, "a": 2}',
        " \t\r\n[1.5e300, -0, 0.1, 1E5, true, false, null] \n",
        "1e400",
        b"\xef\xbb\xbf[1]",  # UTF-8 with a BOM
    ],
)
def test_loads_gives_what_json_loads_gives(text: str | bytes) -> None:
    assert jsonwire.loads(text) == json.loads(text)


@pytest.mark.parametrize(
    "text", ["9" * 4301, '"\x01"', "[1] x", "01", "{'a': 1}", b'"\xff"', "[" * 5000 + "]" * 5000]
)
def test_loads_refuses_what_json_loads_refuses(text: str | bytes) -> None:
    with pytest.raises((ValueError, RecursionError)):
        json.loads(text)
    with pytest.raises((ValueError, RecursionError)):
        jsonwire.loads(text)
