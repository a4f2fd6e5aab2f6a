"""Tools that misbehave on purpose, run under the ``process`` profile (fork and exec allowed).

The security tests drive them through the public interface, exactly like any other tool.
"""

from __future__ import annotations

import os
import signal
import time
from typing import Any

from a2e.caps.tools._models import FailureReason, ToolDefinition, ToolParameter
from a2e.caps.tools._plugin import SandboxProfile, ToolExecutionError, ToolPlugin


def _tool(
    name: str,
    *params: ToolParameter,
    idempotent: bool = False,
    defer: bool = False,
    tags: tuple[str, ...] = ("test",),
) -> ToolDefinition:
    return ToolDefinition(
        name=name,
        description=f"test tool {name}",
        input_parameters=list(params),
        idempotent=idempotent,
        defer_loading=defer,
        tags=list(tags),
    )


def _param(name: str, type_: str = "string", required: bool = False) -> ToolParameter:
    return ToolParameter(name=name, type=type_, description=name, required=required)  # type: ignore[arg-type]


class HostileTools(ToolPlugin):
    name = "hostile"
    sandbox_profile = SandboxProfile.PROCESS

    def _list_tools(self) -> list[ToolDefinition]:
        return [
            _tool("escape_double_fork", _param("marker", required=True)),
            _tool("stubborn_children", _param("marker", required=True)),
            _tool(
                "fork_storm",
                _param("count", "integer", required=True),
                _param("marker", required=True),
                _param("hold", "boolean"),
            ),
            _tool("sleep", _param("seconds", "number", required=True)),
            _tool(
                "flaky",
                _param("fail_times", "integer", required=True),
                _param("reason"),
                idempotent=True,
            ),
            _tool("flaky_once_not_idempotent", _param("fail_times", "integer", required=True)),
            _tool("emit", _param("count", "integer", required=True), _param("kind")),
            _tool("crash", _param("how", required=True), idempotent=True),
            _tool("deferred_helper", defer=True, tags=("test", "rare")),
            _tool("network_view"),
            _tool("hold_memory", _param("mb", "integer", required=True)),
            _tool("spin", _param("seconds", "number", required=True)),
            _tool(
                "hold_and_sleep",
                _param("mb", "integer", required=True),
                _param("seconds", "number", required=True),
            ),
            _tool("background_holder"),
            _tool("connect_tcp", _param("port", "integer", required=True)),
            _tool("run_program", _param("argv", "array", required=True)),
            _tool("big_result", _param("mb", "integer", required=True)),
        ]

    def _execute_tool(self, tool_name: str, arguments: dict[str, Any]) -> dict[str, Any]:
        return getattr(self, f"_{tool_name}")(**arguments)  # type: ignore[no-any-return]

    def _escape_double_fork(self, marker: str) -> dict[str, Any]:
        """Daemonise a grandchild (fork, setsid, fork) that would live forever, then return."""
        os.mkdir(marker)
        if os.fork() == 0:
            os.setsid()
            if os.fork() == 0:
                os.chdir(marker)  # the test finds survivors by this working directory
                signal.signal(signal.SIGTERM, signal.SIG_IGN)
                while True:
                    time.sleep(1)
            os._exit(0)
        time.sleep(0.2)  # let the grandchild settle in
        return {"escaped": True}

    def _stubborn_children(self, marker: str) -> dict[str, Any]:
        """Children that ignore SIGTERM or stop themselves, while the tool hangs."""
        os.mkdir(marker)
        for stop_self in (False, True):
            if os.fork() == 0:
                os.chdir(marker)
                signal.signal(signal.SIGTERM, signal.SIG_IGN)
                if stop_self:
                    os.kill(os.getpid(), signal.SIGSTOP)
                while True:
                    time.sleep(1)
        while True:
            time.sleep(1)

    def _fork_storm(self, count: int, marker: str, hold: bool = True) -> dict[str, Any]:
        os.mkdir(marker)
        os.chdir(marker)  # every child inherits it: the test finds survivors by it
        children, refused = 0, ""
        for _ in range(count):
            try:
                if os.fork() == 0:
                    time.sleep(60)
                    os._exit(0)
                children += 1
            except OSError as exc:
                refused = str(exc)
                break
        if hold:
            time.sleep(60)
        return {"children": children, "refused": refused}

    def _sleep(self, seconds: float) -> dict[str, Any]:
        self.emit("status", {"message": "sleeping"})
        time.sleep(seconds)
        return {"slept": seconds}

    def _count_attempt(self) -> int:
        path = "attempts.txt"
        count = int(open(path).read()) + 1 if os.path.exists(path) else 1
        with open(path, "w") as fh:
            fh.write(str(count))
        return count

    def _flaky(self, fail_times: int, reason: str | None = None) -> dict[str, Any]:
        """Crashes (or, given a ``reason``, fails saying it) on its first ``fail_times``
        attempts."""
        attempt = self._count_attempt()
        if attempt <= fail_times:
            if reason is None:
                os._exit(3)
            raise ToolExecutionError(f"attempt {attempt} failed", reason=FailureReason(reason))
        return {"attempt": attempt}

    def _flaky_once_not_idempotent(self, fail_times: int) -> dict[str, Any]:
        return self._flaky(fail_times)

    def _emit(self, count: int, kind: str = "progress") -> dict[str, Any]:
        for i in range(count):
            if kind == "progress":
                self.emit("progress", {"pct": min(100, i), "message": f"step {i}"})
            else:
                self.emit("log", {"level": "info", "message": f"line {i}"})
        return {"emitted": count}

    def _crash(self, how: str) -> dict[str, Any]:
        if how == "segfault":
            import ctypes

            ctypes.string_at(0)
        if how == "exit":
            os._exit(7)
        if how == "kill_self":
            os.kill(os.getpid(), signal.SIGKILL)
            os._exit(9)  # pid 1 of a namespace ignores its own SIGKILL; end anyway
        raise RuntimeError(f"unknown crash {how!r}")

    def _deferred_helper(self) -> dict[str, Any]:
        return {}

    def _hold_memory(self, mb: int) -> dict[str, Any]:
        """Memory RLIMIT_AS does not see: pages of a memfd that is written, never mapped."""
        chunk = b"x" * (16 << 20)
        held = []
        for i in range(mb // 16):
            if i % 4 == 0:  # a fresh memfd every 64 MiB: RLIMIT_FSIZE caps each one
                held.append(os.memfd_create("hog"))
            os.write(held[-1], chunk)
        return {"held_mb": mb}

    def _spin(self, seconds: float) -> dict[str, Any]:
        """A call that computes: on the CPU until ``seconds`` have passed."""
        self.emit("status", {"message": "spinning"})
        until, turns = time.monotonic() + seconds, 0
        while time.monotonic() < until:
            turns += 1
        return {"turns": turns}

    def _hold_and_sleep(self, mb: int, seconds: float) -> dict[str, Any]:
        """A call that holds memory and no CPU: ``mb`` MiB written, then asleep."""
        held = self._hold_memory(mb)
        self.emit("status", {"message": "holding"})
        time.sleep(seconds)
        return held

    def _big_result(self, mb: int) -> dict[str, Any]:
        """A result larger than a frame may be."""
        return {"blob": "x" * (mb << 20)}

    def _network_view(self) -> dict[str, Any]:
        with open("/proc/net/dev") as fh:
            interfaces = [line.split(":")[0].strip() for line in fh.readlines()[2:]]
        return {"netns": os.readlink("/proc/self/ns/net"), "interfaces": interfaces}

    def _background_holder(self) -> dict[str, Any]:
        """Leave a child behind that holds every inherited fd (the result pipe among them)."""
        if os.fork() == 0:
            signal.signal(signal.SIGTERM, signal.SIG_IGN)
            while True:
                time.sleep(1)
        return {"left": "a child holding the pipe"}

    def _connect_tcp(self, port: int) -> dict[str, Any]:
        import socket

        with socket.create_connection(("127.0.0.1", port), timeout=2) as conn:
            conn.sendall(b"escaped")
        return {"connected": True}

    def _run_program(self, argv: list[str]) -> dict[str, Any]:
        import subprocess

        proc = subprocess.run(argv, capture_output=True, text=True, timeout=10)
        return {"code": proc.returncode, "stdout": proc.stdout, "stderr": proc.stderr}


class HostileNetworkTools(ToolPlugin):
    """A tool under the ``network`` profile: sockets allowed, the host's network."""

    name = "hostile_network"
    sandbox_profile = SandboxProfile.NETWORK

    def _list_tools(self) -> list[ToolDefinition]:
        return [
            _tool("daemon_server", _param("port_file", required=True)),
            _tool(
                "abstract_socket",
                _param("name", required=True),
                _param("role", required=True),
                _param("seconds", "number"),
            ),
        ]

    def _execute_tool(self, tool_name: str, arguments: dict[str, Any]) -> dict[str, Any]:
        return getattr(self, f"_{tool_name}")(**arguments)  # type: ignore[no-any-return]

    def _abstract_socket(self, name: str, role: str, seconds: float = 5) -> dict[str, Any]:
        """``listen``: bind the abstract unix socket ``name`` and wait ``seconds`` for a
        datagram carrying a descriptor; ``send``: send one, with this call's workspace, to it.
        What happened, or the error that stopped it."""
        import array
        import socket

        sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        address = b"\0" + name.encode()
        try:
            if role == "listen":
                sock.bind(address)
                sock.settimeout(seconds)
                _, extra, _, _ = sock.recvmsg(64, socket.CMSG_SPACE(8))
                return {"received": sum(len(data) // 4 for _, _, data in extra)}
            workspace = os.open(".", os.O_RDONLY | os.O_DIRECTORY)
            fds = array.array("i", [workspace])
            deadline = time.monotonic() + seconds
            while True:
                try:
                    sock.sendmsg([b"x"], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, fds)], 0, address)
                    return {"sent": True}
                except ConnectionRefusedError:  # not listening yet
                    if time.monotonic() > deadline:
                        raise
                    time.sleep(0.1)
        except OSError as exc:
            return {"error": f"{type(exc).__name__}: {exc}"}
        finally:
            sock.close()

    def _daemon_server(self, port_file: str) -> dict[str, Any]:
        """A daemonised TCP server on 127.0.0.1 (fork, setsid, fork) that would serve forever."""
        import socket

        read_end, write_end = os.pipe()
        if os.fork() == 0:
            os.setsid()
            if os.fork() == 0:
                server = socket.socket()
                server.bind(("127.0.0.1", 0))
                server.listen()
                os.write(write_end, str(server.getsockname()[1]).encode())
                while True:
                    conn, _ = server.accept()
                    conn.sendall(b"still here")
                    conn.close()
            os._exit(0)
        port = int(os.read(read_end, 16))
        with open(port_file, "w") as fh:
            fh.write(str(port))
        return {"port": port}
