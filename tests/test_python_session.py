"""``python_session`` for real: a worker each session keeps, with every layer, its state there
from call to call and nobody else's; a cell past its deadline interrupted with the state kept,
one that holds on killed and the next call told; a worker stopped between calls, and one that
breaks the frame protocol killed; the session's end, idleness, age and the bound on live
workers."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import psutil
import pytest

from a2e.caps.tools._client import ToolAPI
from a2e_engine.engine import Engine, EngineConfig
from a2e_engine.engine._config import ResidentLimits
from a2e_engine.engine._resident_workers import ResidentWorkers
from tests.waiting import wait_for


@pytest.fixture(scope="module")
def engine() -> Iterator[Engine]:
    config = EngineConfig(prefork=1, max_workers=4, resident=ResidentLimits(limit=2))
    with Engine(config=config) as running:
        yield running


def _residents(engine: Engine) -> ResidentWorkers:
    running = engine._running
    assert running is not None and running.services.calls.residents is not None
    return running.services.calls.residents


def _cell(api: ToolAPI, code: str, timeout: float = 20) -> Any:
    return api.call(tool_name="python_session", arguments={"code": code}, timeout=timeout)


def _worker_pids(engine: Engine) -> set[int]:
    return {
        kept.worker.worker.pid
        for kept in _residents(engine)._kept.values()
        if kept.worker is not None and kept.worker.alive
    }


def _gone(pid: int) -> bool:
    """Whether ``pid`` has exited; it may be reaped between any two looks at it."""
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


def test_a_session_keeps_its_names_and_sees_no_other_sessions(engine: Engine) -> None:
    with engine.connect() as first, engine.connect() as second:
        mine, theirs = ToolAPI(first), ToolAPI(second)
        assert _cell(mine, "secret = 41").data["execution_count"] == 1
        kept = _cell(mine, "secret + 1")
        assert kept.success and kept.data["display"] == [{"text/plain": "42"}]
        assert kept.data["execution_count"] == 2
        # A later cell larger than the job pipe holds at once still reaches the worker.
        big = _cell(mine, "len('" + "x" * 300_000 + "') + secret")
        assert big.success and big.data["display"] == [{"text/plain": "300041"}], big.error
        other = _cell(theirs, "secret").data
        assert other["error"][0]["ename"] == "NameError" and other["execution_count"] == 1
        # Each cell is in the session's workspace, as every call of the session is.
        _cell(mine, "open('note.txt', 'w').write('kept')")
        read = mine.call(tool_name="read_file", arguments={"path": "note.txt"})
        assert read.success and read.data["content"] == "kept"
        # The worker is sandboxed as any: no subprocess, no socket.
        refused = _cell(mine, "import socket\nsocket.socket()").data
        assert refused["error"][0]["ename"] == "PermissionError"
        assert _residents(engine).live == 2


def test_the_sessions_end_kills_its_worker(engine: Engine) -> None:
    client = engine.connect()
    assert _cell(ToolAPI(client), "x = 1").success
    (pid,) = _worker_pids(engine)
    client.close()
    assert wait_for(lambda: _gone(pid))
    assert wait_for(lambda: _residents(engine).live == 0)


def test_a_cell_past_its_deadline_is_interrupted_and_the_state_kept(engine: Engine) -> None:
    with engine.connect() as client:
        api = ToolAPI(client)
        _cell(api, "x = 'kept'")
        slept = _cell(api, "import time\ntime.sleep(60)", timeout=1)
        assert not slept.success and slept.reason == "timeout"
        assert "interrupted, and the session keeps its state" in str(slept.error)
        assert slept.data["error"][0]["ename"] == "KeyboardInterrupt"
        after = _cell(api, "x").data
        assert after["display"] == [{"text/plain": "'kept'"}] and after["execution_count"] == 3


def test_a_cell_that_holds_on_is_killed_and_the_next_call_is_told(engine: Engine) -> None:
    stubborn = "while True:\n    try:\n        while True:\n            pass\n    except BaseException:\n        pass"
    with engine.connect() as client:
        api = ToolAPI(client)
        _cell(api, "x = 1")
        (pid,) = _worker_pids(engine)
        started = time.monotonic()
        held = _cell(api, stubborn, timeout=1)
        assert not held.success and held.reason == "timeout"
        assert "killed" in str(held.error) and time.monotonic() - started < 10
        assert _gone(pid)
        fresh = _cell(api, "x")
        assert fresh.data["execution_count"] == 1 and fresh.data["error"][0]["ename"] == "NameError"
        (told,) = [event.data["message"] for event in fresh.events if event.kind == "status"]
        assert "nothing of the earlier one is kept" in told


def test_between_calls_the_worker_takes_no_cpu(engine: Engine) -> None:
    """A cell leaves a thread spinning: between the session's calls the worker is stopped, and
    the thread goes on, with its state, in the next call."""
    spinner = (
        "import threading\nspins = [0]\ndef spin():\n    while True:\n        spins[0] += 1\n"
        "threading.Thread(target=spin, daemon=True).start()"
    )
    with engine.connect() as client:
        api = ToolAPI(client)
        assert _cell(api, spinner).success
        (pid,) = _worker_pids(engine)
        worker = psutil.Process(pid)
        assert wait_for(lambda: worker.status() == psutil.STATUS_STOPPED)
        before = sum(worker.cpu_times()[:2])
        time.sleep(1.0)
        assert sum(worker.cpu_times()[:2]) - before < 0.05
        counted = _cell(api, "n = spins[0]\nimport time\ntime.sleep(0.2)\nspins[0] > n")
        assert counted.success and counted.data["display"] == [{"text/plain": "True"}]


def test_a_worker_that_forges_frames_between_calls_ends_with_the_next_call(
    engine: Engine,
) -> None:
    """Its cell leaves a thread that forges a frame on every pipe it has once the call is
    over: stopped between calls, it forges in the next call, which it breaks (a violation),
    and the call after that starts a new worker and is told."""
    forger = (
        "import os, threading, time\n"
        "def forge():\n"
        "    time.sleep(0.3)\n"
        "    for fd in range(3, 64):\n"
        "        try:\n"
        '            os.write(fd, b\'\\x00\\x00\\x00\\x0d{"t":"event"}\')\n'
        "        except OSError:\n"
        "            pass\n"
        "threading.Thread(target=forge, daemon=True).start()"
    )
    with engine.connect() as client:
        api = ToolAPI(client)
        forged = _cell(api, forger)
        assert forged.success, forged.error
        (pid,) = _worker_pids(engine)
        time.sleep(0.6)
        assert not _gone(pid)  # stopped: it forged nothing yet
        broken = _cell(api, "import time\ntime.sleep(1)")
        assert not broken.success and "event frame without kind" in str(broken.error)
        assert wait_for(lambda: _gone(pid))
        after = _cell(api, "1")
        assert after.success and after.data["execution_count"] == 1
        (told,) = [event.data["message"] for event in after.events if event.kind == "status"]
        assert "nothing of the earlier one is kept" in told, told


def test_past_the_bound_a_new_session_is_turned_away_until_one_ends(engine: Engine) -> None:
    with engine.connect() as one, engine.connect() as two, engine.connect() as three:
        assert _cell(ToolAPI(one), "1").success and _cell(ToolAPI(two), "1").success
        refused = _cell(ToolAPI(three), "1")
        assert not refused.success and refused.reason == "overloaded"
        assert "all 2 sessions that may keep a worker have one" in str(refused.error)
        one.close()
        assert wait_for(lambda: _residents(engine).live == 1)
        assert _cell(ToolAPI(three), "1").success


def test_an_idle_or_old_worker_ends_and_the_next_call_says_so() -> None:
    limits = ResidentLimits(limit=2, idle_s=0.5, lifetime_s=2.5)
    engine = Engine(config=EngineConfig(prefork=1, resident=limits))
    with engine, engine.connect() as client:
        api = ToolAPI(client)
        _cell(api, "x = 1")
        assert wait_for(lambda: _residents(engine).live == 0, seconds=10)
        idle = _cell(api, "x")
        assert idle.data["execution_count"] == 1
        (told,) = [e.data["message"] for e in idle.events if e.kind == "status"]
        assert "idle for more than 0.5 s" in told
        for _ in range(8):  # used often, it is never idle: its age ends it
            time.sleep(0.4)
            last = _cell(api, "1")
        assert last.data["execution_count"] < 9
        said = [e.data["message"] for e in last.events if e.kind == "status"]
        assert said == [] or "lived past its 2.5 s" in said[0]


def test_per_context_namespaces_environment_and_directory(engine: Engine) -> None:
    """Contexts are namespaces of their own in one interpreter; a cell's ``env`` and ``cwd``
    are put back after it; ``reset`` starts a context afresh; the final value is marked."""
    with engine.connect() as client:
        api = ToolAPI(client)

        def cell(code: str, **more: Any) -> Any:
            result = api.call(tool_name="python_session", arguments={"code": code, **more})
            assert result.success, result.error
            return result.data

        cell("name = 'default'")
        assert cell("name = 'other'", context="b")["execution_count"] == 1
        assert cell("name")["display"] == [{"text/plain": "'default'"}]
        assert cell("name", context="b")["display"] == [{"text/plain": "'other'"}]
        shown = cell("display(1); 2")
        assert shown["main_display"] == 1 and cell("display(1)")["main_display"] is None
        env = cell("import os; os.environ['ONLY']", env={"ONLY": "here"})
        assert env["display"] == [{"text/plain": "'here'"}]
        assert cell("os.environ.get('ONLY')")["display"] == []
        cell("os.makedirs('sub', exist_ok=True)")
        assert cell("os.getcwd()", cwd="sub")["display"][0]["text/plain"].endswith("/sub'")
        assert not cell("os.getcwd()")["display"][0]["text/plain"].endswith("/sub'")
        assert cell("name", context="b", reset=True)["error"][0]["ename"] == "NameError"


def test_a_lasting_sessions_worker_ends_with_it_not_when_idle_or_old() -> None:
    """An E2B sandbox's interpreter (``Host.open_session(lasting=True)``) keeps its state
    however long it sits idle and however old it is: the sandbox's own timeout ends it."""
    from a2e.caps.tools._models import ToolCallRequest, ToolResult

    limits = ResidentLimits(limit=2, idle_s=0.3, lifetime_s=0.6)
    engine = Engine(config=EngineConfig(prefork=1, resident=limits))

    async def cell(session: Any, code: str) -> ToolResult:
        request = ToolCallRequest(tool_name="python_session", arguments={"code": code})
        async for burst in session.call(request):
            last = burst[-1]
        assert isinstance(last, ToolResult)
        return last

    with engine:
        session = engine.run(engine.open_session("e2b", lasting=True))
        engine.run(cell(session, "kept = 'still here'"))
        time.sleep(2.5)  # past its idle time and its age, more than once over
        after = engine.run(cell(session, "kept"))
        assert after.data["display"] == [{"text/plain": "'still here'"}]
        assert not [e for e in after.events if e.kind == "status"]
        engine.run(_close(session))
        assert wait_for(lambda: _residents(engine).live == 0, seconds=10)


async def _close(session: Any) -> None:
    session.close()
