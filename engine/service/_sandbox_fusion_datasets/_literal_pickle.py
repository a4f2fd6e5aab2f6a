"""A pickle of plain data read without unpickling it: LiveCodeBench ships its test cases as
base64 of zlib of a pickle, and SandboxFusion ``pickle.loads`` what a client sends, which runs
whatever the pickle names in the server. Here the pickle's opcodes are read with
``pickletools.genops`` (a parser: it calls nothing) and only those that build dictionaries,
lists, tuples, text, numbers, booleans and ``None`` are followed; any other (a global, a call,
an object) refuses the row, as ``ast.literal_eval`` refuses a call. A value the pickle names
again (its memo) counts again toward the bound, and only text and numbers may be named again:
a list of the same list, 60 deep, is a few hundred bytes of pickle and 2**60 items of JSON."""

from __future__ import annotations

import base64
import binascii
import pickletools
import zlib
from typing import Any

__all__ = ["PickleRefused", "literal_pickle", "unpacked"]

#: Opcodes that push the argument they carry.
_VALUES = frozenset((
    "SHORT_BINUNICODE", "BINUNICODE", "BINUNICODE8", "UNICODE", "BININT", "BININT1", "BININT2",
    "INT", "LONG", "LONG1", "LONG4", "BINFLOAT", "FLOAT",
))  # fmt: skip
#: Opcodes a pickle of plain data may hold: LiveCodeBench's hold eight. Each is read in Python,
#: on the server's loop, so a pickle of millions of empty lists is refused before it is built.
MAX_OPCODES = 100_000
_CONSTANTS = {"NONE": None, "NEWTRUE": True, "NEWFALSE": False}
_EMPTY = {"EMPTY_DICT": dict, "EMPTY_LIST": list}
_IGNORED = frozenset({"PROTO", "FRAME"})


class PickleRefused(ValueError):
    """A pickle that is not plain data, or not a pickle."""


class _Mark:
    pass


def _size(value: Any) -> int:
    return max(8, len(value)) if isinstance(value, str) else 8


def literal_pickle(data: bytes, cap: int) -> Any:
    """The plain data ``data`` pickles, built without running anything it names, refused
    when its text and numbers come to more than ``cap`` bytes."""
    stack: list[Any] = []
    memo: dict[int, Any] = {}
    mark = _Mark()
    spent = 0

    def since_mark() -> list[Any]:
        for at in range(len(stack) - 1, -1, -1):
            if stack[at] is mark:
                items = stack[at + 1 :]
                del stack[at:]
                return items
        raise PickleRefused("a pickle with no mark where it needs one")

    def values(count: int) -> list[Any]:
        """The top ``count`` items, taken off the stack: values, never a mark."""
        items = stack[len(stack) - count :]
        if len(items) != count or any(item is mark for item in items):
            raise PickleRefused("a pickle that takes a mark, or nothing, as a value")
        del stack[len(stack) - count :]
        return items

    try:
        for count, (opcode, argument, _) in enumerate(pickletools.genops(data)):
            name = opcode.name
            spent += 8
            if count >= MAX_OPCODES:
                raise PickleRefused(f"a pickle of more than {MAX_OPCODES} opcodes")
            if name in _IGNORED:
                continue
            if name == "STOP":
                if len(stack) != 1 or stack[0] is mark:
                    raise PickleRefused("a pickle that does not end with one value")
                return stack[0]
            if name in _VALUES:
                stack.append(argument)
                spent += _size(argument)
            elif name in _CONSTANTS:
                stack.append(_CONSTANTS[name])
            elif name in _EMPTY:
                stack.append(_EMPTY[name]())
            elif name == "EMPTY_TUPLE":
                stack.append(())
            elif name == "MARK":
                stack.append(mark)
            elif name in ("TUPLE1", "TUPLE2", "TUPLE3"):
                stack.append(tuple(values(int(name[-1]))))
            elif name == "TUPLE":
                stack.append(tuple(since_mark()))
            elif name == "LIST":
                stack.append(since_mark())
            elif name == "DICT":
                items = since_mark()
                stack.append(dict(zip(items[::2], items[1::2], strict=True)))
            elif name == "APPEND":
                (value,) = values(1)
                stack[-1].append(value)
            elif name == "APPENDS":
                items = since_mark()
                stack[-1].extend(items)
            elif name == "SETITEM":
                key, value = values(2)
                stack[-1][key] = value
            elif name == "SETITEMS":
                items = since_mark()
                stack[-1].update(zip(items[::2], items[1::2], strict=True))
            elif name == "MEMOIZE":
                memo[len(memo)] = values(1)[0]
                stack.append(memo[len(memo) - 1])
            elif name in ("PUT", "BINPUT", "LONG_BINPUT"):
                memo[int(str(argument))] = values(1)[0]
                stack.append(memo[int(str(argument))])
            elif name in ("GET", "BINGET", "LONG_BINGET"):
                value = memo[int(str(argument))]
                if isinstance(value, list | dict | tuple):
                    raise PickleRefused("a pickle that names a list, tuple or dict twice")
                stack.append(value)
                spent += _size(value)
            else:
                raise PickleRefused(f"a pickle that is not plain data (it uses {name})")
            if spent > cap:
                raise PickleRefused(f"a pickle of more than {cap} bytes of data")
    except PickleRefused:
        raise
    except (ValueError, IndexError, KeyError, TypeError, AttributeError) as exc:
        raise PickleRefused(f"not a pickle of plain data: {type(exc).__name__}") from None
    raise PickleRefused("a pickle with no end")


def unpacked(text: str, cap: int) -> Any:
    """LiveCodeBench's packing undone (base64 of zlib of a pickle), refused past ``cap``
    bytes once inflated."""
    try:
        packed = base64.b64decode(text, validate=False)
        inflater = zlib.decompressobj()
        data = inflater.decompress(packed, cap + 1)
    except (binascii.Error, zlib.error, ValueError) as exc:
        raise PickleRefused(f"neither JSON nor base64 of zlib: {exc}") from None
    if len(data) > cap or inflater.unconsumed_tail:
        raise PickleRefused(f"more than {cap} bytes once inflated")
    return literal_pickle(data, cap)
