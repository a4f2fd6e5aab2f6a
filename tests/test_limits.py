"""Caps that protect the supervisor: deadlines, event floods, output floods, pending calls."""

from __future__ import annotations

import sys
import time
from collections.abc import Iterator

import pytest

from a2e.caps.tools._client import ToolAPI
from a2e.caps.tools._models import ToolCallRequest
from a2e_engine.engine import Admission, Engine, EngineConfig, Limits, OutputCaps
from tests.hostile_plugin import HostileTools


@pytest.fixture(scope="module")
def tight() -> Iterator[Engine]:
    config = EngineConfig(
        max_workers=2,
        prefork=1,
        max_timeout=1,
        max_result_events=50,
        output=OutputCaps(max_events=100, max_output_bytes=2 * 1024 * 1024),
        admission=Admission(max_pending_calls=3),
        limits=Limits(call_memory_mb=256),
    )
    with Engine(plugins=[HostileTools()], config=config) as engine:
        yield engine


def test_the_engine_caps_a_calls_timeout(tight: Engine) -> None:
    tools = ToolAPI(tight.connect())
    started = time.monotonic()
    result = tools.call(tool_name="sleep", arguments={"seconds": 20}, timeout=30)
    assert time.monotonic() - started < 4
    assert not result.success and "timed out after 1 s" in (result.error or "")


def test_an_event_flood_is_cut_and_marked_truncated(tight: Engine) -> None:
    tools = ToolAPI(tight.connect())
    result = tools.call(tool_name="emit", arguments={"count": 1000, "kind": "log"})
    assert result.success and result.data == {"emitted": 1000}
    assert result.truncated
    assert len(result.events) == 50  # kept in the result
    streamed: list[int] = []
    result = tools.call(
        tool_name="emit",
        arguments={"count": 1000, "kind": "log"},
        streaming=True,
        on_event=lambda e: streamed.append(e.seq),
    )
    assert result.success and result.truncated
    assert streamed == list(range(100))  # the pool's cap: the rest never left the supervisor


def test_python_eval_keeps_head_and_tail_and_saves_the_rest(tight: Engine) -> None:
    tools = ToolAPI(tight.connect())
    code = (
        "import sys\nprint('first line')\nfor i in range(40):\n    sys.stdout.write(str(i % 10) * 65536)"
        "\nprint('last line')"
    )
    result = tools.call(tool_name="python_eval", arguments={"code": code})
    assert result.success and result.truncated
    stdout, path = result.data["stdout"], result.data["stdout_path"]
    assert stdout.startswith("first line\n") and stdout.endswith("9" * 1000 + "last line\n")
    total = len("first line\n") + 40 * 65536 + len("last line\n")
    omitted = total - 1_000_000
    assert f"[... {omitted} characters of stdout omitted; all of it is in {path} ...]" in stdout
    with open(path) as fh:  # the session's workspace, as the host sees it
        saved = fh.read()
    assert (
        len(saved) == total and saved.startswith("first line\n") and saved.endswith("last line\n")
    )


def test_too_many_pending_calls_are_refused_retryably(tight: Engine) -> None:
    """Past half the engine's bound (rounded up) a client's calls are refused, and another's
    still find room; past the whole of it, everyone's are."""
    tools, other, third = (ToolAPI(tight.connect()) for _ in range(3))
    pendings = [tools.start(tool_name="sleep", arguments={"seconds": 0.3}) for _ in range(6)]
    theirs = [other.start(tool_name="sleep", arguments={"seconds": 0.3}) for _ in range(2)]
    late = third.call(tool_name="sleep", arguments={"seconds": 0.1})
    results = [p.result() for p in pendings]
    refused = [r for r in results if r.error_code == "overloaded"]
    assert len(refused) == 4 and "2 of them of this client" in (refused[0].error or "")
    assert sum(r.success for r in results) == 2
    their_results = [p.result() for p in theirs]
    assert sum(r.success for r in their_results) == 1
    assert late.error_code == "overloaded" and late.error and "3 calls are pending" in late.error


def test_one_connection_cannot_take_every_place_in_the_queue() -> None:
    config = EngineConfig(max_workers=1, prefork=1, admission=Admission(max_calls_per_connection=2))
    with Engine(plugins=[HostileTools()], config=config) as engine:
        greedy, other = ToolAPI(engine.connect()), ToolAPI(engine.connect())
        pendings = [greedy.start(tool_name="sleep", arguments={"seconds": 0.3}) for _ in range(4)]
        theirs = other.call(tool_name="sleep", arguments={"seconds": 0})
        results = [p.result() for p in pendings]
    refused = [r for r in results if r.error_code == "overloaded"]
    assert len(refused) == 2 and "2 calls in flight" in (refused[0].error or "")
    assert sum(r.success for r in results) == 2
    assert theirs.success


def test_host_errors_become_tool_results(tight: Engine) -> None:
    client = tight.connect()
    tools = ToolAPI(client)
    client.session_id = "not-a-session"
    result = tools.call(tool_name="python_eval", arguments={"code": "1"})
    assert not result.success and result.error_code == "unknown_session"
    assert "not-a-session" in (result.error or "")


def test_a_duplicate_request_id_is_refused(tight: Engine) -> None:
    client = tight.connect()
    request = ToolCallRequest(
        session_id=client.session_id, tool_name="sleep", arguments={"seconds": 0.5}
    )
    client.start(request)
    client._forget(request.id)  # let the client send the same id again
    second = client.start(request)
    # The refusal comes at once; the first call's result, half a second later, finds no one.
    reply = second.wait(10)
    assert getattr(reply, "code", "") == "duplicate_request", reply


def test_non_json_arguments_are_refused_before_any_worker(tight: Engine) -> None:
    tools = ToolAPI(tight.connect())
    result = tools.call(tool_name="python_eval", arguments={"code": float("nan")})
    assert result.error_code == "tool_error" and "plain JSON values" in (result.error or "")
    result = tools.call(tool_name="python_eval", arguments={"code": object()})
    assert result.error_code == "tool_error" and "plain JSON values" in (result.error or "")


def test_sessions_per_connection_are_capped(tight: Engine) -> None:
    from a2e._client import HandshakeFailed

    client = tight.connect()
    for _ in range(tight.config.admission.max_sessions_per_connection - 1):
        client.handshake(["tools"])
    with pytest.raises(HandshakeFailed, match="overloaded"):
        client.handshake(["tools"])


def test_polling_a_pending_call_does_not_cancel_it(tight: Engine) -> None:
    tools = ToolAPI(tight.connect())
    pending = tools.start(tool_name="sleep", arguments={"seconds": 0.5})
    with pytest.raises(TimeoutError):
        pending.result(timeout=0.05)
    assert pending.result().success


def test_memory_outside_rlimit_as_hits_the_calls_memory_cgroup(tight: Engine) -> None:
    if not tight.layers["memory_cgroup"]["active"]:
        pytest.skip(tight.layers["memory_cgroup"]["reason"])
    tools = ToolAPI(tight.connect())
    assert tools.call(tool_name="hold_memory", arguments={"mb": 64}).success
    result = tools.call(tool_name="hold_memory", arguments={"mb": 1024})
    assert not result.success
    assert "out of memory: the call went past its 256 MiB memory limit" in (result.error or "")
    assert result.usage is not None and result.usage.signal == "SIGKILL"
    assert tools.call(tool_name="hold_memory", arguments={"mb": 64}).success  # slot reused


def test_programs_a_tool_starts_are_capped_by_the_memory_cgroup_not_rlimit_as() -> None:
    """The JVM, Go and V8 reserve more address space than any RLIMIT_AS that would still
    protect the host: where the memory cgroup caps a call, workers that start programs get no
    RLIMIT_AS, and what those programs hold is capped all the same. Compute workers keep it."""
    limits = Limits(memory_mb=512, call_memory_mb=256)
    config = EngineConfig(prefork=1, limits=limits, start_all_zygotes=True)
    with Engine(config=config) as engine:
        tools = ToolAPI(engine.connect())
        capped = engine.layers["memory_cgroup"]["active"]
        # Over every zygote's report: the compute tools' zygote alone has none uncapped.
        assert engine.layers["rlimits"]["address_space_uncapped"] == (
            ["network", "process"] if capped else []
        )
        (compute_zygote,) = [z for z in engine.zygotes if z["name"] == "python_eval"]
        assert compute_zygote["layers"]["rlimits"]["address_space_uncapped"] == []
        compute = tools.call(
            tool_name="python_eval",
            arguments={"code": "import resource\nresource.getrlimit(resource.RLIMIT_AS)[0]"},
        )
        assert compute.data["value"] == 512 * 1024**2
        shell = tools.call(tool_name="run_shell", arguments={"command": "ulimit -v"})
        assert shell.data["stdout"].strip() == ("unlimited" if capped else str(512 * 1024))
        # A JVM sized past what RLIMIT_AS would have let it reserve.
        java = tools.call(
            tool_name="run_code",
            arguments={"language": "java", "code": _JAVA_HELLO, "memory_mb": 768},
            timeout=60,
        )
        assert java.data["run_result"]["stdout"] == "hi\n" or not capped
        grab = (
            f"{sys.executable} -c \"b = bytearray(600 * 1024**2); b[::4096] = b'x' * len(b[::4096]);"
            " print('held')\""
        )
        greedy = tools.call(tool_name="run_shell", arguments={"command": grab}, timeout=30)
        assert "held" not in (greedy.data or {}).get("stdout", "")  # capped either way


_JAVA_HELLO = (
    'public class Main { public static void main(String[] a) { System.out.println("hi"); } }'
)
