"""Escapes from the call's process tree: whatever a call starts must end with it."""

from __future__ import annotations

import socket
import time
import uuid

from tests.security.harness import Attacker, Sandbox, attack

TREE = "PID namespace: every process in it dies with the worker"
ORPHANS = "zygote as subreaper: orphans are re-parented to it and killed"


@attack("background child holding the result pipe", full=TREE, reduced=ORPHANS)
def test_background_child_holding_the_pipe(attacker: Attacker) -> None:
    started = time.monotonic()
    result = attacker.attack(tool="background_holder", timeout=10)
    assert result.success, result.error
    assert time.monotonic() - started < 5  # the result is not held up by the open pipe


@attack("double fork + setsid", full=TREE, reduced=ORPHANS)
def test_double_fork_and_setsid(attacker: Attacker) -> None:
    result = attacker.attack(tool="escape_double_fork", marker=uuid.uuid4().hex[:8])
    assert result.success, result.error


@attack("fork storm held until the deadline", full=TREE, reduced=ORPHANS)
def test_fork_storm_until_the_deadline(attacker: Attacker) -> None:
    result = attacker.attack(tool="fork_storm", count=50, marker=uuid.uuid4().hex[:8], timeout=2)
    assert not result.success and "timed out" in (result.error or "")


@attack("daemonised TCP server (network profile)", full=TREE, reduced=ORPHANS)
def test_daemonised_server(sandbox: Sandbox, attacker: Attacker) -> None:
    result = attacker.attack(tool="daemon_server", port_file="port.txt")
    assert result.success, result.error
    port = result.data["port"]
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=2) as conn:
            answer = conn.recv(100)
    except OSError:
        answer = b""
    assert answer != b"still here", "the daemon outlived its call"
