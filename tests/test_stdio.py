"""``a2e serve --stdio`` as a real subprocess, driven by raw lines and by ``A2EClient``."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from importlib import metadata
from pathlib import Path

import pytest

from a2e._client import A2EClient
from a2e._codec import MAX_MESSAGE_BYTES
from a2e.caps.tools._client import ToolAPI
from a2e.caps.tools._models import ToolEvent
from a2e.transports._stdio import StdioTransport
from a2e_engine.engine import Engine
from a2e_engine.engine._state_dir import default_parent
from a2e_engine.engine.transports._lines import _Splitter
from a2e_engine.engine.transports._stdio import serve_stdio
from tests.waiting import running

SERVE = [sys.executable, "-m", "a2e_engine.engine.cli", "serve", "--stdio", "--prefork", "1"]


@pytest.fixture(scope="module")
def server() -> Iterator[StdioTransport]:
    transport = StdioTransport(SERVE, stderr=subprocess.DEVNULL)
    yield transport
    transport.close()


@pytest.fixture(scope="module")
def client(server: StdioTransport) -> Iterator[A2EClient]:
    client = A2EClient(server, client_name="stdio-test")
    yield client


def test_handshake_gives_a_session(client: A2EClient) -> None:
    """The server names itself with the version that is installed (the package's metadata)."""
    assert client.session_id and client.capabilities == ["tools"]
    assert client.server == f"a2e-engine/{metadata.version('a2e-engine')}"


def test_calls_over_stdio(client: A2EClient) -> None:
    tools = ToolAPI(client)
    assert "python_eval" in {t.name for t in tools.list()}
    events: list[ToolEvent] = []
    result = tools.call(
        tool_name="python_eval",
        arguments={"code": "print('hi')\n2 + 3"},
        streaming=True,
        on_event=events.append,
    )
    assert result.success and result.data["value"] == 5
    assert [e.data["chunk"] for e in events] == ["hi\n"]


def test_several_calls_in_flight_replies_as_each_finishes(client: A2EClient) -> None:
    tools = ToolAPI(client)
    slow = tools.start(
        tool_name="python_eval", arguments={"code": "import time\ntime.sleep(1.5)\n'slow'"}
    )
    fast = tools.start(tool_name="python_eval", arguments={"code": "'fast'"})
    assert fast.result().data["value"] == "fast"
    assert not slow._pending.done  # the fast reply did not wait for the slow one
    assert slow.result().data["value"] == "slow"


def _exchange(lines: list[bytes], expect: int) -> list[dict]:
    proc = subprocess.Popen(
        SERVE, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL
    )
    out, _ = proc.communicate(b"".join(lines), timeout=60)
    replies = [json.loads(line) for line in out.splitlines()]
    assert len(replies) == expect, replies
    return replies


def test_bad_lines_get_errors_and_the_connection_goes_on() -> None:
    handshake = json.dumps({"type": "handshake/req", "id": "h1", "capabilities": ["tools"]})
    call = json.dumps(
        {
            "type": "tool/call/req",
            "id": "c1",
            "tool_name": "python_eval",
            "arguments": {"code": "6 * 7"},
        }
    )
    replies = _exchange(
        [
            b'{"type": "tool/list/req", "id": "early"}\n',
            b"this is not json\n",
            handshake.encode() + b"\n",
            b'{"type": "tool/dance", "id": "u1"}\n',
            b'{"type": "tool/call/req", "id": "w1", "tool_name": 7, "arguments": {}}\n',
            b"\n",
            b"x" * (MAX_MESSAGE_BYTES + 10) + b"\n",
            b'{"type": "tool/cancel/req", "id": "k1", "req_id": "nothing"}\n',
            b"[" * 100_000 + b"\n",
            b'{"type": "tool/call/req", "id": "n1", "tool_name": "python_eval", '
            b'"arguments": {"code": NaN}}\n',
            call.encode() + b"\n",
        ],
        expect=10,
    )
    by_id = {r.get("req_id"): r for r in replies}
    assert by_id["early"]["code"] == "handshake_required"
    assert by_id["h1"]["type"] == "handshake/resp"
    assert by_id["u1"]["code"] == "unknown_type"
    assert by_id["w1"]["code"] == "invalid_message" and "tool_name" in by_id["w1"]["message"]
    assert by_id["k1"]["code"] == "unknown_request"
    assert by_id["c1"]["data"]["data"]["value"] == 42
    no_id = [r for r in replies if r.get("req_id") == ""]
    assert sorted(r["code"] for r in no_id) == [
        "invalid_json",
        "invalid_json",
        "invalid_json",
        "message_too_large",
    ]
    assert any("nested too deeply" in r["message"] for r in no_id)
    assert any("NaN is not a JSON value" in r["message"] for r in no_id)


def test_end_of_input_finishes_calls_in_flight_first() -> None:
    lines = [json.dumps({"type": "handshake/req", "id": "h", "capabilities": ["tools"]}).encode()]
    for i in range(5):
        lines.append(
            json.dumps(
                {
                    "type": "tool/call/req",
                    "id": f"c{i}",
                    "tool_name": "python_eval",
                    "arguments": {"code": f"import time\ntime.sleep(0.2)\n{i}"},
                }
            ).encode()
        )
    started = time.monotonic()
    replies = _exchange([line + b"\n" for line in lines], expect=6)
    assert sorted(r["data"]["data"]["value"] for r in replies[1:]) == list(range(5))
    assert time.monotonic() - started < 30


def test_wrong_token_is_refused() -> None:
    proc = subprocess.Popen(
        [*SERVE, "--token", "s3cret"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
    )
    lines = b"".join(
        json.dumps(
            {"type": "handshake/req", "id": i, "capabilities": ["tools"], "token": t}
        ).encode()
        + b"\n"
        for i, t in (("bad", "guess"), ("good", "s3cret"))
    )
    out, _ = proc.communicate(lines, timeout=60)
    replies = {r["req_id"]: r for r in map(json.loads, out.splitlines())}
    assert replies["bad"]["code"] == "unauthorized"
    assert replies["good"]["type"] == "handshake/resp"


def test_a_result_that_cannot_be_serialised_fails_only_that_call(client: A2EClient) -> None:
    tools = ToolAPI(client)
    deep = tools.call(
        tool_name="python_eval", arguments={"code": "x = []\nfor _ in range(300): x = [x]\nx"}
    )
    assert not deep.success and "could not be sent" in (deep.error or "")
    odd = tools.call(tool_name="python_eval", arguments={"code": "'\\ud800'"})
    assert odd.success and odd.data["value"] == "\ud800"
    assert tools.call(tool_name="python_eval", arguments={"code": "1"}).success


def test_a_dead_host_fails_calls_at_once() -> None:
    transport = StdioTransport(SERVE, stderr=subprocess.DEVNULL)
    client = A2EClient(transport)
    tools = ToolAPI(client)
    transport.process.kill()
    transport.process.wait()
    started = time.monotonic()
    first = tools.call(tool_name="python_eval", arguments={"code": "1"})
    second = tools.call(tool_name="python_eval", arguments={"code": "1"})
    assert not first.success and not second.success
    assert time.monotonic() - started < 5
    transport.close()


def test_a_killed_host_leaves_no_sandbox_behind() -> None:
    import glob
    import os
    import signal

    import psutil

    # A parent of its own, under /var/tmp as the default one: no other engine's state there.
    parent = tempfile.mkdtemp(prefix="a2e-test-parent-", dir=default_parent())
    os.chmod(parent, 0o711)  # as the default parent lets session uids through
    pattern = os.path.join(parent, "a2e-engine-*")
    environment = {**os.environ, "TMPDIR": parent}
    transport = StdioTransport(SERVE, env=environment, stderr=subprocess.DEVNULL)
    client = A2EClient(transport)
    pending = running(ToolAPI(client), "import time\ntime.sleep(60)")
    host = psutil.Process(transport.process.pid)
    sandbox = host.children(recursive=True)
    assert sandbox, "the host should have a zygote"
    cgroups = glob.glob("/sys/fs/cgroup/*/a2e-sandbox-*") + glob.glob(
        "/sys/fs/cgroup/a2e-sandbox-*"
    )
    state_dirs = glob.glob(pattern)
    assert len(state_dirs) == 1
    os.kill(transport.process.pid, signal.SIGKILL)
    transport.process.wait()
    assert not pending.result().success
    _gone, alive = psutil.wait_procs(sandbox, timeout=10)
    assert alive == [], alive
    pids = {str(p.pid) for p in sandbox}
    mine = [c for c in cgroups if c.rsplit("-", 1)[-1] in pids]
    if os.geteuid() == 0 and os.path.isdir("/sys/fs/cgroup/pids"):
        assert mine, "the zygote should have made a pids cgroup"
    deadline = time.monotonic() + 5
    while any(os.path.exists(c) for c in mine) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not any(os.path.exists(c) for c in mine)
    # Its workspaces and their quota mounts, cleaned up by the zygote on the host's behalf.
    (state_dir,) = state_dirs
    with open("/proc/self/mountinfo") as fh:
        assert state_dir not in fh.read()
    assert not os.path.exists(state_dir)
    transport.close()
    os.rmdir(parent)


def test_files_instead_of_pipes_are_served_too(tmp_path: Path) -> None:
    """``a2e serve --stdio < calls.jsonl > replies.jsonl``: regular files, which the loop
    cannot watch, go through a thread; the last line needs no newline."""
    calls = tmp_path / "calls.jsonl"
    handshake = {"type": "handshake/req", "id": "h", "capabilities": ["tools"]}
    call = {
        "type": "tool/call/req",
        "id": "c",
        "tool_name": "python_eval",
        "arguments": {"code": "6 * 7"},
    }
    calls.write_bytes(
        json.dumps(handshake).encode() + b"\n\nnot json\n" + json.dumps(call).encode()
    )
    replies_path = tmp_path / "replies.jsonl"
    with calls.open("rb") as stdin, replies_path.open("wb") as stdout:
        subprocess.run(SERVE, stdin=stdin, stdout=stdout, stderr=subprocess.DEVNULL, timeout=60)
    replies = [json.loads(line) for line in replies_path.read_bytes().splitlines()]
    by_id = {r.get("req_id"): r for r in replies}
    assert len(replies) == 3
    assert by_id["h"]["type"] == "handshake/resp"
    assert by_id[""]["code"] == "invalid_json"
    assert by_id["c"]["data"]["data"]["value"] == 42


def test_serving_pipes_gives_them_back_blocking() -> None:
    """The loop makes the pipes non-blocking while it serves them; the process that handed them
    to us shares that mode, so it is restored at the end."""
    stdin_r, stdin_w = os.pipe()
    stdout_r, stdout_w = os.pipe()
    handshake = {"type": "handshake/req", "id": "h", "capabilities": ["tools"]}
    os.write(stdin_w, json.dumps(handshake).encode() + b"\n")
    os.close(stdin_w)
    stdin = open(stdin_r, "rb", closefd=False)  # as the server opens fds 0 and 1
    stdout = open(stdout_w, "wb", closefd=False)
    with Engine() as engine:
        engine.run(serve_stdio(engine, stdin, stdout), timeout=60)
    assert os.get_blocking(stdin_r) and os.get_blocking(stdout_w)
    for fd in (stdin_r, stdout_w):
        os.close(fd)
    with open(stdout_r, "rb") as replies:
        assert json.loads(replies.readline())["type"] == "handshake/resp"


def _split(chunks: list[bytes], limit: int = 10) -> list[bytes | str]:
    seen: list[bytes | str] = []
    splitter = _Splitter(limit, seen.append, lambda: seen.append("too long"))
    for chunk in chunks:
        splitter.feed(chunk)
    splitter.end()
    return seen


def test_lines_are_cut_wherever_the_reads_fall() -> None:
    assert _split([b"ab", b"c\nde", b"f\n", b"\n  \n", b"g"]) == [b"abc", b"def", b"g"]
    assert _split([b"0123456789\n"]) == [b"0123456789"]  # exactly the limit


def test_an_over_long_line_is_reported_once_and_skipped() -> None:
    assert _split([b"01234567", b"89ab", b"cdef", b"ghi\nok\n"]) == ["too long", b"ok"]
    assert _split([b"0123456789abc\nok"]) == ["too long", b"ok"]
    assert _split([b"ok\n", b"0123456789abc"]) == [b"ok", "too long"]


def test_one_socket_as_stdin_and_stdout() -> None:
    """Socket activation hands the server one socket as both stdin and stdout: one file
    description, so one blocking mode, for the reading and the writing side."""
    ours, theirs = socket.socketpair()
    with theirs:
        proc = subprocess.Popen(
            SERVE, stdin=theirs.fileno(), stdout=theirs.fileno(), stderr=subprocess.DEVNULL
        )
    handshake = {"type": "handshake/req", "id": "h", "capabilities": ["tools"]}
    call = {
        "type": "tool/call/req",
        "id": "c",
        "tool_name": "python_eval",
        "arguments": {"code": "print('z' * 300_000)"},  # more than a socket buffer holds
    }
    ours.sendall(b"".join(json.dumps(m).encode() + b"\n" for m in (handshake, call)))
    ours.shutdown(socket.SHUT_WR)  # end of input while the reply is still to come
    ours.settimeout(60)
    received = b""
    while chunk := ours.recv(1 << 16):
        received += chunk
    ours.close()
    assert proc.wait(60) == 0
    replies = {r["req_id"]: r for r in map(json.loads, received.splitlines())}
    assert replies["h"]["type"] == "handshake/resp"
    assert replies["c"]["data"]["data"]["stdout"] == "z" * 300_000 + "\n"
