"""Strict, compact JSON for every wire (protocol lines, worker frames), with the encoder and the
decoder made once.

Any keyword to ``json.dumps`` or ``json.loads`` builds a new ``JSONEncoder`` or ``JSONDecoder``
on each call, paid for every event on both sides of every pipe it crosses
(``docs/performance.md`` has the figures). Strict means: no NaN or infinities either way (they
are not JSON, and other languages' parsers refuse them).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

__all__ = ["dumps", "loads", "plain_loads"]


def _refuse_constant(name: str) -> None:
    raise ValueError(f"{name} is not a JSON value")


# ASCII escapes (the default) keep any Python string encodable, even a lone surrogate.
_ENCODER = json.JSONEncoder(separators=(",", ":"), allow_nan=False)
_DECODER = json.JSONDecoder(parse_constant=_refuse_constant)


def dumps(value: Any) -> str:
    """Compact JSON text; ``ValueError`` for NaN or infinities, ``TypeError`` for non-JSON."""
    return _ENCODER.encode(value)


def loads(text: str | bytes | bytearray) -> Any:
    """Parse JSON text (bytes in any encoding ``json.loads`` accepts); ``ValueError`` (or
    ``UnicodeDecodeError``) for anything that is not strict JSON.

    pydantic-core's parser first, several times faster than ``json`` on an event line. Whatever
    it refuses (NaN, a lone surrogate escape, UTF-16, nesting past 200 levels...) goes to the
    standard library, which then gives the result or the error it always gave. Without its
    string cache: in a freshly forked worker each new key lands on another page of that table,
    and parsing the first frame copied several times more pages."""
    try:
        return (_from_json or _fast_parser())(text, allow_inf_nan=False, cache_strings=False)
    except ValueError:
        pass
    return plain_loads(text)


#: pydantic-core's parser, imported on the first ``loads`` (by the supervisor; see plain_loads).
_from_json: Callable[..., Any] | None = None


def _fast_parser() -> Callable[..., Any]:
    global _from_json
    from pydantic_core import from_json

    _from_json = from_json
    return from_json


def plain_loads(text: str | bytes | bytearray) -> Any:
    """``loads`` with the standard library's parser alone, for a sandbox worker: it parses
    one job, and importing pydantic-core (5 MiB, 19 modules) would cost more on its fork and
    exit than a faster parse saves."""
    if isinstance(text, bytes | bytearray):
        text = text.decode(_encoding_of(text), "surrogatepass")
    return _DECODER.decode(text)


def _encoding_of(data: bytes | bytearray) -> str:
    """``json.detect_encoding``, with the answer for every line and frame we make (UTF-8 that
    starts with an ASCII character) found without its Python-level checks, paid per message.
    A BOM starts with a byte >= 0x80, UTF-16 and UTF-32 have a zero byte among the first two."""
    if data and 0 < data[0] < 0x80 and (len(data) < 2 or data[1] != 0):
        return "utf-8"
    return json.detect_encoding(data)
