"""Drive a host over stdio: start its process and speak JSON lines on its stdin and stdout.

``StdioTransport(["a2e", "serve", "--stdio"])`` gives an ``A2EClient`` the same engine that
runs in-process, from any Python program; other languages do the same with their own pipes.
"""

from __future__ import annotations

import logging
import subprocess
import threading
from collections.abc import Mapping, Sequence

from a2e._codec import ProtocolError, decode, encode
from a2e._messages import A2EMessage
from a2e._transport import TransportClosed

__all__ = ["StdioTransport"]

log = logging.getLogger("a2e.transports.stdio")


class StdioTransport:
    def __init__(
        self,
        command: Sequence[str],
        *,
        env: Mapping[str, str] | None = None,
        cwd: str | None = None,
        stderr: int | None = None,
    ) -> None:
        self.process = subprocess.Popen(
            list(command),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=stderr,
            env=dict(env) if env is not None else None,
            cwd=cwd,
        )
        assert self.process.stdin is not None and self.process.stdout is not None
        self._stdin = self.process.stdin
        self._stdout = self.process.stdout
        self._lock = threading.Lock()
        self._closed = False

    def send(self, message: A2EMessage) -> None:
        self.send_raw(encode(message).encode() + b"\n")

    def send_raw(self, data: bytes) -> None:
        """Write bytes as they are (tests use it to send broken lines)."""
        with self._lock:
            if self._closed:
                raise TransportClosed("stdio transport is closed")
            try:
                self._stdin.write(data)
                self._stdin.flush()
            except (BrokenPipeError, ValueError, OSError) as exc:
                raise TransportClosed(f"the host's stdin is closed: {exc}") from exc

    def receive(self) -> A2EMessage | None:
        while True:
            try:
                line = self._stdout.readline()
            except (OSError, ValueError):
                return None
            if not line:
                return None
            try:
                return decode(line)
            except ProtocolError as exc:
                log.warning("ignoring a line from the host that is not a message: %s", exc)

    def close_input(self) -> None:
        """Signal end of input; the host finishes its calls, replies, and exits."""
        with self._lock:
            if not self._closed:
                self._closed = True
                try:
                    self._stdin.close()
                except OSError:
                    pass

    def close(self, timeout: float = 30.0) -> None:
        self.close_input()
        try:
            self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        self._stdout.close()
