"""The frames of a node channel: one wire line of one client connection.

A driver keeps one TCP connection to each node's engine actor (``channel`` on its side,
``relay`` on the node's) and every client connection's messages share it; each frame names the
connection it belongs to. A frame is a fixed header, the line's length and the connection's id
(32 hex digits, ``uuid4().hex``), then the line: the protocol's JSON, never a pickle, so that
neither side runs what the other sent. The first 32 bytes a driver sends are the actor's token,
which the driver learnt through Ray. An empty line asks nothing: it binds its connection to the
channel it came on (``relay``), for a connection whose first request may come much later.
"""

from __future__ import annotations

import string
import struct

from a2e._codec import MAX_MESSAGE_BYTES

__all__ = [
    "HEADER",
    "MAX_LINE_BYTES",
    "TOKEN_BYTES",
    "FrameError",
    "is_conn_id",
    "pack",
    "unpack_header",
]

HEADER = struct.Struct("!I32s")
TOKEN_BYTES = 32
#: The longest line a frame may carry: the protocol's own limit, with room for the node's id
#: that the relay adds to a result.
MAX_LINE_BYTES = MAX_MESSAGE_BYTES + 4096

_HEX = frozenset(string.hexdigits.lower().encode())


class FrameError(Exception):
    """A header no side of ours sends: the stream cannot be trusted past it."""


def is_conn_id(raw: bytes) -> bool:
    """32 lowercase hex digits: what ``uuid4().hex`` gives, and all a header has room for."""
    return len(raw) == HEADER.size - 4 and _HEX.issuperset(raw)


def pack(conn_id: str, line: str) -> bytes:
    data = line.encode()
    return HEADER.pack(len(data), conn_id.encode()) + data


def unpack_header(header: bytes) -> tuple[int, str]:
    """The line's length and the connection's id; ``FrameError`` for a length past the limit
    (read before a byte of the line is) or an id that is not 32 lowercase hex digits."""
    length, raw_id = HEADER.unpack(header)
    if length > MAX_LINE_BYTES:
        raise FrameError(f"a frame of {length} bytes exceeds the limit of {MAX_LINE_BYTES}")
    if not is_conn_id(raw_id):
        raise FrameError("a frame's connection id is not 32 hex digits")
    return length, raw_id.decode()
