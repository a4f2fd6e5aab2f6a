"""Pausing sandboxes (``Sandbox.pause``, ``Sandbox.connect``; ``Host.pause_session``), driven
by E2B's SDK: a paused sandbox holds no CPU, keeps its interpreter, its commands and its
files, refuses its own side's calls, and comes back where it was when connected to; past its
timeout, or killed, a paused sandbox is freed with nothing left."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import psutil
import pytest
from e2b import NotFoundException, SandboxException
from e2b_code_interpreter import Sandbox

from tests.e2b_helpers import running_as, sdk_opts
from tests.service_process import ServiceProcess
from tests.waiting import wait_for

KEY = "pause-key-0123456789abcdef"


@pytest.fixture(scope="module")
def service() -> Iterator[ServiceProcess]:
    process = ServiceProcess("--token", KEY, "--max-timeout", "300")
    yield process
    process.stop()


def _opts(service: ServiceProcess) -> dict[str, Any]:
    return sdk_opts(service, KEY)


def _cpu_seconds(uid: int) -> float:
    total = 0.0
    for process in running_as(uid):
        try:
            times = process.cpu_times()
        except psutil.Error:
            continue
        total += times.user + times.system
    return total


def _spent(uid: int, seconds: float) -> float:
    before = _cpu_seconds(uid)
    time.sleep(seconds)
    return _cpu_seconds(uid) - before


def test_a_paused_sandbox_holds_no_cpu_and_comes_back_where_it_was(
    service: ServiceProcess,
) -> None:
    sandbox = Sandbox.create(timeout=120, **_opts(service))
    try:
        sandbox.run_code("kept = 41")
        sandbox.files.write("/home/user/kept.txt", "kept")
        uid = int(sandbox.commands.run("id -u").stdout)
        spinning = sandbox.commands.run(
            "i=0; while true; do i=$((i+1)); echo $i > /home/user/count; done", background=True
        )
        assert _spent(uid, 1.0) > 0.5
        assert sandbox.pause() is True
        assert _spent(uid, 1.0) < 0.05  # frozen, its command with it
        assert sandbox.get_info().state.value == "paused"
        listed = Sandbox.list(query=None, **_opts(service)).next_items()
        assert [s.state.value for s in listed if s.sandbox_id == sandbox.sandbox_id] == ["paused"]
        with pytest.raises(SandboxException, match="paused"):
            sandbox.files.read("/home/user/kept.txt")
        assert sandbox.pause() is False  # paused already: 409
        resumed = Sandbox.connect(sandbox.sandbox_id, **_opts(service))
        assert resumed.get_info().state.value == "running"
        assert resumed.run_code("kept + 1").text == "42"
        assert resumed.files.read("/home/user/kept.txt") == "kept"
        counted = int(resumed.files.read("/home/user/count") or 0)
        assert wait_for(lambda: int(resumed.files.read("/home/user/count") or 0) > counted, 5)
        resumed.commands.kill(spinning.pid)
    finally:
        sandbox.kill()


def test_a_paused_sandbox_is_freed_past_its_timeout_or_when_killed(
    service: ServiceProcess,
) -> None:
    lapsing = Sandbox.create(timeout=2, **_opts(service))
    killed = Sandbox.create(timeout=120, **_opts(service))
    uids = []
    for sandbox in (lapsing, killed):
        sandbox.run_code("x = 1")
        sandbox.commands.run("sleep 300", background=True)
        uids.append(int(sandbox.commands.run("id -u").stdout))
        assert sandbox.pause() is True
    killed.kill()
    assert wait_for(lambda: not running_as(uids[1]), 10)
    assert wait_for(lambda: not running_as(uids[0]), 15)
    with pytest.raises(NotFoundException):
        lapsing.get_info()
