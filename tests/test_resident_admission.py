"""How many sessions keep a worker for their stateful tools (``engine._resident_workers``):
by default, as many as the sandbox's memory bound has room for. In a module of its own: an
engine makes its memory group only where no other engine of the process holds one."""

from __future__ import annotations

import pytest

from a2e.caps.tools._client import ToolAPI
from a2e_engine.engine import Engine, EngineConfig
from tests.test_python_session import _cell, _residents


def test_by_default_the_memory_bound_admits_them_not_a_count() -> None:
    """With no count set, as many sessions keep a worker as the sandbox's memory bound has
    room for: more than the count of 8 that held where nothing measures memory; once the bound
    says there is no room, a new session's first cell is turned away saying why, and the
    sessions that have a worker keep it."""
    with Engine(config=EngineConfig(prefork=1, max_workers=2)) as engine:
        residents = _residents(engine)
        if residents.room is None:
            pytest.skip("no memory group measures the sandbox here: the count of 8 holds")
        clients = [engine.connect() for _ in range(11)]
        try:
            for client in clients[:10]:
                assert _cell(ToolAPI(client), "kept = 1").success
            assert residents.live == 10
            residents.room = lambda tenant: "the sandbox holds 99 MiB of the 100 MiB it may"
            refused = _cell(ToolAPI(clients[10]), "1")
            assert not refused.success and refused.reason == "overloaded"
            assert "no room for another session's worker: the sandbox holds 99" in str(
                refused.error
            )
            assert _cell(ToolAPI(clients[0]), "kept").data["display"] == [{"text/plain": "1"}]
        finally:
            for client in clients:
                client.close()
