"""``http_request`` against a real HTTP server on 127.0.0.1: what it fetches when the engine
allows loopback, and what it refuses by default (before and after DNS, and on redirects)."""

from __future__ import annotations

import base64
import json
import shutil
import ssl
import subprocess
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from a2e.caps.tools._client import ToolAPI
from a2e.caps.tools._models import ToolEvent, ToolResult
from a2e_engine.engine import Engine, EngineConfig

BLOB = bytes(range(256)) * 4


class Handler(BaseHTTPRequestHandler):
    def log_message(self, *args: Any) -> None:
        pass

    def _send(self, status: int, body: bytes, content_type: str, **headers: str) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        for key, value in headers.items():
            self.send_header(key, value)
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def do_GET(self) -> None:
        if self.path == "/text":
            self._send(200, "héllo".encode(), "text/plain; charset=utf-8", **{"X-Test": "yes"})
        elif self.path == "/blob":
            self._send(200, BLOB, "application/octet-stream")
        elif self.path == "/big":
            self._send(200, b"x" * 300_000, "text/plain")
        elif self.path == "/to-text":
            self._send(302, b"", "text/plain", Location="/text")
        elif self.path == "/to-metadata":
            self._send(302, b"", "text/plain", Location="http://169.254.169.254/latest/meta-data")
        elif self.path == "/loop":
            self._send(302, b"", "text/plain", Location="/loop")
        else:
            self._send(404, b"not here", "text/plain")

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers["Content-Length"]))
        echo = {"body": body.decode(), "header": self.headers.get("X-Echo")}
        self._send(201, json.dumps(echo).encode(), "application/json")


@pytest.fixture(scope="module")
def server() -> Iterator[str]:
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()
    httpd.server_close()


@pytest.fixture(scope="module")
def engine() -> Iterator[Engine]:
    settings = {"http": {"allow": ["127.0.0.1"], "max_bytes": 100_000, "max_redirects": 3}}
    with Engine(config=EngineConfig(tool_settings=settings)) as running:
        yield running


@pytest.fixture(scope="module")
def default_engine() -> Iterator[Engine]:
    with Engine() as running:
        yield running


def fetch(engine: Engine, url: str, **arguments: Any) -> ToolResult:
    tools = ToolAPI(engine.connect())
    try:
        return tools.call(tool_name="http_request", arguments={"url": url, **arguments})
    finally:
        tools.client.close()


def test_get_text_and_binary(engine: Engine, server: str) -> None:
    text = fetch(engine, f"{server}/text")
    assert text.success, text.error
    assert text.data["status"] == 200 and text.data["body"] == "héllo"
    assert text.data["headers"]["X-Test"] == "yes"
    blob = fetch(engine, f"{server}/blob")
    assert base64.b64decode(blob.data["body_base64"]) == BLOB and "body" not in blob.data
    missing = fetch(engine, f"{server}/nothing")
    assert missing.success and missing.data["status"] == 404  # an HTTP answer, not a tool error


def test_post_with_headers_and_body(engine: Engine, server: str) -> None:
    result = fetch(
        engine, f"{server}/echo", method="POST", body="payload", headers={"X-Echo": "back"}
    )
    assert result.data["status"] == 201
    assert json.loads(result.data["body"]) == {"body": "payload", "header": "back"}
    bad = fetch(engine, f"{server}/echo", headers={"X-Bad": "a\r\nInjected: 1"})
    assert not bad.success and "single-line" in (bad.error or "")


def test_the_body_is_capped(engine: Engine, server: str) -> None:
    result = fetch(engine, f"{server}/big")
    assert result.data["truncated"] is True and len(result.data["body"]) == 100_000


def test_progress_events_while_downloading(engine: Engine, server: str) -> None:
    events: list[ToolEvent] = []
    tools = ToolAPI(engine.connect())
    result = tools.call(
        tool_name="http_request",
        arguments={"url": f"{server}/big"},
        streaming=True,
        on_event=events.append,
    )
    assert result.success
    assert all(event.kind == "progress" for event in events)
    tools.client.close()


def test_redirects_are_followed_and_checked_each_time(engine: Engine, server: str) -> None:
    followed = fetch(engine, f"{server}/to-text")
    assert followed.data["body"] == "héllo" and followed.data["redirects"] == [f"{server}/to-text"]
    metadata = fetch(engine, f"{server}/to-metadata")
    assert not metadata.success
    assert "169.254.169.254 is a link-local address" in (metadata.error or "")
    loop = fetch(engine, f"{server}/loop")
    assert not loop.success and "more than 3 redirects" in (loop.error or "")


@pytest.mark.parametrize(
    ("host", "why"),
    [
        ("127.0.0.1", "a loopback address"),
        ("localhost", "(127.0.0.1) is a loopback address"),  # refused after resolution
        ("[::1]", "a loopback address"),
        ("169.254.169.254", "a link-local address"),
        ("10.1.2.3", "a private address"),
        ("192.168.0.1", "a private address"),
        ("[::ffff:127.0.0.1]", "a loopback address"),
        ("0.0.0.0", "an unspecified address"),
    ],
)
def test_internal_addresses_are_refused_by_default(
    default_engine: Engine, server: str, host: str, why: str
) -> None:
    port = server.rsplit(":", 1)[1]
    result = fetch(default_engine, f"http://{host}:{port}/text")
    assert not result.success and why in (result.error or ""), result.error
    assert result.usage is not None and result.usage.attempts == 1


def test_other_schemes_and_bad_settings_are_refused(default_engine: Engine) -> None:
    result = fetch(default_engine, "file:///etc/passwd")
    assert not result.success and "only http and https" in (result.error or "")
    with pytest.raises(ValueError, match=r"tools\.http\.alow: unknown setting"):
        Engine(config=EngineConfig(tool_settings={"http": {"alow": ["127.0.0.1"]}}))
    with pytest.raises(ValueError, match=r"ca_file: cannot read '/nonexistent\.pem'"):
        Engine(config=EngineConfig(tool_settings={"http": {"ca_file": "/nonexistent.pem"}}))


@pytest.fixture(scope="module")
def tls_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, str]]:
    """An HTTPS server on 127.0.0.1 with a certificate of its own (made with openssl)."""
    if shutil.which("openssl") is None:
        pytest.skip("openssl is not installed")
    where: Path = tmp_path_factory.mktemp("tls")
    cert, key = where / "cert.pem", where / "key.pem"
    subprocess.run(
        [
            "openssl",
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-days",
            "1",
            "-subj",
            "/CN=127.0.0.1",
            "-addext",
            "subjectAltName=IP:127.0.0.1",
            "-keyout",
            str(key),
            "-out",
            str(cert),
        ],
        check=True,
        capture_output=True,
        timeout=60,
    )
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    httpd.socket = context.wrap_socket(httpd.socket, server_side=True)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    yield f"https://127.0.0.1:{httpd.server_address[1]}", str(cert)
    httpd.shutdown()
    httpd.server_close()


def test_https_verifies_the_certificate_of_the_pinned_address(
    engine: Engine, tls_server: tuple[str, str]
) -> None:
    url, cert = tls_server
    untrusted = fetch(engine, f"{url}/text")
    assert not untrusted.success and "CERTIFICATE_VERIFY_FAILED" in (untrusted.error or "")
    settings = {"http": {"allow": ["127.0.0.1"], "ca_file": cert}}
    with Engine(config=EngineConfig(tool_settings=settings, prefork=1)) as trusting:
        result = fetch(trusting, f"{url}/text")
    assert result.success, result.error
    assert result.data["body"] == "héllo"
