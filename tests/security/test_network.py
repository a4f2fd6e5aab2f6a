"""Network attacks from tools that have no network profile."""

from __future__ import annotations

import os
import socket
import threading
import time
import uuid
from collections.abc import Iterator

import pytest

from tests.security.harness import Attacker, Sandbox, attack

SECCOMP_SOCKET = "seccomp: socket() fails with EPERM"
BOTH = SECCOMP_SOCKET + "; empty network namespace behind it"


@pytest.fixture
def tcp_listener() -> Iterator[socket.socket]:
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen()
    server.settimeout(0.2)
    yield server
    server.close()


def _nothing_arrived(server: socket.socket) -> bool:
    try:
        server.accept()[0].close()
    except (TimeoutError, BlockingIOError):
        return True
    return False


@attack("TCP to a listener on 127.0.0.1", full=BOTH, reduced=SECCOMP_SOCKET)
def test_tcp_to_loopback(attacker: Attacker, tcp_listener: socket.socket) -> None:
    port = tcp_listener.getsockname()[1]
    result = attacker.attack(f"import socket\nsocket.create_connection(('127.0.0.1', {port}))")
    assert not result.success and "PermissionError" in (result.error or "")
    assert _nothing_arrived(tcp_listener)


@attack("TCP from a process tool (fork/exec allowed)", full=BOTH, reduced=SECCOMP_SOCKET)
def test_tcp_from_a_process_tool(attacker: Attacker, tcp_listener: socket.socket) -> None:
    result = attacker.attack(tool="connect_tcp", port=tcp_listener.getsockname()[1])
    assert not result.success and "PermissionError" in (result.error or "")
    assert _nothing_arrived(tcp_listener)


@attack("UDP to a socket on 127.0.0.1", full=BOTH, reduced=SECCOMP_SOCKET)
def test_udp_to_loopback(attacker: Attacker) -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as receiver:
        receiver.bind(("127.0.0.1", 0))
        receiver.settimeout(0.2)
        port = receiver.getsockname()[1]
        code = (
            "import socket\ns = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)\n"
            f"s.sendto(b'escaped', ('127.0.0.1', {port}))"
        )
        result = attacker.attack(code)
        assert not result.success and "PermissionError" in (result.error or "")
        with pytest.raises(TimeoutError):
            receiver.recv(100)


@attack("DNS lookup", full=BOTH, reduced=SECCOMP_SOCKET)
def test_dns_lookup(attacker: Attacker) -> None:
    result = attacker.attack("import socket\nsocket.getaddrinfo('example.com', 80)")
    assert not result.success
    assert any(w in (result.error or "") for w in ("PermissionError", "gaierror")), result.error


@attack("raw socket", full=BOTH, reduced=SECCOMP_SOCKET)
def test_raw_socket(attacker: Attacker) -> None:
    code = "import socket\nsocket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_ICMP)"
    result = attacker.attack(code)
    assert not result.success and "PermissionError" in (result.error or "")


@pytest.mark.parametrize("kind", ["path", "abstract"])
@attack(
    "unix socket to a host path or an abstract name",
    full=SECCOMP_SOCKET + "; the host's /tmp is not visible, abstract names belong to the "
    "(empty) network namespace",
    reduced=SECCOMP_SOCKET,
)
def test_unix_sockets(attacker: Attacker, kind: str) -> None:
    tag = uuid.uuid4().hex[:8]
    address = f"/tmp/a2e-attack-{tag}.sock" if kind == "path" else f"\0a2e-attack-{tag}"
    with socket.socket(socket.AF_UNIX) as server:
        server.bind(address)
        server.listen()
        server.settimeout(0.2)
        try:
            code = f"import socket\ns = socket.socket(socket.AF_UNIX)\ns.connect({address!r})"
            result = attacker.attack(code)
            assert not result.success and "PermissionError" in (result.error or "")
            assert _nothing_arrived(server)
        finally:
            if kind == "path":
                os.unlink(address)


@attack("io_uring (sockets and files behind seccomp's back)", full="seccomp", reduced="seccomp")
def test_io_uring(attacker: Attacker) -> None:
    code = (
        "import ctypes\nlibc = ctypes.CDLL(None, use_errno=True)\n"
        "params = ctypes.create_string_buffer(120)\n"
        "assert libc.syscall(425, 8, params) == -1\nctypes.get_errno()"
    )
    result = attacker.attack(code)
    assert result.success and result.data["value"] == 1  # EPERM


@attack(
    "what a process tool sees of the network",
    full="empty network namespace: only a down loopback",
    reduced="the host's interfaces are visible; socket() is still refused",
)
def test_the_network_a_process_tool_sees(sandbox: Sandbox, attacker: Attacker) -> None:
    result = attacker.attack(tool="network_view")
    assert result.success, result.error
    _assert_empty_namespace(sandbox, result.data["netns"], result.data["interfaces"])


def _assert_empty_namespace(sandbox: Sandbox, netns: str, interfaces: list[str]) -> None:
    host_netns = os.readlink("/proc/self/ns/net")
    if sandbox.has("network_namespace"):
        assert netns != host_netns and interfaces == ["lo"]
    else:
        assert netns == host_netns


@attack(
    "what a compute tool sees of the network (its zygote joined the empty namespace for it)",
    full="empty network namespace: only a down loopback",
    reduced="the host's interfaces are visible; socket() is still refused",
)
def test_the_network_a_compute_tool_sees(sandbox: Sandbox, attacker: Attacker) -> None:
    code = (
        "import os\nwith open('/proc/net/dev') as fh:\n"
        "    names = [line.split(':')[0].strip() for line in fh.readlines()[2:]]\n"
        "[os.readlink('/proc/self/ns/net'), names]"
    )
    result = attacker.attack(code)
    assert result.success, result.error
    _assert_empty_namespace(sandbox, *result.data["value"])


@attack(
    "a network tool passes another session a descriptor through an abstract unix socket",
    full="scoped_ipc: Landlock scopes abstract sockets to each worker (seccomp lets network "
    "tools bind and connect)",
    reduced="not contained: without Landlock, network tools share the host's abstract names",
)
def test_abstract_socket_between_network_tools(attacker: Attacker, sandbox: Sandbox) -> None:
    name = f"a2e-attack-{uuid.uuid4().hex[:8]}"
    heard: dict[str, object] = {}

    def listen() -> None:
        arguments = {"name": name, "role": "listen", "seconds": 4}
        heard["result"] = sandbox.victim.call(
            tool_name="abstract_socket", arguments=arguments, timeout=20
        )

    listening = threading.Thread(target=listen)
    listening.start()
    time.sleep(1.0)
    sent = attacker.attack(tool="abstract_socket", name=name, role="send", seconds=2)
    listening.join(timeout=30)
    received = heard["result"].data  # type: ignore[attr-defined]
    if sandbox.has("scoped_ipc"):
        assert "error" in sent.data and "error" in received, (sent.data, received)
    else:
        assert sent.data == {"sent": True} and received == {"received": 1}, (sent, received)
