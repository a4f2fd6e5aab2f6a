"""The engine end to end through ``ToolAPI``: real zygote, real workers, real seccomp; what
is the connection's and the call's alone above a sandbox without processes (tests/fakes.py)."""

from __future__ import annotations

import json
import logging
import os
import signal
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

from a2e._messages import A2EError, A2EMessage, HandshakeRequest, HandshakeResponse
from a2e.caps.tools._client import ToolAPI
from a2e.caps.tools._models import (
    ToolCallRequest,
    ToolCallResponse,
    ToolCancelRequest,
    ToolDefinition,
    ToolEvent,
    ToolListRequest,
    ToolListResponse,
    ToolParameter,
    ToolResult,
)
from a2e.caps.tools._plugin import ToolPlugin
from a2e_engine.engine import Engine, EngineConfig, Isolation, ToolPolicy
from a2e_engine.engine._connection import MAX_BEHIND
from a2e_engine.engine._session import SessionState
from tests.fakes import FakeEngine
from tests.waiting import running, wait_for


def test_the_readme_example(engine: Engine) -> None:
    client = engine.connect(capabilities=["tools"])
    tools = ToolAPI(client)
    result = tools.call(tool_name="python_eval", arguments={"code": "print(1 + 1)"})
    assert result.success, result.error
    assert result.data["stdout"] == "2\n"
    assert result.exit_code == 0 and result.duration_ms >= 0
    assert result.usage is not None and result.usage.attempts == 1
    assert (
        result.usage.cpu_ms is not None
        and result.usage.peak_rss_kb
        and result.usage.peak_rss_kb > 1000
    )
    client.close()


def test_list_hides_deferred_tools_and_search_finds_them(fake_tools: ToolAPI) -> None:
    tools = fake_tools
    names = {t.name for t in tools.list()}
    assert {"python_eval", "read_file", "sleep"} <= names
    assert "deferred_helper" not in names
    assert [t.name for t in tools.list(query="deferred", include_deferred=True)] == [
        "deferred_helper"
    ]
    assert tools.list(query="deferred") == []
    writers = {t.name for t in tools.list(tags=["fs", "write"])}
    assert writers == {"write_file", "make_dir", "delete", "move"}
    assert tools.client._tools_cache  # the spec's cache


def test_python_eval_value_errors_and_stdin(tools: ToolAPI) -> None:
    value = tools.call(tool_name="python_eval", arguments={"code": "x = 6\nx * 7"})
    assert value.data["value"] == 42 and value.data["value_repr"] == "42"
    stdin = tools.call(
        tool_name="python_eval",
        arguments={"code": "import sys\nsys.stdin.read().upper()", "stdin": "abc"},
    )
    assert stdin.data["value"] == "ABC"
    failed = tools.call(tool_name="python_eval", arguments={"code": "print('before')\n1/0"})
    assert not failed.success and failed.error_code == "tool_error"
    assert failed.error == "ZeroDivisionError: division by zero"
    assert failed.data["stdout"] == "before\n"
    assert 'File "<python_eval>", line 2' in failed.data["stderr"]
    assert "python_eval.py" not in failed.data["stderr"]  # the traceback shows user code only
    exception = failed.data["exception"]
    assert (exception["type"], exception["message"]) == ("ZeroDivisionError", "division by zero")
    assert exception["traceback"].startswith("Traceback") and "line 2" in exception["traceback"]
    syntax = tools.call(tool_name="python_eval", arguments={"code": "def ("})
    assert not syntax.success and "SyntaxError" in (syntax.error or "")
    exits = tools.call(tool_name="python_eval", arguments={"code": "raise SystemExit(0)"})
    assert not exits.success and "SystemExit" in (exits.error or "")


def test_streaming_events_arrive_in_order_while_the_call_runs(tools: ToolAPI) -> None:
    seen: list[tuple[int, float]] = []
    code = "import time\nfor i in range(3):\n    print(i, flush=True)\n    time.sleep(0.3)\n"
    started = time.monotonic()
    result = tools.call(
        tool_name="python_eval",
        arguments={"code": code},
        streaming=True,
        on_event=lambda e: seen.append((e.seq, time.monotonic() - started)),
    )
    finished = time.monotonic() - started
    assert result.success
    assert [s for s, _ in seen] == [0, 1, 2]
    assert seen[0][1] < finished - 0.4  # the first line arrived long before the end
    assert [e.data["chunk"] for e in result.events] == ["0\n", "1\n", "2\n"]
    assert all(e.req_id == result.events[0].req_id for e in result.events)


def test_non_streaming_calls_keep_their_events_in_the_result(fake_tools: ToolAPI) -> None:
    tools = fake_tools
    result = tools.call(tool_name="emit", arguments={"count": 5})
    assert result.success
    assert [e.data["message"] for e in result.events] == [f"step {i}" for i in range(5)]
    assert [e.seq for e in result.events] == list(range(5))


def test_every_event_callback_has_run_when_its_call_returns(fake_tools: ToolAPI) -> None:
    tools = fake_tools
    # In-process, a reply can complete its call without the client's reader thread: never
    # ahead of an event of the same call still waiting for its (slow) callback.
    seen: list[int] = []

    def slow(event: ToolEvent) -> None:
        time.sleep(0.05)
        seen.append(event.seq)

    for _ in range(3):
        seen.clear()
        result = tools.call(tool_name="emit", arguments={"count": 5}, streaming=True, on_event=slow)
        assert result.success
        assert seen == [0, 1, 2, 3, 4]


def test_a_blocked_event_callback_does_not_hold_up_other_calls(fake_tools: ToolAPI) -> None:
    tools = fake_tools
    gate = threading.Event()
    entered = threading.Event()

    def blocking(event: ToolEvent) -> None:
        entered.set()
        gate.wait(30)

    held = tools.start(tool_name="emit", arguments={"count": 2}, streaming=True, on_event=blocking)
    try:
        assert entered.wait(30)
        # The reader thread is stuck in the callback; other calls' replies still arrive.
        result = tools.start(tool_name="python_eval", arguments={"code": "6 * 7"}).result(20)
        assert result.success and result.data["value"] == 42
    finally:
        gate.set()
    assert held.result(30).success


def test_workspace_is_shared_within_a_session_and_private_across(engine: Engine) -> None:
    first, second = ToolAPI(engine.connect()), ToolAPI(engine.connect())
    wrote = first.call(
        tool_name="python_eval", arguments={"code": "open('shared.txt','w').write('hello')"}
    )
    assert wrote.success
    assert first.call(tool_name="read_file", arguments={"path": "shared.txt"}).data == {
        "content": "hello",
        "size": 5,
    }
    other = second.call(tool_name="read_file", arguments={"path": "shared.txt"})
    assert not other.success and "No such file" in (other.error or "")
    ws = first.call(tool_name="python_eval", arguments={"code": "import os\nos.getcwd()"}).data[
        "value"
    ]
    peek = second.call(tool_name="read_file", arguments={"path": f"{ws}/shared.txt"})
    assert not peek.success and "outside the allowed roots" in (peek.error or "")
    first.client.close()
    second.client.close()


def test_read_file_roots_and_escapes(tools: ToolAPI) -> None:
    hostname = tools.call(tool_name="read_file", arguments={"path": "/etc/hostname"})
    assert hostname.success and hostname.data["content"] == open("/etc/hostname").read()
    made = tools.call(
        tool_name="python_eval",
        arguments={
            "code": "import os\nos.symlink('/root', 'link')\nos.symlink('/etc/passwd', 'ok')"
        },
    )
    assert made.success, made.error
    for path in (
        "../../../../../../root/.bashrc",
        "link/.bashrc",
        "/root/.bashrc",
        "/proc/1/environ",
    ):
        result = tools.call(tool_name="read_file", arguments={"path": path})
        assert not result.success and "outside the allowed roots" in (result.error or ""), path
        assert result.usage is not None and result.usage.attempts == 1  # deterministic: no retry
    assert tools.call(tool_name="read_file", arguments={"path": "ok"}).success


def test_unknown_tool_denied_tool_and_invalid_arguments(fake_engine: Engine) -> None:
    engine = fake_engine
    tools = ToolAPI(engine.connect(policy=ToolPolicy(deny=["read_*"])))
    unknown = tools.call(tool_name="no_such_tool", arguments={})
    assert unknown.error_code == "unknown_tool" and "code_eval" in (unknown.error or "")
    denied = tools.call(tool_name="read_file", arguments={"path": "x"})
    assert denied.error_code == "tool_denied" and "denied by policy" in (denied.error or "")
    assert "read_file" not in {t.name for t in tools.list()}
    invalid = tools.call(tool_name="python_eval", arguments={"code": 5, "extra": True})
    assert invalid.error_code == "tool_error"
    assert "'code' must be of type string" in (invalid.error or "")
    assert "unexpected argument 'extra'" in (invalid.error or "")
    tools.client.close()


def test_a_session_without_the_tools_capability_is_denied(fake_engine: Engine) -> None:
    engine = fake_engine
    client = engine.connect(capabilities=["skills"])
    assert client.capabilities == []
    result = ToolAPI(client).call(tool_name="python_eval", arguments={"code": "1"})
    assert not result.success and result.error_code == "tool_denied"
    client.close()


def test_policy_function_sees_the_session(tmp_path: Any) -> None:
    def only_for_trusted(session: Any, tool: str) -> str | None:
        return None if session.client == "trusted" else f"{session.client} may not run {tool}"

    with FakeEngine(policy=only_for_trusted, config=EngineConfig(prefork=1)) as engine:
        trusted = ToolAPI(engine.connect(client_name="trusted"))
        assert trusted.call(tool_name="python_eval", arguments={"code": "1"}).success
        other = ToolAPI(engine.connect(client_name="guest")).call(
            tool_name="python_eval", arguments={"code": "1"}
        )
        assert other.error_code == "tool_denied" and other.error == "guest may not run python_eval"


def test_idempotent_tools_are_retried_in_fresh_workers(tools: ToolAPI) -> None:
    events: list[ToolEvent] = []
    result = tools.call(
        tool_name="flaky", arguments={"fail_times": 2}, streaming=True, on_event=events.append
    )
    assert result.success, result.error
    assert result.data == {"attempt": 3} and result.usage is not None
    assert result.usage.attempts == 3
    assert [e.kind for e in events] == ["status", "status"]
    assert "attempt 1 failed" in events[0].data["message"]


def test_retries_stop_at_the_attempt_limit(tools: ToolAPI) -> None:
    result = tools.call(tool_name="flaky", arguments={"fail_times": 10})
    assert not result.success and result.usage is not None and result.usage.attempts == 3
    assert "exited with code 3" in (result.error or "") and "after 3 attempts" in (
        result.error or ""
    )


@pytest.mark.parametrize(
    ("reason", "attempts"),
    [("tool_failed", 3), ("out_of_memory", 3), ("timeout", 1)],
)
def test_a_tool_failure_is_retried_unless_its_reason_says_another_attempt_cannot_mend_it(
    tools: ToolAPI, reason: str, attempts: int
) -> None:
    """The reason a tool gives reaches the caller as it gave it, and decides the retry: a
    timeout used up the time another attempt would need."""
    result = tools.call(tool_name="flaky", arguments={"fail_times": 10, "reason": reason})
    assert not result.success and result.reason == reason, result
    assert result.usage is not None and result.usage.attempts == attempts


def test_tools_not_marked_idempotent_are_not_retried(tools: ToolAPI) -> None:
    result = tools.call(tool_name="flaky_once_not_idempotent", arguments={"fail_times": 1})
    assert not result.success and result.usage is not None and result.usage.attempts == 1


def test_retries_never_run_past_the_deadline(tools: ToolAPI) -> None:
    started = time.monotonic()
    result = tools.call(tool_name="crash", arguments={"how": "exit"}, timeout=1)
    assert not result.success and time.monotonic() - started < 3


def test_cancellation_ends_a_call_mid_flight(tools: ToolAPI) -> None:
    started = time.monotonic()
    pending = running(tools, "import time\ntime.sleep(30)")
    pending.cancel()
    result = pending.result()
    assert not result.success and result.error_code == "tool_error"
    assert "cancelled" in (result.error or "")
    assert time.monotonic() - started < 5


def test_many_calls_in_flight_none_lost(tools: ToolAPI) -> None:
    pendings = [
        tools.start(tool_name="python_eval", arguments={"code": f"{i} * 2"}, timeout=120)
        for i in range(200)
    ]
    results = [p.result() for p in pendings]
    assert all(r.success for r in results), [r.error for r in results if not r.success][:3]
    assert [r.data["value"] for r in results] == [i * 2 for i in range(200)]


def test_the_client_is_safe_from_many_threads(tools: ToolAPI) -> None:
    def work(i: int) -> Any:
        return tools.call(tool_name="python_eval", arguments={"code": f"print({i})"}).data["stdout"]

    with ThreadPoolExecutor(16) as pool:
        outputs = list(pool.map(work, range(64)))
    assert outputs == [f"{i}\n" for i in range(64)]


def test_audit_trail_has_one_line_per_call(engine: Engine, tools: ToolAPI) -> None:
    path = engine.config.audit_path
    assert path is not None
    before = len(open(path).readlines())
    tools.call(tool_name="python_eval", arguments={"code": "1"}, correlation_id="turn-7")
    tools.call(tool_name="nope", arguments={})
    lines = [json.loads(line) for line in open(path).readlines()[before:]]
    assert len(lines) == 2
    ok, unknown = lines
    assert ok["tool"] == "python_eval" and ok["correlation_id"] == "turn-7"
    assert ok["outcome"] == "ok" and ok["attempts"] == 1 and ok["session"]
    assert unknown["error_code"] == "unknown_tool" and unknown["outcome"] == "refused"


def test_a_plugin_defined_inside_a_test_works() -> None:
    greeting = "hello from a local class"

    class LocalPlugin(ToolPlugin):
        name = "local"

        def _list_tools(self) -> list[ToolDefinition]:
            return [
                ToolDefinition(
                    name="greet",
                    description="greets",
                    input_parameters=[
                        ToolParameter(name="who", type="string", description="who", required=True)
                    ],
                )
            ]

        def _execute_tool(self, tool_name: str, arguments: dict[str, Any]) -> dict[str, Any]:
            import os

            return {"text": f"{greeting}, {arguments['who']}", "pid": os.getpid()}

    with Engine(
        plugins=[LocalPlugin()], builtin_tools=False, config=EngineConfig(prefork=1)
    ) as engine:
        result = ToolAPI(engine.connect()).call(tool_name="greet", arguments={"who": "zygote"})
        assert result.success, result.error
        assert result.data["text"] == "hello from a local class, zygote"


def test_duplicate_tool_names_are_refused() -> None:
    from a2e_engine.tools import PythonEval

    try:
        Engine(plugins=[PythonEval()])
    except ValueError as exc:
        assert "python_eval" in str(exc) and "unique" in str(exc)
    else:
        raise AssertionError("duplicate tool names were accepted")


def test_calls_queue_when_all_workers_are_busy() -> None:
    with Engine(config=EngineConfig(max_workers=1, prefork=1)) as engine:
        tools = ToolAPI(engine.connect())
        code = "import time\ntime.sleep(0.3)"
        started = time.monotonic()
        results = [
            p.result()
            for p in [
                tools.start(tool_name="python_eval", arguments={"code": code}) for _ in range(3)
            ]
        ]
        assert all(r.success for r in results)
        assert time.monotonic() - started >= 0.85  # one at a time
        assert max(r.usage.queued_ms or 0 for r in results if r.usage) >= 500
        waiting = tools.start(
            tool_name="python_eval", arguments={"code": "import time\ntime.sleep(3)"}, timeout=5
        )
        queued = tools.call(tool_name="python_eval", arguments={"code": "1"}, timeout=1)
        assert not queued.success and "while waiting" in (queued.error or "")
        assert waiting.result().success


def test_engine_stop_removes_workspaces(tmp_path: Any) -> None:
    engine = Engine(config=EngineConfig(prefork=1, state_dir=str(tmp_path)))
    with engine:
        ToolAPI(engine.connect()).call(tool_name="python_eval", arguments={"code": "open('f','w')"})
        assert any(tmp_path.iterdir())
    assert not any(p for p in tmp_path.iterdir() if p.name.startswith("a2e-"))
    assert threading.active_count() < 50


def test_an_engine_that_stops_ends_its_in_process_clients() -> None:
    """Their readers end with the connections the engine ended (their threads would otherwise
    wait for the process's life), and their next call fails at once."""
    with Engine(config=EngineConfig(prefork=1)) as engine:
        clients = [engine.connect() for _ in range(3)]
        readers = [client._reader for client in clients]
        assert ToolAPI(clients[0]).call(tool_name="python_eval", arguments={"code": "1"}).success
    assert wait_for(lambda: not any(reader.is_alive() for reader in readers), 10)
    assert all(client.closed for client in clients)
    late = ToolAPI(clients[1]).call(tool_name="python_eval", arguments={"code": "1"})
    assert not late.success


def test_audit_to_a_logger() -> None:
    import logging

    records: list[str] = []

    class Collect(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            records.append(record.getMessage())

    logger = logging.getLogger("a2e.test.audit")
    logger.addHandler(Collect())
    logger.setLevel(logging.INFO)
    with Engine(audit_logger=logger, config=EngineConfig(prefork=1)) as engine:
        ToolAPI(engine.connect(client_name="audited")).call(
            tool_name="python_eval", arguments={"code": "1"}
        )
    entry = json.loads(records[-1])
    assert entry["client"] == "audited" and entry["tool"] == "python_eval"
    assert entry["outcome"] == "ok" and entry["success"] is True


def test_the_zygote_is_single_threaded(engine: Engine) -> None:
    import psutil

    assert engine.pool is not None and engine.pool.zygote_pid is not None
    assert psutil.Process(engine.pool.zygote_pid).num_threads() == 1


def test_a_plugin_in_a_scripts_main_works_and_the_script_runs_once(tmp_path: Any) -> None:
    import subprocess
    import sys

    script = tmp_path / "host.py"
    script.write_text(
        "print('script top level ran')\n"
        "from typing import Any\n"
        "from a2e.caps.tools._client import ToolAPI\n"
        "from a2e.caps.tools._models import ToolDefinition\n"
        "from a2e.caps.tools._plugin import ToolPlugin\n"
        "from a2e_engine.engine import Engine, EngineConfig\n"
        "class Shout(ToolPlugin):\n"
        "    name = 'shout'\n"
        "    def _list_tools(self) -> list[ToolDefinition]:\n"
        "        return [ToolDefinition(name='shout', description='upper-cases')]\n"
        "    def _execute_tool(self, tool_name: str, arguments: dict[str, Any]) -> dict[str, Any]:\n"
        "        return {'text': 'hello'.upper()}\n"
        "with Engine(plugins=[Shout()], config=EngineConfig(prefork=1)) as engine:\n"
        "    print(ToolAPI(engine.connect()).call(tool_name='shout', arguments={}).data)\n"
    )
    proc = subprocess.run(
        [sys.executable, str(script)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines() == ["script top level ran", "{'text': 'HELLO'}"]


def test_no_fd_process_or_thread_leaks_over_many_calls(engine: Engine, tools: ToolAPI) -> None:
    import psutil

    assert engine.pool is not None and engine.pool.zygote_pid is not None
    me, zygote = psutil.Process(), psutil.Process(engine.pool.zygote_pid)

    def snapshot() -> tuple[int, int, int, int]:
        time.sleep(0.3)  # let the last exits be reported and refills settle
        return me.num_fds(), me.num_threads(), zygote.num_fds(), len(zygote.children())

    def burst() -> None:
        pendings = [
            tools.start(tool_name="python_eval", arguments={"code": "1"}) for _ in range(50)
        ]
        assert all(p.result().success for p in pendings)
        assert tools.call(tool_name="crash", arguments={"how": "segfault"}).success is False
        assert not tools.call(
            tool_name="python_eval", arguments={"code": "while 1: pass"}, timeout=1
        ).success

    burst()
    before = snapshot()
    for _ in range(3):
        burst()
    after = snapshot()
    assert after[0] <= before[0] + 2, (before, after)  # supervisor fds
    assert after[1] <= before[1] + 2, (before, after)  # supervisor threads
    assert after[2] <= before[2] + 2, (before, after)  # zygote fds
    assert after[3] <= before[3] + 2, (before, after)  # waiting workers only


def test_a_required_layer_that_is_missing_stops_the_engine_from_starting() -> None:
    import pytest

    from a2e_engine.engine import IsolationUnavailable

    engine = Engine(
        config=EngineConfig(
            isolation=Isolation(namespaces=False), prefork=1, require=("seccomp", "pid_namespace")
        )
    )
    with pytest.raises(IsolationUnavailable, match="pid_namespace \\(disabled by configuration\\)"):
        engine.start()
    assert not engine.running
    with pytest.raises(ValueError, match="unknown layers"):
        EngineConfig(require=("moat",))
    with Engine(config=EngineConfig(prefork=1, require=("seccomp", "pid_namespace"))) as ok:
        assert ok.running


def test_a_zygote_restarts_alone_and_its_in_flight_calls_fail_cleanly(
    engine: Engine, tools: ToolAPI
) -> None:
    """Killing the zygote of one plugin fails that plugin's calls in flight and restarts its
    zygote; another plugin's zygote and calls do not notice."""
    assert tools.call(tool_name="python_eval", arguments={"code": "1"}).success
    pending = tools.start(tool_name="sleep", arguments={"seconds": 20}, timeout=30)
    time.sleep(0.5)
    before = {zygote["name"]: zygote["pid"] for zygote in engine.zygotes}
    old, bystander = before["hostile"], before["python_eval"]
    assert old is not None and bystander is not None and old != bystander
    os.kill(old, signal.SIGKILL)
    result = pending.result()
    assert not result.success and "zygote died" in (result.error or ""), result.error

    def hostile_pid() -> int | None:
        return next(z["pid"] for z in engine.zygotes if z["name"] == "hostile")

    deadline = time.monotonic() + 20
    while time.monotonic() < deadline and hostile_pid() in (None, old):
        time.sleep(0.1)
    assert hostile_pid() not in (None, old)
    assert tools.call(tool_name="sleep", arguments={"seconds": 0}).success
    assert tools.call(tool_name="python_eval", arguments={"code": "1"}).success
    after = {zygote["name"]: zygote["pid"] for zygote in engine.zygotes}
    assert after["python_eval"] == bystander  # never restarted


def test_threads_writing_output_at_once_do_not_corrupt_frames(tools: ToolAPI) -> None:
    code = (
        "import sys, threading\n"
        "def noise():\n"
        "    for _ in range(2000): sys.stderr.write('e' * 300 + '\\n')\n"
        "t = threading.Thread(target=noise); t.start()\n"
        "for _ in range(2000): print('o' * 300)\n"
        "t.join()"
    )
    for _ in range(3):
        result = tools.call(tool_name="python_eval", arguments={"code": code})
        assert result.success, result.error
        assert result.data["stdout"].count("\n") == 2000


def test_the_few_devices_workers_get_work(tools: ToolAPI) -> None:
    code = (
        "import os\n[sorted(os.listdir('/dev')), open('/dev/null', 'w').write('x'), "
        "len(open('/dev/urandom', 'rb').read(8)), open('/dev/zero', 'rb').read(2).hex()]"
    )
    result = tools.call(tool_name="python_eval", arguments={"code": code})
    assert result.success, result.error
    names, written, random_bytes, _ = result.data["value"]
    assert {"null", "zero", "urandom", "random", "fd"} <= set(names) and len(names) <= 10
    assert (written, random_bytes) == (1, 8)


PLUGIN_UNDER_TMP = """
import os
from a2e.caps.tools._models import ToolDefinition
from a2e.caps.tools._plugin import ToolPlugin


class TmpPlugin(ToolPlugin):
    name = "tmp_plugin"

    def _list_tools(self):
        return [ToolDefinition(name="own_source", description="reads its own module")]

    def _execute_tool(self, tool_name, arguments):
        try:
            open(__file__, "a").close()
            writable = True
        except OSError:
            writable = False
        return {"source": open(__file__).read(), "writable": writable}
"""


def test_code_under_tmp_stays_visible_and_read_only_to_workers(tmp_path: Any) -> None:
    """A private /tmp must not hide code that lives under the host's /tmp (a checkout, a venv)."""
    import importlib
    import sys

    name = f"a2e_tmp_plugin_{os.getpid()}"
    (tmp_path / f"{name}.py").write_text(PLUGIN_UNDER_TMP)
    sys.path.insert(0, str(tmp_path))
    try:
        module = importlib.import_module(name)
        with Engine(plugins=[module.TmpPlugin()], config=EngineConfig(prefork=1)) as engine:
            result = ToolAPI(engine.connect()).call(tool_name="own_source", arguments={})
    finally:
        sys.path.remove(str(tmp_path))
    assert result.success, result.error
    assert result.data == {"source": PLUGIN_UNDER_TMP, "writable": False}


def test_a_cancel_that_arrives_after_its_call_ended_is_not_a_stray_error(
    fake_tools: ToolAPI, caplog: pytest.LogCaptureFixture
) -> None:
    tools = fake_tools
    done = tools.start(tool_name="python_eval", arguments={"code": "1"})
    assert done.result().success
    with caplog.at_level(logging.DEBUG, logger="a2e.client"):
        done.cancel()  # the host answers unknown_request: the call is over
        assert tools.call(tool_name="python_eval", arguments={"code": "2"}).success
        time.sleep(0.2)
    assert [r for r in caplog.records if r.levelno >= logging.WARNING] == []
    assert any("unknown_request answered" in r.getMessage() for r in caplog.records)


def test_tool_api_takes_the_protocols_timeout_rule(fake_tools: ToolAPI) -> None:
    tools = fake_tools
    pending = tools.start(tool_name="python_eval", arguments={"code": "1"}, timeout=0.3)
    assert pending.request.timeout == 1 and pending.result().success
    for bad in (0, -1.5):
        with pytest.raises(ValueError, match="positive number of seconds"):
            tools.start(tool_name="python_eval", arguments={"code": "1"}, timeout=bad)


def test_a_call_after_the_engine_stopped_fails_at_once_from_any_thread(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Even from a thread that got the engine loop's thread id back (the system reuses the id
    of a thread that ended; made certain here): it is not the loop, and must hear that the
    engine stopped rather than wait for a reply that cannot come."""
    with FakeEngine(config=EngineConfig(prefork=1)) as engine:
        api = ToolAPI(engine.connect())
        thread = engine._loop._thread
        assert thread is not None
        loop_thread_id = thread.ident
    assert loop_thread_id is not None
    monkeypatch.setattr(threading, "get_ident", lambda: loop_thread_id)
    started = time.monotonic()
    result = api.call(tool_name="python_eval", arguments={"code": "1"}, timeout=1)
    monkeypatch.undo()
    assert not result.success and "not running" in (result.error or ""), result
    assert time.monotonic() - started < 1, "it waited for a reply that could not come"


def test_the_fake_sandbox_runs_calls_without_a_process(fake_engine: Engine) -> None:
    """tests/fakes.py: the engine's own path above the sandbox, frames and all, with no
    zygote and no fork; the layers it does not have reported off, and why."""
    import psutil

    before = {child.pid for child in psutil.Process().children(recursive=True)}
    tools = ToolAPI(fake_engine.connect())
    streamed: list[ToolEvent] = []
    result = tools.call(
        tool_name="emit", arguments={"count": 3}, streaming=True, on_event=streamed.append
    )
    assert result.success and [e.seq for e in streamed] == [0, 1, 2]
    failed = tools.call(tool_name="python_eval", arguments={"code": "1/0"})
    assert failed.error == "ZeroDivisionError: division by zero"
    assert {child.pid for child in psutil.Process().children(recursive=True)} == before
    assert not fake_engine.layers.active("seccomp")
    assert "fake sandbox" in fake_engine.layers.reason("seccomp")
    assert fake_engine.layers.active("frames")  # the supervisor's own: real here too


class _HeldSessionDirs:
    """Sessions whose directories are made only once ``let_go`` is set; ``making`` is set
    when one is being made."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.making, self.let_go = threading.Event(), threading.Event()
        original = SessionState.create_dirs

        def held(session: SessionState) -> None:
            self.making.set()
            self.let_go.wait(30)
            original(session)

        monkeypatch.setattr(SessionState, "create_dirs", held)


def test_a_handshake_opens_its_session_off_the_loop_and_what_follows_waits_behind_it(
    fake_engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    """While a connection's session is being made (its directories, its quota's mount), the
    loop serves everyone else; what that connection sent after its handshake is answered
    after it, in order, not refused for want of a session."""
    tools = ToolAPI(fake_engine.connect(client_name="bystander"))
    held = _HeldSessionDirs(monkeypatch)
    making, let_go = held.making, held.let_go
    sent: list[A2EMessage] = []
    connection = fake_engine.open_connection(sent.append, name="pipelined")
    try:
        connection.receive(HandshakeRequest(client="pipelined", capabilities=["tools"]))
        connection.receive(ToolListRequest(query="python"))
        connection.receive(ToolCallRequest(tool_name="sleep", arguments={"seconds": 0}))
        assert making.wait(30)
        during = tools.call(tool_name="sleep", arguments={"seconds": 0})
        assert during.success, during.error
        assert sent == []
        let_go.set()
        assert wait_for(lambda: len(sent) == 3)
        handshake, listing, call = sent
        assert isinstance(handshake, HandshakeResponse), handshake
        assert isinstance(listing, ToolListResponse), listing
        assert isinstance(call, ToolCallResponse) and call.data.success, call
    finally:
        let_go.set()
        connection.close()
        tools.client.close()


def test_what_a_peer_sends_while_its_handshake_is_answered_is_bounded(
    fake_engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Past ``MAX_BEHIND`` messages waiting behind a handshake, the next are refused
    (``overloaded``, retryable) at once; those kept are answered once the session is open."""
    let_go = _HeldSessionDirs(monkeypatch).let_go
    sent: list[A2EMessage] = []
    connection = fake_engine.open_connection(sent.append, name="flood")
    try:
        connection.receive(HandshakeRequest(client="flood", capabilities=["tools"]))
        for _ in range(MAX_BEHIND + 5):
            connection.receive(ToolListRequest(query="python"))
        assert wait_for(lambda: len(sent) == 5)
        assert all(isinstance(m, A2EError) and m.code == "overloaded" for m in sent), sent[0]
        let_go.set()
        assert wait_for(lambda: len(sent) == 5 + 1 + MAX_BEHIND)
        assert isinstance(sent[5], HandshakeResponse)
        assert all(isinstance(m, ToolListResponse) for m in sent[6:])
    finally:
        let_go.set()
        connection.close()


def test_request_ids_are_the_connections_whichever_of_its_sessions_a_call_is_in(
    engine: Engine,
) -> None:
    """Two sessions on one connection: a call id in flight in one is refused in the other
    (``duplicate_request``), and a cancel that names only the call finds it in its session
    (real workers: a cancelled one is killed at once)."""
    sent: list[A2EMessage] = []
    connection = engine.open_connection(sent.append, name="two sessions")
    try:
        for name in ("first", "second"):
            connection.receive(HandshakeRequest(client=name, capabilities=["tools"]))
        assert wait_for(lambda: len(sent) == 2)
        first, second = (m.session_id for m in sent if isinstance(m, HandshakeResponse))
        sleeping = ToolCallRequest(session_id=first, tool_name="sleep", arguments={"seconds": 20})
        connection.receive(sleeping)
        connection.receive(
            ToolCallRequest(
                id=sleeping.id, session_id=second, tool_name="sleep", arguments={"seconds": 0}
            )
        )
        assert wait_for(lambda: len(sent) == 3)
        assert isinstance(sent[2], A2EError) and sent[2].code == "duplicate_request", sent[2]
        connection.receive(ToolCancelRequest(req_id=sleeping.id))
        assert wait_for(lambda: len(sent) == 4)
        cancelled = sent[3]
        assert isinstance(cancelled, ToolCallResponse) and cancelled.req_id == sleeping.id
        assert cancelled.data.reason == "cancelled", cancelled
    finally:
        connection.close()


def test_a_connection_that_ends_as_its_last_call_returns_still_sends_the_answer(
    fake_engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    """End of input may come just as a call returns: the connection's finish, scheduled
    before the call's task completed, still waits for its answer (``a2e serve --stdio`` lost
    the last call's reply under load this way)."""
    import asyncio

    from a2e_engine.engine import _host_session

    sent: list[A2EMessage] = []
    connection = fake_engine.open_connection(sent.append, name="ending")
    finishing: list[asyncio.Task[None]] = []

    async def returns_as_the_connection_ends(*_: Any) -> ToolResult:
        # Its first step runs before the completion callbacks of the call's task.
        finishing.append(asyncio.ensure_future(connection._finish()))
        return ToolResult(success=True, tool_name="sleep", duration_ms=0)

    try:
        connection.receive(HandshakeRequest(client="ending", capabilities=["tools"]))
        assert wait_for(lambda: len(sent) == 1)
        monkeypatch.setattr(_host_session, "run_call", returns_as_the_connection_ends)
        connection.receive(ToolCallRequest(tool_name="sleep", arguments={"seconds": 0}))
        assert wait_for(lambda: connection.closed)
        assert len(sent) == 2 and isinstance(sent[1], ToolCallResponse), sent
    finally:
        connection.close()
