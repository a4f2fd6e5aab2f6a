"""``run_shell``: a real /bin/sh in a real sandboxed worker."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest

from a2e.caps.tools._client import ToolAPI
from a2e.caps.tools._models import ToolEvent, ToolResult
from a2e_engine.engine import Engine


@pytest.fixture(scope="module")
def tools() -> Iterator[ToolAPI]:
    with Engine() as engine:
        client = engine.connect()
        yield ToolAPI(client)
        client.close()


def shell(tools: ToolAPI, command: str, timeout: int = 20, **arguments: Any) -> ToolResult:
    return tools.call(
        tool_name="run_shell", arguments={"command": command, **arguments}, timeout=timeout
    )


def test_output_and_exit_code(tools: ToolAPI) -> None:
    result = shell(tools, "echo hello; echo oops >&2")
    assert result.success and result.data == {
        "exit_code": 0,
        "stdout": "hello\n",
        "stderr": "oops\n",
    }
    failed = shell(tools, "echo partial; exit 3")
    assert not failed.success and failed.error == "the command exited with code 3"
    assert failed.data["exit_code"] == 3 and failed.data["stdout"] == "partial\n"
    killed = shell(tools, "kill -9 $$")
    assert not killed.success and killed.error == "the command was killed by SIGKILL"
    # A real-time signal: one Python's signal.Signals has no name for.
    realtime = shell(tools, "kill -35 $$")
    assert not realtime.success and realtime.error == "the command was killed by signal 35"


def test_lines_stream_as_they_are_printed(tools: ToolAPI) -> None:
    seen: list[tuple[float, str]] = []

    def on_event(event: ToolEvent) -> None:
        seen.append((time.monotonic(), event.data["chunk"]))

    started = time.monotonic()
    result = tools.call(
        tool_name="run_shell",
        arguments={"command": "for i in 1 2 3; do echo line $i; sleep 0.3; done"},
        streaming=True,
        on_event=on_event,
        timeout=20,
    )
    assert result.success
    assert [chunk for _, chunk in seen] == ["line 1\n", "line 2\n", "line 3\n"]
    assert seen[0][0] - started < 0.6 + 0.3  # the first line arrived long before the end


def test_cwd_env_and_stdin(tools: ToolAPI) -> None:
    assert shell(tools, "mkdir -p sub/dir").success
    result = shell(
        tools,
        'pwd; echo "$GREETING"; cat',
        cwd="sub/dir",
        env={"GREETING": "hi"},
        stdin="from stdin\n",
    )
    assert result.success, result.error
    lines = result.data["stdout"].splitlines()
    assert lines[0].endswith("/workspace/sub/dir") and lines[1:] == ["hi", "from stdin"]
    for cwd in ("..", "/etc", "sub/../../.."):
        refused = shell(tools, "pwd", cwd=cwd)
        assert not refused.success and "outside the allowed roots" in (refused.error or ""), cwd
    bad_env = shell(tools, "true", env={"NOT VALID": "x"})
    assert not bad_env.success and "not a valid variable name" in (bad_env.error or "")


def test_a_background_job_does_not_hold_the_call(tools: ToolAPI) -> None:
    started = time.monotonic()
    result = shell(tools, "sleep 30 & echo started")
    assert result.success and result.data["stdout"] == "started\n"
    assert time.monotonic() - started < 5


def test_partial_output_on_timeout(tools: ToolAPI) -> None:
    result = shell(tools, "echo before; sleep 30; echo after", timeout=1)
    assert not result.success and "timed out" in (result.error or "")
    assert result.data == {"stdout": "before\n"}


def test_no_network_for_commands(tools: ToolAPI) -> None:
    result = shell(tools, "python3 -c 'import socket; socket.socket()'")
    assert not result.success and "PermissionError" in result.data["stderr"]


def test_big_output_keeps_head_and_tail_and_saves_it_all(tools: ToolAPI) -> None:
    result = shell(tools, "seq 1 400000")
    assert result.success and result.truncated
    stdout, path = result.data["stdout"], result.data["stdout_path"]
    assert stdout.startswith("1\n2\n3\n") and stdout.endswith("399999\n400000\n")
    assert "characters of stdout omitted" in stdout
    saved = shell(tools, f"wc -l < {path}")
    assert saved.data["stdout"].strip() == "400000"
