"""``http_request``: one HTTP(S) request from the sandbox, refusing internal addresses.

Runs under the ``network`` profile (sockets, the host's network). Every hop, redirects
included, must pass ``tools._destinations``: by default no address that is not globally routable
(loopback, private, link-local with cloud metadata, ...), checked on what the name resolves to,
and the connection goes to the address that was checked. ``allow`` (a setting:
``tool_settings={"http": {"allow": [...]}}`` or ``[tools.http]``) lists hosts, addresses or
networks to permit anyway, e.g. ``["127.0.0.1"]`` for tests; ``ca_file`` adds a private
certificate authority to the system's for HTTPS.

The response comes back with its status, headers, and body: text when the content type says
so, base64 otherwise; capped at ``max_bytes`` (``truncated: true``). Streaming calls get
``progress`` events while the body downloads.
"""

from __future__ import annotations

import base64
import http.client
import socket
import ssl
import time
from typing import TYPE_CHECKING, Any
from urllib.parse import urljoin, urlsplit

from a2e.caps.tools._plugin import SandboxProfile, ToolExecutionError, ToolPlugin
from a2e_engine.tools._destinations import DestinationRefused, Destinations

if TYPE_CHECKING:
    from a2e.caps.tools._models import ToolDefinition

__all__ = ["HttpTools"]

METHODS = ("GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS")
REDIRECTS = (301, 302, 303, 307, 308)
TEXT_TYPES = (
    "text/",
    "application/json",
    "application/xml",
    "application/javascript",
    "+json",
    "+xml",
)
CHUNK = 65536


class HttpTools(ToolPlugin):
    name = "http"
    sandbox_profile = SandboxProfile.NETWORK

    def __init__(
        self,
        allow: list[str] | tuple[str, ...] = (),
        max_bytes: int = 10 * 1024 * 1024,
        max_redirects: int = 5,
        connect_timeout: float = 10.0,
        ca_file: str | None = None,
    ) -> None:
        super().__init__()
        # Read here, where the engine is configured: workers need no access to the file.
        self.ca_pem: str | None = None
        if ca_file is not None:
            try:
                with open(ca_file) as fh:
                    self.ca_pem = fh.read()
            except OSError as exc:
                raise ValueError(f"ca_file: cannot read {ca_file!r}: {exc.strerror}") from None
            if "BEGIN CERTIFICATE" not in self.ca_pem:
                raise ValueError(f"ca_file: {ca_file!r} holds no PEM certificate")
        self.destinations = Destinations(allow)
        if not isinstance(max_bytes, int) or max_bytes <= 0:
            raise ValueError("max_bytes must be a positive integer")
        if not isinstance(max_redirects, int) or max_redirects < 0:
            raise ValueError("max_redirects must be a non-negative integer")
        self.max_bytes = max_bytes
        self.max_redirects = max_redirects
        self.connect_timeout = float(connect_timeout)

    def _list_tools(self) -> list[ToolDefinition]:
        from a2e.caps.tools._models import ToolDefinition, ToolParameter

        def param(name: str, type_: str, description: str, required: bool = False) -> Any:
            return ToolParameter(name=name, type=type_, description=description, required=required)  # type: ignore[arg-type]

        return [
            ToolDefinition(
                name="http_request",
                description="Make an HTTP(S) request and return status, headers and body. "
                "Internal addresses (loopback, private, link-local, metadata) are refused "
                "unless the engine allows them.",
                input_parameters=[
                    param("url", "string", "http:// or https:// URL", required=True),
                    param("method", "string", f"one of {', '.join(METHODS)} (default GET)"),
                    param("headers", "object", "request headers (string values)"),
                    param("body", "string", "request body as text (UTF-8)"),
                    param("body_base64", "string", "request body as base64 (binary)"),
                ],
                output_parameters=[
                    param("status", "integer", "HTTP status code"),
                    param("headers", "object", "response headers"),
                    param("body", "string", "the body, if it is text"),
                    param("body_base64", "string", "the body, if it is not text"),
                ],
                streaming=True,
                tags=["http", "network"],
                toolkit="http",
            )
        ]

    def _execute_tool(self, tool_name: str, arguments: dict[str, Any]) -> dict[str, Any]:
        method = str(arguments.get("method") or "GET").upper()
        if method not in METHODS:
            raise ValueError(f"method must be one of {', '.join(METHODS)}")
        headers = _headers(arguments.get("headers") or {})
        body = _body(arguments)
        url = str(arguments["url"])
        visited: list[str] = []
        try:
            for _ in range(self.max_redirects + 1):
                response, conn = self._send(method, url, headers, body)
                location = response.getheader("Location")
                if response.status in REDIRECTS and location:
                    conn.close()
                    visited.append(url)
                    url = urljoin(url, location)
                    if response.status == 303 or (
                        response.status in (301, 302) and method == "POST"
                    ):
                        method, body = "GET", None
                    continue
                try:
                    return self._result(response, url, visited, method)
                finally:
                    conn.close()
        except DestinationRefused as exc:
            raise ToolExecutionError(str(exc), {"redirects": visited}, retryable=False) from None
        raise ToolExecutionError(
            f"more than {self.max_redirects} redirects", {"redirects": visited}, retryable=False
        )

    # -- one hop --

    def _send(
        self, method: str, url: str, headers: dict[str, str], body: bytes | None
    ) -> tuple[http.client.HTTPResponse, http.client.HTTPConnection]:
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https"):
            raise DestinationRefused(f"{url!r}: only http and https URLs are allowed")
        if not parts.hostname:
            raise DestinationRefused(f"{url!r} has no host")
        port = parts.port or (443 if parts.scheme == "https" else 80)
        address = self.destinations.resolve(parts.hostname, port)
        conn: http.client.HTTPConnection
        if parts.scheme == "https":
            conn = _PinnedHTTPS(
                parts.hostname, port, address, self.connect_timeout, self._tls_context()
            )
        else:
            conn = _PinnedHTTP(parts.hostname, port, address, timeout=self.connect_timeout)
        path = parts.path or "/"
        if parts.query:
            path += "?" + parts.query
        try:
            conn.request(method, path, body=body, headers=headers)
            return conn.getresponse(), conn
        except BaseException:
            conn.close()
            raise

    def _tls_context(self) -> ssl.SSLContext:
        """The system's trusted CAs, plus ``ca_file``'s when the engine names one."""
        context = ssl.create_default_context()
        if self.ca_pem:
            context.load_verify_locations(cadata=self.ca_pem)
        return context

    # -- the response --

    def _result(
        self, response: http.client.HTTPResponse, url: str, visited: list[str], method: str
    ) -> dict[str, Any]:
        length = response.getheader("Content-Length")
        expected = int(length) if length and length.isdigit() else None
        chunks: list[bytes] = []
        received = 0
        truncated = False
        last_event = 0.0
        streaming = bool(self.context and self.context.streaming)
        while method != "HEAD":
            chunk = response.read(min(CHUNK, self.max_bytes - received + 1))
            if not chunk:
                break
            chunks.append(chunk)
            received += len(chunk)
            if received > self.max_bytes:
                truncated = True
                break
            now = time.monotonic()
            if streaming and now - last_event > 0.2:
                last_event = now
                pct = min(100, int(received * 100 / expected)) if expected else 0
                self.emit("progress", {"pct": pct, "message": f"{received} bytes"})
        raw = b"".join(chunks)[: self.max_bytes]
        headers: dict[str, str] = {}
        for key, value in response.getheaders():
            headers[key] = f"{headers[key]}, {value}" if key in headers else value
        result: dict[str, Any] = {"status": response.status, "url": url, "headers": headers}
        if visited:
            result["redirects"] = visited
        content_type = (response.getheader("Content-Type") or "").lower()
        if any(marker in content_type for marker in TEXT_TYPES):
            charset = response.headers.get_content_charset() or "utf-8"
            try:
                result["body"] = raw.decode(charset, errors="replace")
            except LookupError:
                result["body"] = raw.decode("utf-8", errors="replace")
        else:
            result["body_base64"] = base64.b64encode(raw).decode()
        if truncated:
            result["truncated"] = True
            result["note"] = f"the body was cut at {self.max_bytes} bytes"
        return result


class _PinnedHTTP(http.client.HTTPConnection):
    """Connects to the address that was checked, whatever DNS says now."""

    def __init__(self, host: str, port: int, address: str, timeout: float) -> None:
        super().__init__(host, port, timeout=timeout)
        self.address = address

    def connect(self) -> None:
        self.sock = socket.create_connection((self.address, self.port), self.timeout)


class _PinnedHTTPS(http.client.HTTPSConnection):
    """TLS to the checked address, the certificate verified against the URL's host name."""

    def __init__(
        self, host: str, port: int, address: str, timeout: float, context: ssl.SSLContext
    ) -> None:
        super().__init__(host, port, timeout=timeout, context=context)
        self.address = address

    def connect(self) -> None:
        sock = socket.create_connection((self.address, self.port), self.timeout)
        self.sock = self._context.wrap_socket(sock, server_hostname=self.host)  # type: ignore[attr-defined]


def _headers(raw: Any) -> dict[str, str]:
    if not isinstance(raw, dict):
        raise ValueError("headers must be an object of strings")
    headers = {}
    for key, value in raw.items():
        if not isinstance(value, str) or any(c in key + value for c in "\r\n\x00"):
            raise ValueError(f"headers: {key!r} must be a single-line string")
        headers[key] = value
    return headers


def _body(arguments: dict[str, Any]) -> bytes | None:
    if arguments.get("body") is not None and arguments.get("body_base64") is not None:
        raise ValueError("give body or body_base64, not both")
    if arguments.get("body_base64") is not None:
        try:
            return base64.b64decode(str(arguments["body_base64"]), validate=True)
        except ValueError:
            raise ValueError("body_base64 is not valid base64") from None
    if arguments.get("body") is not None:
        return str(arguments["body"]).encode("utf-8")
    return None
