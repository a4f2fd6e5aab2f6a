"""The bound on what the whole sandbox holds (``engine._memory_bound``): sessions whose
workspaces fill up are charged to the engine's memory group, a new session past its high-water
mark is refused with ``overloaded`` (a handshake and a REST-style stateless session alike), and
admitted again once a session ends; under pressure the session holding the most is ended and
told why, and another's kept state survives; without the memory cgroup the bound is kept by
reserving each session's quota."""

from __future__ import annotations

import os
import time

import pytest

from a2e._client import A2EClient, HandshakeFailed
from a2e._messages import ErrorCode
from a2e.caps.tools._client import ToolAPI
from a2e_engine.engine import Engine, EngineConfig, Isolation
from a2e_engine.engine._config import Admission
from a2e_engine.engine._host import Refused
from a2e_engine.engine._memory_bound import HIGH_WATER, PRESSURE, MemoryBound, OverBound
from a2e_engine.sandbox._cgroups import memory_usage
from tests.waiting import wait_for

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="workspaces are tmpfs only as root")

#: A workspace filled a MiB at a time, in files of at most 64 MiB (one file is capped): its
#: pages, not the program's, are what is held.
FILL = (
    "for mib in range({mb}):\n"
    "    with open(f'fill{{mib // 64}}', 'ab') as fh:\n"
    "        fh.write(b'x' * (1 << 20))"
)


def _fill(client: A2EClient, mb: int) -> None:
    done = ToolAPI(client).call(tool_name="python_eval", arguments={"code": FILL.format(mb=mb)})
    assert done.success, done.error


def _sessions_until_refused(engine: Engine, fill_mb: int, most: int) -> tuple[list[A2EClient], str]:
    """Sessions opened and filled one after another until one is refused: the open ones, and
    what the refusal said."""
    clients: list[A2EClient] = []
    for _ in range(most):
        try:
            client = engine.connect()
        except HandshakeFailed as exc:
            return clients, str(exc)
        clients.append(client)
        _fill(client, fill_mb)
    pytest.fail(f"{most} sessions of {fill_mb} MiB each were all admitted")


def test_sessions_past_the_sandboxs_bound_are_refused_until_one_ends() -> None:
    config = EngineConfig(
        prefork=1,
        max_workers=2,
        workspace_mb=96,
        admission=Admission(sandbox_memory_mb=480),
    )
    with Engine(config=config) as engine:
        layer = engine.layers["memory_cgroup"]
        assert layer["active"] and layer["total_mb"] == 480
        # A request in a session prepared ahead: the pool fills behind it.
        engine._loop.run(_stateless_call(engine))
        running = engine._running
        assert running is not None and wait_for(lambda: running.ready_sessions.ready > 0)
        group = os.path.dirname(layer["path"])
        assert int(open(os.path.join(group, "memory.limit_in_bytes")).read()) == 480 << 20
        clients, refused = _sessions_until_refused(engine, fill_mb=90, most=8)
        assert "the sandbox holds" in refused and "of the 480 MiB it may" in refused, refused
        assert memory_usage(group) > 480 * HIGH_WATER * (1 << 20)
        # Requests in sessions prepared ahead (REST, /run_code) are refused alike.
        assert running.ready_sessions.ready > 0
        with pytest.raises(Refused) as stateless:
            engine._loop.run(engine.open_session("rest", stateless=True))
        assert stateless.value.error.code == ErrorCode.OVERLOADED
        clients.pop().close()
        clients.pop().close()
        assert _eventually_admitted(engine)
        for client in clients:
            client.close()


async def _stateless_call(engine: Engine) -> None:
    session = await engine.open_session("rest", stateless=True)
    session.close()


def _eventually_admitted(engine: Engine) -> bool:
    """Ended sessions' tmpfs go with them, off the caller's path: a new one is admitted soon."""
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            engine.connect().close()
            return True
        except HandshakeFailed:
            time.sleep(0.1)
    return False


def test_under_pressure_the_session_holding_the_most_is_ended_and_told_why() -> None:
    """A victim keeps 100 MiB in its python_session; another tenant fills its workspace. Once
    the sandbox holds past the pressure mark, the tenant's session is ended, not the
    victim's kept state."""
    config = EngineConfig(prefork=1, max_workers=2, workspace_mb=400)
    with Engine(config=config) as engine:
        running = engine._running
        assert running is not None
        bound, relief = running.services.sessions.bound, running.relief
        victim, hog = ToolAPI(engine.connect()), engine.connect()
        kept = victim.call(
            tool_name="python_session", arguments={"code": "x = bytearray(100 << 20)"}
        )
        assert kept.success, kept.error
        _fill(hog, 300)
        # The bound as if the host had just this much: past the pressure mark now.
        bound.limit_mb = int(bound.held_mb() / (PRESSURE + 0.03))
        deadline = time.monotonic() + 10
        while not relief.ended and time.monotonic() < deadline:
            time.sleep(0.1)
        assert relief.ended and "this session held the most" in relief.ended[0], relief.ended
        refused = ToolAPI(hog).call(tool_name="python_eval", arguments={"code": "1"})
        assert not refused.success and "ran short of memory" in str(refused.error), refused
        still = victim.call(tool_name="python_session", arguments={"code": "len(x) >> 20"})
        assert still.success and still.data["display"] == [{"text/plain": "100"}], still


def test_without_the_memory_cgroup_each_session_reserves_its_quota() -> None:
    config = EngineConfig(
        prefork=1,
        workspace_mb=100,
        isolation=Isolation(cgroups=False),
        admission=Admission(sandbox_memory_mb=250),
    )
    with Engine(config=config) as engine:
        assert not engine.layers.active("memory_cgroup")
        first, second = engine.connect(), engine.connect()
        with pytest.raises(HandshakeFailed, match="may hold 200 MiB of the 250 MiB"):
            engine.connect()
        first.close()
        assert _eventually_admitted(engine)
        second.close()


def test_the_bound_reserves_and_releases() -> None:
    bound = MemoryBound(100)
    bound.admit(60)
    with pytest.raises(OverBound):
        bound.admit(60)
    bound.release(60)
    bound.admit(60)
    held = MemoryBound(100, usage=lambda: 81 << 20)
    with pytest.raises(OverBound, match="holds 81 MiB of the 100"):
        held.admit(0)
    MemoryBound(0).admit(1 << 30)  # no bound: anything
