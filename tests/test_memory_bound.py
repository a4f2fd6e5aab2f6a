"""The bound on what the whole sandbox holds (``engine._memory_bound``): sessions whose
workspaces fill up are charged to the engine's memory group, a new session past its high-water
mark is refused with ``overloaded`` (a handshake and a REST-style stateless session alike), and
admitted again once a session ends; without the memory cgroup the bound is kept by reserving
each session's quota."""

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
from a2e_engine.engine._memory_bound import HIGH_WATER, MemoryBound, OverBound
from a2e_engine.sandbox._cgroups import memory_usage

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="workspaces are tmpfs only as root")

#: A workspace filled a MiB at a time: its pages, not the program's, are what is held.
FILL = (
    "with open('fill', 'wb') as fh:\n    for _ in range({mb}):\n        fh.write(b'x' * (1 << 20))"
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
        group = os.path.dirname(layer["path"])
        assert int(open(os.path.join(group, "memory.limit_in_bytes")).read()) == 480 << 20
        clients, refused = _sessions_until_refused(engine, fill_mb=90, most=8)
        assert "the sandbox holds" in refused and "of the 480 MiB it may" in refused, refused
        assert memory_usage(group) > 480 * HIGH_WATER * (1 << 20)
        # Stateless sessions (REST, /run_code) are refused alike.
        with pytest.raises(Refused) as stateless:
            engine._loop.run(engine.open_session("rest", stateless=True))
        assert stateless.value.error.code == ErrorCode.OVERLOADED
        clients.pop().close()
        clients.pop().close()
        assert _eventually_admitted(engine)
        for client in clients:
            client.close()


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
