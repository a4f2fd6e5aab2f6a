"""How many sessions keep a worker for their stateful tools (``engine._resident_workers``):
by default, as many as the sandbox's memory bound has room for. In a module of its own: an
engine makes its memory group only where no other engine of the process holds one."""

from __future__ import annotations

import pytest

from a2e.caps.tools._client import ToolAPI
from a2e_engine.engine import Engine, EngineConfig
from tests.test_python_session import _cell, _residents
from tests.waiting import wait_for


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


def _session_mounts(pid: int) -> list[str]:
    """The session tmpfs mount points in process ``pid``'s mount namespace."""
    with open(f"/proc/{pid}/mountinfo") as mounts:
        points = [line.split(" ")[4] for line in mounts]
    return [point for point in points if point.endswith("/session") and "a2e-engine-" in point]


def test_a_kept_worker_holds_its_own_sessions_mount_alone() -> None:
    """Each session's workspace is a tmpfs mounted where every pre-forked worker receives it;
    a worker a session keeps lets go of every other session's mount and receives no more, so
    that a thousand kept workers do not hold a million mounts between them. Its own stays,
    and what it keeps works on."""
    with Engine(config=EngineConfig(prefork=1, max_workers=2)) as engine:
        if not engine.layers["disk_quota"]["active"]:
            pytest.skip("no per-session tmpfs here: nothing to narrow")
        residents = _residents(engine)
        first = engine.connect()
        others = [engine.connect() for _ in range(4)]
        try:
            for client in others[:2]:
                assert _cell(ToolAPI(client), "1").success  # sessions made, and mounted
            assert _cell(ToolAPI(first), "open('mine.txt', 'w').write('kept')").success
            (kept,) = [
                k.worker.worker.pid
                for sid, k in residents._kept.items()
                if k.worker is not None and sid == first.session_id
            ]

            def narrowed() -> bool:
                return len(_session_mounts(kept)) == 1

            assert wait_for(narrowed, 10), _session_mounts(kept)
            for client in others[2:]:
                assert _cell(ToolAPI(client), "1").success  # more sessions: not received
            assert narrowed(), _session_mounts(kept)
            assert _cell(ToolAPI(first), "open('mine.txt').read()").data["display"] == [
                {"text/plain": "'kept'"}
            ]
        finally:
            for client in [first, *others]:
                client.close()


def test_narrowing_never_touches_the_template_nor_the_zygotes_namespace(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A worker taken between joining the template and copying it is in the template's
    namespace: narrowing it would strip every later worker of the sessions' mounts. Narrowing
    acts on a worker's own copy alone, judged on the very namespace it would join."""
    import os
    import subprocess
    import sys

    from a2e_engine.sandbox import _quota

    if os.geteuid() != 0:
        pytest.skip("a mount namespace of its own needs root")
    child = subprocess.Popen(
        [sys.executable, "-c", "import time; from a2e_engine.sandbox import _syscalls as s;"
         " s.unshare(s.CLONE_NEWNS); print(1, flush=True); time.sleep(30)"],
        stdout=subprocess.PIPE,
    )  # fmt: skip
    try:
        assert child.stdout is not None and child.stdout.readline()
        forked: list[bool] = []

        def fork() -> int:
            forked.append(True)
            return 1  # the parent's side: no helper runs

        monkeypatch.setattr(_quota.os, "fork", fork)
        own = os.open("/proc/self/ns/mnt", os.O_RDONLY)
        theirs = os.open(f"/proc/{child.pid}/ns/mnt", os.O_RDONLY)
        try:
            _quota.narrow(os.getpid(), "/k", ("/s",), theirs)  # the zygote's own: no
            _quota.narrow(child.pid, "/k", ("/s",), theirs)  # the template's: no
            assert forked == []
            _quota.narrow(child.pid, "/k", ("/s",), own)  # a copy of its own: yes
            assert forked == [True]
        finally:
            os.close(own)
            os.close(theirs)
    finally:
        child.kill()
        child.wait()
