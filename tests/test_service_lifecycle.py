"""``a2e serve --http`` from start to stop: the rules of binding, TLS, IPv6 loopback, a client
that does not read, and SIGTERM (stop accepting, let the calls in flight finish within
``--drain-s``, cancel the rest, leave nothing behind)."""

from __future__ import annotations

import argparse
import contextlib
import datetime
import ipaddress
import json
import socket
import ssl
import time
from pathlib import Path

import psutil
import pytest

from a2e._client import A2EClient
from a2e.caps.tools._client import ToolAPI
from a2e.transports._websocket import TransportRefused, WebSocketTransport
from a2e_engine.engine.cli._app import build_parser
from a2e_engine.engine.cli._errors import UsageError
from a2e_engine.engine.cli._serve import service_config_of
from tests.service_process import ServiceProcess, run_serve, wait_for
from tests.waiting import running


def _tools(url: str, **kwargs: object) -> ToolAPI:
    return ToolAPI(A2EClient(WebSocketTransport(url, **kwargs)))  # type: ignore[arg-type]


def _config_file(tmp_path: Path) -> Path:
    state = tmp_path / "state"
    state.mkdir()
    path = tmp_path / "engine.toml"
    path.write_text(f'[engine]\nstate_dir = "{state}"\n')
    return path


# -- binding --


@pytest.mark.parametrize(
    ("flags", "said"),
    [
        (["--http", "0.0.0.0:0"], "give it with --host"),
        (["--http", ":0", "--host", "0.0.0.0"], "needs a token"),
        (["--http", "127.0.0.1:http"], "is not HOST:PORT or PORT"),
        (["--http", "127.0.0.1:70000"], "is not HOST:PORT or PORT"),
        (["--http", "--stdio"], "one of --stdio, --mcp or --http"),
        (["--mcp", "--stdio"], "one of --stdio, --mcp or --http"),
        ([], "one of --stdio, --mcp or --http"),
        (["--http", ":0", "--tls-cert", "/etc/hostname"], "needs both a certificate and its key"),
        (["--http", ":0", "--token", "t", "--no-auth"], "exclude each other"),
    ],
)
def test_what_cannot_be_served_is_a_usage_error(flags: list[str], said: str) -> None:
    done = run_serve(flags)
    assert done.returncode == 2, done.stderr
    assert said in done.stderr and "Traceback" not in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1


def test_serving_beyond_loopback_without_auth_is_warned(capsys: pytest.CaptureFixture[str]) -> None:
    args = build_parser().parse_args(["serve", "--http", ":0", "--host", "10.1.2.3", "--no-auth"])
    config = service_config_of(args)
    assert config.host == "10.1.2.3" and config.token is None
    assert "no authentication" in capsys.readouterr().err
    args = build_parser().parse_args(
        ["serve", "--http", ":0", "--host", "10.1.2.3", "--token", "t"]
    )
    assert service_config_of(args).token == "t"
    with pytest.raises(UsageError):
        service_config_of(argparse.Namespace(**{**vars(args), "token": None}))


def test_a_taken_port_is_said_in_one_line() -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        done = run_serve(["--http", f"127.0.0.1:{port}", "--prefork", "1"])
    assert done.returncode == 1, done.stderr
    assert f"cannot listen on 127.0.0.1:{port}" in done.stderr and "Traceback" not in done.stderr


def test_ipv6_loopback() -> None:
    server = ServiceProcess("--http", "[::1]:0")
    try:
        assert server.url.startswith("http://[::1]:")
        tools = _tools(server.ws_url)
        assert tools.call(tool_name="python_eval", arguments={"code": "print(1)"}).success
        tools.client.close()
    finally:
        assert server.stop() == 0


def _self_signed(tmp_path: Path) -> tuple[Path, Path]:
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")])
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(hours=1))
        .add_extension(
            x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
            critical=False,
        )
        .sign(key, hashes.SHA256())
    )
    cert_path, key_path = tmp_path / "cert.pem", tmp_path / "key.pem"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    return cert_path, key_path


def test_tls(tmp_path: Path) -> None:
    cert, key = _self_signed(tmp_path)
    bad = run_serve(["--http", ":0", "--tls-cert", str(key), "--tls-key", str(key)])
    assert bad.returncode == 1 and "cannot use the TLS certificate" in bad.stderr, bad.stderr
    server = ServiceProcess("--tls-cert", str(cert), "--tls-key", str(key), "--token", "t")
    try:
        assert server.url.startswith("https://")
        trusted = ssl.create_default_context(cafile=str(cert))
        tools = _tools(server.ws_url, token="t", ssl_context=trusted)
        assert tools.call(tool_name="python_eval", arguments={"code": "print(1)"}).success
        tools.client.close()
        with pytest.raises(TransportRefused):  # an untrusted certificate is not talked to
            WebSocketTransport(server.ws_url, token="t")
    finally:
        assert server.stop() == 0


# -- a client that does not read --


def test_a_client_that_does_not_read_is_dropped_and_its_calls_end() -> None:
    server = ServiceProcess("--max-message-bytes", "4096", "--max-outbox-bytes", "65536")
    try:
        from websockets.sync.client import connect

        # Events of 3 KB: 20,000 of them is far more than the socket buffers on both sides hold.
        flood = "for i in range(20_000):\n    print('x' * 3000, flush=True)"
        hello = {"type": "handshake/req", "id": "h", "client": "t", "capabilities": ["tools"]}
        call = {
            "type": "tool/call/req",
            "id": "c",
            "tool_name": "python_eval",
            "streaming": True,
            "timeout": 120,
            "arguments": {"code": flood},
        }
        baseline = server.settled_workers()
        with connect(server.ws_url, max_queue=1, ping_interval=None) as ws:
            ws.send(json.dumps(hello))
            ws.send(json.dumps(call))
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline and not any(
                "dropped" in line for line in server.stderr
            ):
                time.sleep(0.2)
            assert any("unread" in line for line in server.stderr), server.stderr
            # Its call ended with it: the worker is gone while the client still holds on.
            assert wait_for(lambda: server.workers() <= baseline, 10)
            with contextlib.suppress(OSError):
                ws.socket.shutdown(socket.SHUT_RDWR)
    finally:
        assert server.stop() == 0


# -- SIGTERM --


def test_sigterm_lets_calls_finish_then_stops_cleanly(tmp_path: Path) -> None:
    config = _config_file(tmp_path)
    server = ServiceProcess("--drain-s", "20", "--config", str(config))
    tools = _tools(server.ws_url)
    pending = running(tools, "import time\ntime.sleep(2)\nprint('done')")
    sandbox = server.descendants()
    assert sandbox
    server.process.terminate()
    time.sleep(0.3)
    late = tools.call(tool_name="python_eval", arguments={"code": "print(1)"})
    assert late.error_code == "overloaded" and "shutting down" in (late.error or "")
    with pytest.raises(TransportRefused):
        WebSocketTransport(server.ws_url, open_timeout=2)
    result = pending.result()
    assert result.success and result.data["stdout"] == "running\ndone\n"
    assert server.process.wait(60) == 0
    _gone, alive = psutil.wait_procs(sandbox, timeout=10)
    assert alive == []
    assert list((tmp_path / "state").iterdir()) == []


def test_sigterm_cancels_what_outlives_the_drain(tmp_path: Path) -> None:
    config = _config_file(tmp_path)
    server = ServiceProcess("--drain-s", "1", "--config", str(config))
    tools = _tools(server.ws_url)
    pending = running(tools, "import time\ntime.sleep(60)")
    sandbox = server.descendants()
    started = time.monotonic()
    server.process.terminate()
    result = pending.result()
    assert not result.success
    assert server.process.wait(60) == 0
    assert time.monotonic() - started < 20
    _gone, alive = psutil.wait_procs(sandbox, timeout=10)
    assert alive == []
    assert list((tmp_path / "state").iterdir()) == []
