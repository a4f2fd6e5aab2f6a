"""What arrives on a client's WebSocket, cut into messages at frame boundaries.

``websockets``' sans-I/O protocol parses each frame in Python generators, which was most of a
streaming call's CPU on the client: about 13 µs for every event. Nearly every frame the service
sends is the simplest kind there is (a whole text frame: FIN, no extension bits, no mask), so
such frames are read here directly, and everything else (pings, close, fragments, anything
malformed or too large) goes whole to the protocol, which stays the one judge of the connection.
"""

from __future__ import annotations

from websockets.client import ClientProtocol
from websockets.frames import Frame
from websockets.protocol import State

__all__ = ["Inbound"]

#: The first byte of a whole text frame: FIN, no RSV bits, opcode 1.
_WHOLE_TEXT = 0x81
_MASKED = 0x80
_CONTINUATION, _TEXT, _BINARY = 0x0, 0x1, 0x2


class Inbound:
    def __init__(self, protocol: ClientProtocol, max_size: int, seen: list[Frame]) -> None:
        """``seen``: the frames the protocol already parsed (those that came with the upgrade),
        so that a fragmented message they began is known to be under way."""
        self._protocol = protocol
        self._max_size = max_size
        self._buffer = bytearray()
        self._in_fragments = False
        for frame in seen:
            self._track(frame.opcode.value | (0x80 if frame.fin else 0))

    def feed(self, data: bytes) -> list[bytes | Frame]:
        """The messages (``bytes``) and protocol frames that ``data`` completes, in order. An
        incomplete frame stays buffered; it is never longer than ``max_size`` plus its header,
        because a longer one goes to the protocol, which refuses it."""
        buffer = self._buffer
        buffer += data
        out: list[bytes | Frame] = []
        offset, end = 0, len(buffer)
        while offset < end:
            if self._protocol.state is not State.OPEN:
                self._to_protocol(bytes(buffer[offset:]), out)
                offset = end
                break
            size = _frame_size(buffer, offset, end)
            if size is None:
                break
            header, length = size
            if length > self._max_size:
                self._to_protocol(bytes(buffer[offset:]), out)
                offset = end
                break
            stop = offset + header + length
            if stop > end:
                break
            first = buffer[offset]
            if first == _WHOLE_TEXT and not buffer[offset + 1] & _MASKED and not self._in_fragments:
                out.append(bytes(buffer[offset + header : stop]))
            else:
                self._track(first)
                self._to_protocol(bytes(buffer[offset:stop]), out)
            offset = stop
        del buffer[:offset]
        return out

    def _track(self, first: int) -> None:
        """Whether a fragmented message is under way, from a frame's first byte (FIN, opcode):
        a whole text frame inside one is the protocol's to refuse."""
        opcode = first & 0x0F
        if opcode in (_TEXT, _BINARY):
            self._in_fragments = not first & 0x80
        elif opcode == _CONTINUATION and first & 0x80:
            self._in_fragments = False

    def end(self) -> list[bytes | Frame]:
        """The stream ended: what was left goes to the protocol, then its end."""
        out: list[bytes | Frame] = []
        if self._buffer:
            self._to_protocol(bytes(self._buffer), out)
            self._buffer.clear()
        self._protocol.receive_eof()
        return out

    def _to_protocol(self, data: bytes, out: list[bytes | Frame]) -> None:
        self._protocol.receive_data(data)
        out.extend(event for event in self._protocol.events_received() if isinstance(event, Frame))


def _frame_size(buffer: bytearray, offset: int, end: int) -> tuple[int, int] | None:
    """``(header bytes, payload bytes)`` of the frame at ``offset``, once its header is in."""
    if end - offset < 2:
        return None
    second = buffer[offset + 1]
    length = second & 0x7F
    header = 2
    if length == 126:
        header = 4
    elif length == 127:
        header = 10
    if second & _MASKED:
        header += 4
    if end - offset < header:
        return None
    if length == 126:
        length = int.from_bytes(buffer[offset + 2 : offset + 4], "big")
    elif length == 127:
        length = int.from_bytes(buffer[offset + 2 : offset + 10], "big")
    return header, length
