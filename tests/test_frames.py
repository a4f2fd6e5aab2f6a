from __future__ import annotations

import os
import struct

import pytest

from a2e_engine.sandbox._frames import (
    FrameDecoder,
    FrameError,
    encode_frame,
    read_frame,
    write_frame,
)


def test_frames_survive_arbitrary_splits() -> None:
    stream = b"".join(encode_frame({"n": i, "text": "é" * i}) for i in range(20))
    decoder = FrameDecoder()
    frames = []
    for i in range(0, len(stream), 7):
        frames.extend(decoder.feed(stream[i : i + 7]))
    assert [f["n"] for f in frames] == list(range(20))
    assert decoder.pending_bytes == 0


def test_oversized_frame_is_refused_before_it_is_buffered() -> None:
    decoder = FrameDecoder(max_frame=1024)
    with pytest.raises(FrameError, match="exceeds the limit"):
        decoder.feed(struct.pack(">I", 1 << 30))


@pytest.mark.parametrize("body", [b"\x80\x04K\x01.", b"not json", b"[1,2]", b"\xff\xfe"])
def test_garbage_bodies_are_errors_never_objects(body: bytes) -> None:
    with pytest.raises(FrameError):
        FrameDecoder().feed(struct.pack(">I", len(body)) + body)


def test_blocking_helpers_round_trip_over_a_pipe() -> None:
    r, w = os.pipe()
    try:
        write_frame(w, {"hello": ["world"]})
        assert read_frame(r) == {"hello": ["world"]}
        os.write(w, struct.pack(">I", 10) + b"abc")
        os.close(w)
        with pytest.raises(EOFError):
            read_frame(r)
    finally:
        os.close(r)
