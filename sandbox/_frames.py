"""Length-prefixed JSON frames: the only thing that crosses a pipe between processes.

A frame is a 4-byte big-endian length followed by that many bytes of UTF-8 JSON whose top level
is an object. The reader enforces a size cap *before* buffering a body, so a hostile writer can
make us read at most ``max_frame`` bytes of garbage before we give up on it. Nothing here ever
unpickles.
"""

from __future__ import annotations

import os
import struct
from collections.abc import Callable, Mapping
from typing import Any

from a2e import _jsonwire as jsonwire

__all__ = [
    "DEFAULT_MAX_FRAME",
    "EVENT_PREFIX",
    "HEADER_SIZE",
    "SKIPPED_EVENT",
    "FrameDecoder",
    "FrameError",
    "FrameTooLarge",
    "encode_frame",
    "frame_of_body",
    "read_frame",
    "read_frame_body",
    "write_frame",
    "write_frame_bytes",
]

DEFAULT_MAX_FRAME = 8 * 1024 * 1024
_HEADER = struct.Struct(">I")
HEADER_SIZE = _HEADER.size
#: How every event frame starts as the worker encodes it (``messages.event_frame``, compact
#: JSON): what lets a reader past the event cap skip one without decoding it.
EVENT_PREFIX = b'{"t":"event",'
#: Stands for an event frame that was counted but not decoded (see ``skip_events``).
SKIPPED_EVENT: dict[str, Any] = {"t": "event", "skipped": True}


class FrameError(ValueError):
    """The byte stream broke the framing rules; the writer is not to be trusted further."""


class FrameTooLarge(FrameError):
    """A frame past the size limit: a rule of size, where the others are rules of form."""


def encode_frame(obj: Mapping[str, Any]) -> bytes:
    return frame_of_body(jsonwire.dumps(obj).encode())


def frame_of_body(body: bytes) -> bytes:
    """A frame around a JSON object the caller encoded itself (to splice in a large value that
    was encoded once already)."""
    return _HEADER.pack(len(body)) + body


def _decode_body(body: bytes, parse: Callable[[bytes], Any] = jsonwire.loads) -> dict[str, Any]:
    try:
        obj = parse(body)
    except (ValueError, UnicodeDecodeError) as exc:
        raise FrameError(
            f"frame is not valid UTF-8 JSON ({exc.__class__.__name__}: {exc})"
        ) from None
    except RecursionError:
        raise FrameError("frame is nested too deeply") from None
    if not isinstance(obj, dict):
        raise FrameError(f"frame must hold a JSON object, not {type(obj).__name__}")
    return obj


class FrameDecoder:
    """Incremental decoder: ``feed`` bytes as they arrive, get complete frames back."""

    def __init__(self, max_frame: int = DEFAULT_MAX_FRAME) -> None:
        self.max_frame = max_frame
        #: Once set, frames written as our worker writes events are counted, not decoded:
        #: a flood past the event cap then costs a prefix compare per frame, not a JSON parse.
        self.skip_events = False
        self._buf = bytearray()

    def feed(self, data: bytes) -> list[dict[str, Any]]:
        self._buf += data
        frames = []
        while len(self._buf) >= _HEADER.size:
            (length,) = _HEADER.unpack_from(self._buf)
            if length > self.max_frame:
                raise FrameTooLarge(
                    f"frame of {length} bytes exceeds the limit of {self.max_frame} bytes"
                )
            end = _HEADER.size + length
            if len(self._buf) < end:
                break
            if self.skip_events and self._buf.startswith(EVENT_PREFIX, _HEADER.size):
                del self._buf[:end]
                frames.append(SKIPPED_EVENT)
                continue
            body = bytes(self._buf[_HEADER.size : end])
            del self._buf[:end]
            frames.append(_decode_body(body))
        return frames

    @property
    def pending_bytes(self) -> int:
        """Bytes of an incomplete frame; non-zero at end of stream means a truncated frame."""
        return len(self._buf)


def write_frame(fd: int, obj: Mapping[str, Any]) -> None:
    """Blocking write of one whole frame (worker side; the pipe is ours alone)."""
    write_frame_bytes(fd, encode_frame(obj))


def write_frame_bytes(fd: int, frame: bytes) -> None:
    """Blocking write of a frame already encoded (``frame_of_body``)."""
    view = memoryview(frame)
    while view:
        written = os.write(fd, view)
        view = view[written:]


def _read_exact(fd: int, size: int) -> bytes:
    chunks = []
    while size:
        chunk = os.read(fd, min(size, 1 << 20))
        if not chunk:
            raise EOFError("pipe closed in the middle of a frame")
        chunks.append(chunk)
        size -= len(chunk)
    return b"".join(chunks)


def read_frame(fd: int, max_frame: int = DEFAULT_MAX_FRAME) -> dict[str, Any]:
    """Blocking read of one frame (worker side, reading its job from the supervisor: with the
    standard library's parser, ``jsonwire.plain_loads``)."""
    return read_frame_body(fd, b"", max_frame)


def read_frame_body(fd: int, head: bytes, max_frame: int = DEFAULT_MAX_FRAME) -> dict[str, Any]:
    """The rest of a frame of which ``head``, the first bytes of its header, was read already
    (by a reader that took descriptors with them)."""
    head += _read_exact(fd, _HEADER.size - len(head))
    (length,) = _HEADER.unpack(head)
    if length > max_frame:
        raise FrameTooLarge(f"frame of {length} bytes exceeds the limit of {max_frame} bytes")
    return _decode_body(_read_exact(fd, length), jsonwire.plain_loads)
