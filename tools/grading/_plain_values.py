"""Python values as plain data, for what crosses between a candidate's process and its judge's.

A value the judge compares must be the judge's own: built of Python's builtin types, made by the
judge's decoder from data, so that nothing the candidate defined (an ``__eq__`` that says yes to
anything, a ``str`` subclass, a patched builtin) takes part in the comparison. ``encode`` turns a
value into JSON-able data with its types kept (a tuple is not a list, ``1`` is not ``1.0`` nor
``True``, a dict keeps keys that are not strings and its order, NaN and the infinities are
floats), and ``decode`` builds it again from builtins alone.

Every JSON object in encoded data is a tag, ``{"$": kind, "v": payload}``: lists, strings,
numbers, booleans and null stand for themselves. A value that has no plain form (a generator, an
instance of the program's class, a function) is either refused (``Unencodable``) or, where the
encoder was given a ``refer`` function, kept where it was made and sent as a reference
(``{"$": "ref", "v": n, ...}``) that the other side turns into a handle of its own with
``remote``: a handle is only ever equal to itself.

Subclasses of builtin types, and numbers that are numbers by ``numbers``' abstract classes
(numpy's scalars), are sent as the builtin value they hold: what a ``==`` with the expected
builtin would compare, in the candidate's process, when it is honest.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Callable
from decimal import Decimal
from fractions import Fraction
from typing import Any

__all__ = ["MAX_DEPTH", "Unencodable", "decode", "encode"]

#: How deep a value may nest, either way: deeper is refused, never a ``RecursionError``.
MAX_DEPTH = 200
#: How many items (elements, entries, characters over a thousand) a value may hold in all.
MAX_ITEMS = 2_000_000

_Refer = Callable[[Any], dict[str, Any]]
_Remote = Callable[[dict[str, Any]], Any]


class Unencodable(ValueError):
    """A value with no plain form (and no way to refer to it), too deep or too large, or
    data that is no encoded value: the message says which."""


def encode(value: Any, refer: _Refer | None = None) -> Any:
    """``value`` as JSON-able data; ``refer(obj)`` gives the reference for a part with no
    plain form (without it such a part is ``Unencodable``)."""
    return _Encoder(refer).encode(value, 0)


def decode(data: Any, remote: _Remote | None = None) -> Any:
    """The value ``data`` encodes, of builtin types alone; ``remote(tag)`` makes the handle
    for a reference (without it a reference is ``Unencodable``)."""
    return _Decoder(remote).decode(data, 0)


class _Encoder:
    def __init__(self, refer: _Refer | None) -> None:
        self.refer = refer
        self.items = 0
        self.open: set[int] = set()  # the containers being encoded: a cycle is refused

    def count(self, n: int = 1) -> None:
        self.items += n
        if self.items > MAX_ITEMS:
            raise Unencodable(f"the value holds more than {MAX_ITEMS:,} items")

    def encode(self, value: Any, depth: int) -> Any:
        if depth > MAX_DEPTH:
            raise Unencodable(f"the value nests deeper than {MAX_DEPTH} levels")
        self.count()
        kind = type(value)
        if value is None or kind is bool:
            return value
        if kind is int:
            return value
        if kind is float:
            return value if math.isfinite(value) else {"$": "float", "v": repr(value)}
        if kind is str:
            self.count(len(value) // 1000)
            return value
        scalar = _plain_scalar(value)
        if scalar is not None:
            return self.encode(scalar[0], depth)
        if isinstance(value, list | tuple | set | frozenset | dict):
            return self.container(value, depth)
        if isinstance(value, bytes | bytearray):
            self.count(len(value) // 1000)
            tag = "bytearray" if isinstance(value, bytearray) else "bytes"
            return {"$": tag, "v": bytes(value).hex()}
        if isinstance(value, complex):
            return {
                "$": "complex",
                "v": [self.encode(value.real, depth + 1), self.encode(value.imag, depth + 1)],
            }
        if isinstance(value, Decimal):
            return {"$": "decimal", "v": str(value)}
        if isinstance(value, Fraction):
            return {"$": "fraction", "v": [value.numerator, value.denominator]}
        if isinstance(value, range):
            return {"$": "range", "v": [value.start, value.stop, value.step]}
        if isinstance(value, type) and _BUILTIN_TYPES.get(value.__name__) is value:
            return {"$": "type", "v": value.__name__}
        if self.refer is None:
            raise Unencodable(f"a value of type {kind.__name__} has no plain form")
        return self.refer(value)

    def container(self, value: Any, depth: int) -> Any:
        if id(value) in self.open:
            if self.refer is None:
                raise Unencodable("the value contains itself")
            return self.refer(value)
        self.open.add(id(value))
        try:
            if isinstance(value, dict):
                pairs = [
                    [self.encode(k, depth + 1), self.encode(v, depth + 1)]
                    for k, v in dict.items(value)
                ]
                return {"$": "dict", "v": pairs}
            if isinstance(value, list):
                return [self.encode(item, depth + 1) for item in list.__iter__(value)]
            if isinstance(value, tuple):
                items = [self.encode(item, depth + 1) for item in tuple.__iter__(value)]
                return {"$": "tuple", "v": items}
            tag = "frozenset" if isinstance(value, frozenset) else "set"
            items = [self.encode(item, depth + 1) for item in value]
            return {"$": tag, "v": items}
        finally:
            self.open.discard(id(value))


def _plain_scalar(value: Any) -> tuple[Any] | None:
    """The builtin scalar a subclass of one, or a number of ``numbers``' kinds (numpy's),
    holds: in a one-tuple, or None when ``value`` is none of those."""
    if isinstance(value, bool):
        return (bool(value),)
    if isinstance(value, int):
        return (int.__index__(value),)
    if isinstance(value, float):
        return (float.__float__(value),)
    if isinstance(value, str):
        return (str.__str__(value),)
    if type(value).__module__ == "numpy" and getattr(value, "ndim", None) == 0:
        item = value.item()  # numpy's bool_, integers and floats: Python's own
        return (item,) if type(item) in (bool, int, float, complex, str, bytes) else None
    if isinstance(value, numbers.Integral):
        return (int(value),)
    if isinstance(value, numbers.Real) and not isinstance(value, Decimal | Fraction):
        return (float(value),)
    return None


_FLOATS = {"nan": math.nan, "inf": math.inf, "-inf": -math.inf}
#: The builtin types a value may name (a test that passes ``int`` to a function that filters
#: by type): the class itself is sent by its name, and is the same class on the other side.
_BUILTIN_TYPES: dict[str, type] = {
    kind.__name__: kind
    for kind in (
        bool,
        int,
        float,
        complex,
        str,
        bytes,
        bytearray,
        list,
        tuple,
        dict,
        set,
        frozenset,
        range,
        type(None),
        object,
        type,
    )
}


class _Decoder:
    def __init__(self, remote: _Remote | None) -> None:
        self.remote = remote
        self.items = 0

    def decode(self, data: Any, depth: int) -> Any:
        if depth > MAX_DEPTH:
            raise Unencodable(f"the value nests deeper than {MAX_DEPTH} levels")
        self.items += 1
        if self.items > MAX_ITEMS:
            raise Unencodable(f"the value holds more than {MAX_ITEMS:,} items")
        kind = type(data)
        if data is None or kind in (bool, int, float, str):
            return data
        if kind is list:
            return [self.decode(item, depth + 1) for item in data]
        if kind is not dict or set(data) - {"$", "v", "callable", "type"}:
            raise Unencodable(f"not an encoded value: {kind.__name__}")
        tag, payload = data.get("$"), data.get("v")
        if tag == "ref":
            if self.remote is None or type(payload) is not int:
                raise Unencodable("a reference where none may be")
            return self.remote(data)
        decoded = _DECODERS.get(tag) if isinstance(tag, str) else None
        if decoded is None:
            raise Unencodable(f"not an encoded value: tag {tag!r}")
        try:
            return decoded(self, payload, depth + 1)
        except (TypeError, ValueError, ArithmeticError) as exc:
            if isinstance(exc, Unencodable):
                raise
            raise Unencodable(f"a malformed {tag}: {exc}") from None

    def items_of(self, payload: Any, depth: int) -> list[Any]:
        if type(payload) is not list:
            raise Unencodable("a container's items must be a list")
        return [self.decode(item, depth) for item in payload]


def _float(_: _Decoder, payload: Any, depth: int) -> float:
    if payload not in _FLOATS:
        raise Unencodable(f"not a float: {payload!r}")
    return _FLOATS[payload]


def _pairs(decoder: _Decoder, payload: Any, depth: int) -> dict[Any, Any]:
    pairs = decoder.items_of(payload, depth)
    if not all(type(pair) is list and len(pair) == 2 for pair in pairs):
        raise Unencodable("a dict's entries must be [key, value] pairs")
    return {key: value for key, value in pairs}


def _bytes_of(payload: Any) -> bytes:
    if type(payload) is not str:
        raise Unencodable("bytes must be hexadecimal text")
    return bytes.fromhex(payload)


def _number(payload: Any) -> int:
    if type(payload) is not int:
        raise Unencodable(f"not an integer: {payload!r}")
    return payload


def _complex(decoder: _Decoder, payload: Any, depth: int) -> complex:
    parts = decoder.items_of(payload, depth)
    if len(parts) != 2 or not all(type(p) in (int, float) for p in parts):
        raise Unencodable("a complex number must be [real, imaginary]")
    return complex(parts[0], parts[1])


def _decimal(_: _Decoder, payload: Any, depth: int) -> Decimal:
    if type(payload) is not str or len(payload) > 10_000:
        raise Unencodable("a decimal must be its text")
    return Decimal(payload)


def _fraction(_: _Decoder, payload: Any, depth: int) -> Fraction:
    if type(payload) is not list or len(payload) != 2:
        raise Unencodable("a fraction must be [numerator, denominator]")
    return Fraction(_number(payload[0]), _number(payload[1]))


def _range(_: _Decoder, payload: Any, depth: int) -> range:
    if type(payload) is not list or len(payload) != 3:
        raise Unencodable("a range must be [start, stop, step]")
    return range(*(_number(part) for part in payload))


_DECODERS: dict[str, Callable[[_Decoder, Any, int], Any]] = {
    "float": _float,
    "dict": _pairs,
    "tuple": lambda d, p, depth: tuple(d.items_of(p, depth)),
    "set": lambda d, p, depth: set(d.items_of(p, depth)),
    "frozenset": lambda d, p, depth: frozenset(d.items_of(p, depth)),
    "bytes": lambda d, p, depth: _bytes_of(p),
    "bytearray": lambda d, p, depth: bytearray(_bytes_of(p)),
    "complex": _complex,
    "decimal": _decimal,
    "fraction": _fraction,
    "range": _range,
    "type": lambda d, p, depth: _builtin_type(p),
}


def _builtin_type(payload: Any) -> type:
    kind = _BUILTIN_TYPES.get(payload) if type(payload) is str else None
    if kind is None:
        raise Unencodable(f"not a builtin type: {payload!r}")
    return kind
