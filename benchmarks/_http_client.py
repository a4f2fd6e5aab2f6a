"""A kept-alive HTTP client of the standard library, shared by a bench's client threads.

The bench runs its clients on the machine it measures, so a client's own CPU is taken from the
server it drives: ``http.client`` costs about a third of ``httpx``'s per call (0.5 ms against
1.5 ms of CPU for a REST call, on a 2-core machine), and every system that speaks HTTP is
driven by this one, so that what the client costs is small and alike on each side.
"""

from __future__ import annotations

import http.client
import json
import threading
from typing import Any
from urllib.parse import urlsplit

__all__ = ["KeptAlive"]


class KeptAlive:
    """Requests to one server from several threads at once: each takes an idle kept-alive
    connection or opens one. ``url``'s path is a prefix of every request's, and its query
    string is added to each (``/t/TOKEN`` or ``?token=`` for an ``a2e serve`` with a token)."""

    def __init__(self, url: str, timeout: float) -> None:
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"{url!r} is not an http:// or https:// URL")
        self.url, self.timeout = url, timeout
        self.host = parts.hostname
        self.port = parts.port or (443 if parts.scheme == "https" else 80)
        self.https = parts.scheme == "https"
        self.prefix = parts.path.rstrip("/")
        self.query = f"?{parts.query}" if parts.query else ""
        self._idle: list[http.client.HTTPConnection] = []
        self._lock = threading.Lock()

    def _connect(self, timeout: float) -> http.client.HTTPConnection:
        kind = http.client.HTTPSConnection if self.https else http.client.HTTPConnection
        return kind(self.host, self.port, timeout=timeout)

    def request(
        self,
        method: str,
        path: str,
        body: Any = None,
        timeout: float | None = None,
        headers: dict[str, str] | None = None,
    ) -> tuple[int, bytes]:
        """The status and body of one request (``body`` sent as JSON). A kept-alive connection
        that the server closed while it was idle is replaced, and the request sent once more
        on a new one; a new connection that fails is the request's failure."""
        data = None if body is None else json.dumps(body).encode()
        sent = {"Content-Type": "application/json"} if data is not None else {}
        sent.update(headers or {})
        target = f"{self.prefix}{path}{self.query}"
        while True:
            with self._lock:
                connection = self._idle.pop() if self._idle else None
            reused = connection is not None
            if connection is None:
                connection = self._connect(timeout or self.timeout)
            try:
                connection.request(method, target, body=data, headers=sent)
                response = connection.getresponse()
                payload = response.read()
            except (http.client.HTTPException, OSError):
                connection.close()
                if reused:
                    continue
                raise
            if response.will_close:
                connection.close()
            else:
                with self._lock:
                    self._idle.append(connection)
            return response.status, payload

    def close(self) -> None:
        with self._lock:
            idle, self._idle = self._idle, []
        for connection in idle:
            connection.close()
