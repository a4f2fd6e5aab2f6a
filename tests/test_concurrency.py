"""``max_workers`` sized for calls that wait, admitted by what they use: by default several calls
per core start whatever they do (as far as memory holds each call's whole limit); past them, a
call starts while the running ones leave room (fewer than that many on the CPU, the sandbox's
memory below its high-water mark), up to many more per core. Calls that wait all run at once,
not queued behind a few; calls that compute are held to the first bound, and those that have
run for seconds to twice it; memory past its mark holds calls back. The bounds and their reason are in ``status``, ``/readyz`` and ``a2e
doctor``."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import subprocess
import sys
import threading
from typing import Any

import pytest

from a2e.caps.tools._client import ToolAPI
from a2e_engine.engine import Admission, Engine, EngineConfig
from a2e_engine.engine._concurrency import CALLS_PER_CORE, WAITING_PER_CORE, default_max_workers
from a2e_engine.engine._memory_bound import HIGH_WATER
from a2e_engine.sandbox._busy import computing, pid_of
from a2e_engine.sandbox._deadline import Deadline
from a2e_engine.sandbox._slots import LONG_RUN_S, WorkerSlots
from a2e_engine.sandbox._waiting import StopSignal
from tests.hostile_plugin import HostileTools
from tests.waiting import wait_for


def test_the_default_is_several_calls_per_core_as_far_as_memory_goes() -> None:
    cores = len(os.sched_getaffinity(0))
    small = default_max_workers(call_memory_mb=1)
    assert small.busy == CALLS_PER_CORE * cores, small
    assert small.workers == WAITING_PER_CORE * cores, small  # this host holds that many
    assert f"{CALLS_PER_CORE} per core on {cores} core" in small.why
    assert f"up to {small.workers} while calls wait" in small.why
    huge = default_max_workers(call_memory_mb=1 << 30)  # no host holds one such call
    assert huge.busy == 1 and "memory for 0 calls" in huge.why, huge
    configured = EngineConfig(max_workers=3).worker_bound()
    assert (configured.workers, configured.busy) == (3, 3)
    both = EngineConfig(max_workers=6, busy_workers=2).worker_bound()
    assert (both.workers, both.busy) == (6, 2)
    busy_alone = EngineConfig(busy_workers=2).worker_bound()
    assert busy_alone.busy == 2 and busy_alone.workers == small.workers
    with pytest.raises(ValueError, match="busy_workers"):
        EngineConfig(busy_workers=0)


def test_waiting_calls_all_run_at_once_up_to_the_bound_and_the_next_queues() -> None:
    """Past the calls that start whatever they do, those that sleep keep starting, up to
    ``max_workers``."""
    config = EngineConfig(prefork=1, max_workers=6, busy_workers=2)
    with Engine(plugins=[HostileTools()], config=config) as engine:
        if not engine.layers.active("memory_cgroup"):  # without it, none past busy_workers
            pytest.skip(f"no memory cgroup: {engine.layers.reason('memory_cgroup')}")
        bound = engine.status().max_workers
        assert bound == engine.worker_bound.workers == 6
        assert engine.status().max_workers_why == engine.worker_bound.why
        tools = ToolAPI(engine.connect())
        asleep = threading.Semaphore(0)
        calls = [_started(tools, "sleep", {"seconds": 30}, asleep) for _ in range(bound + 1)]
        try:
            for _ in range(bound):
                assert asleep.acquire(timeout=60), "a call did not start"
            assert wait_for(lambda: engine.status().calls_running == bound)
            status = engine.status()
            assert status.calls_running == bound and status.calls_queued == 1, status
        finally:
            for call in calls:
                call.cancel()
        assert all(call.result().reason == "cancelled" for call in calls)


def test_a2e_doctor_says_how_many_calls_run_at_once_and_why() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "a2e_engine.engine.cli", "doctor", "--json"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    report = json.loads(done.stdout)
    bound = default_max_workers(report["limits"]["call_memory_mb"])
    assert report["max_workers"]["workers"] >= 1
    assert "per core on" in report["max_workers"]["why"]
    assert report["max_workers"]["workers"] == pytest.approx(bound.workers, abs=2)


def _started(
    tools: ToolAPI, tool: str, arguments: dict[str, Any], started: threading.Semaphore
) -> Any:
    return tools.start(
        tool_name=tool,
        arguments=arguments,
        timeout=60,
        streaming=True,
        on_event=lambda _: started.release(),
    )


def _ended(call: Any) -> bool:
    try:
        call.result(timeout=0)
    except TimeoutError:
        return False
    return True


def test_calls_that_compute_are_held_to_the_busy_bound_and_hold_back_the_rest() -> None:
    """Four spinning calls and a sleeping one sent at once, ``busy_workers=2``: two start, and
    the others wait, the sleeping one too, though ``max_workers`` has room (a call that has a
    slot and no worker yet counts as computing, so a burst is not let in before its first
    calls are seen on the CPU). Once the first two have run ``LONG_RUN_S`` (likely to run to
    their deadlines), two more start beside them, and no more: long calls past
    ``busy_workers`` count again. Once the spinning calls end, the sleeping one starts."""
    config = EngineConfig(prefork=1, max_workers=6, busy_workers=2)
    with Engine(plugins=[HostileTools()], config=config) as engine:
        if not engine.layers.active("memory_cgroup"):  # without it, none past busy_workers
            pytest.skip(f"no memory cgroup: {engine.layers.reason('memory_cgroup')}")
        tools = ToolAPI(engine.connect())
        spinning, asleep = threading.Semaphore(0), threading.Semaphore(0)
        calls = [_started(tools, "spin", {"seconds": 60}, spinning) for _ in range(4)]
        calls.append(_started(tools, "sleep", {"seconds": 60}, asleep))
        try:
            for _ in range(2):
                assert spinning.acquire(timeout=60), "a spinning call did not start"
            # Looked at again every RECHECK_S: no room while two compute and are young.
            assert not spinning.acquire(timeout=LONG_RUN_S / 2), "started past the busy bound"
            status = engine.status()
            assert (status.calls_running, status.calls_queued) == (2, 3), status
            for _ in range(2):
                assert spinning.acquire(timeout=60), "no call started beside the long ones"
            assert not asleep.acquire(timeout=LONG_RUN_S * 2), "started past twice the bound"
            status = engine.status()
            assert (status.calls_running, status.calls_queued) == (4, 1), status
            assert not [call for call in calls if _ended(call)]
            for call in calls[:4]:
                call.cancel()
            assert asleep.acquire(timeout=60), "the sleeping call did not start"
        finally:
            for call in calls:
                call.cancel()
        assert all(call.result().reason == "cancelled" for call in calls)


def test_a_turn_given_to_a_waiter_cancelled_meanwhile_is_given_back() -> None:
    """``WorkerSlots``: a slot handed to a waiting call whose task is cancelled before it
    resumes is released, not lost; so is one of a call whose deadline passes as it waits."""

    async def scenario() -> tuple[int, int]:
        slots = WorkerSlots(1)
        stop = StopSignal()
        loop = asyncio.get_running_loop()
        assert await slots.acquire(Deadline.after(10, loop), stop)
        waiter = loop.create_task(slots.acquire(Deadline.after(10, loop), stop))
        await asyncio.sleep(0)  # it waits for its turn
        slots.release()  # its turn is given...
        waiter.cancel()  # ...and its task cancelled before it runs again
        with contextlib.suppress(asyncio.CancelledError):
            await waiter
        after_cancel = slots.in_flight
        assert await slots.acquire(Deadline.after(10, loop), stop)
        late = await slots.acquire(Deadline.after(0.05, loop), stop)  # times out waiting
        assert not late
        slots.release()
        return after_cancel, slots.in_flight

    assert asyncio.run(scenario()) == (0, 0)


def test_the_pid_of_a_pidfd_is_read_as_this_process_sees_it() -> None:
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        fd = os.pidfd_open(child.pid)
        try:
            assert pid_of(fd) == child.pid
        finally:
            os.close(fd)
    finally:
        child.kill()
        child.wait()
    assert pid_of(-1) is None


def test_memory_past_its_high_water_mark_holds_waiting_calls_back() -> None:
    """Calls that hold memory and sleep start past ``busy_workers`` only while the sandbox
    holds less than its high-water mark: once it holds more, the next call waits, and nothing
    is killed for memory meanwhile (each call is kept well under the margin between the mark
    and the point where the engine ends sessions to give memory back)."""
    bound_mb, each_mb = 1000, 80
    admission = Admission(sandbox_memory_mb=bound_mb)
    config = EngineConfig(prefork=1, max_workers=16, busy_workers=1, admission=admission)
    with Engine(plugins=[HostileTools()], config=config) as engine:
        if not engine.layers.active("memory_cgroup"):
            pytest.skip(f"no memory cgroup: {engine.layers.reason('memory_cgroup')}")
        bound = engine._running.services.sessions.bound  # type: ignore[union-attr]
        tools = ToolAPI(engine.connect())
        started = threading.Semaphore(0)
        calls: list[Any] = []
        arguments = {"mb": each_mb, "seconds": 60}
        try:
            while len(calls) < 16:
                calls.append(_started(tools, "hold_and_sleep", arguments, started))
                if not started.acquire(timeout=5):  # holding its memory, or waiting
                    break
            status = engine.status()
            assert status.calls_queued == 1 and 2 <= status.calls_running < 16, status
            assert bound.held_mb() > bound_mb * HIGH_WATER, bound.held_mb()
            ended = [call.result() for call in calls if _ended(call)]
            assert not ended, f"a call ended (killed for memory?): {ended}"
        finally:
            for call in calls:
                call.cancel()
        assert all(call.result().reason == "cancelled" for call in calls)


def test_a_call_computes_while_a_process_of_its_tree_is_runnable() -> None:
    """``sandbox._busy``: a sleeping process is not computing; one that spins is, and so is a
    sleeping one with a spinning grandchild; one that is gone is not."""
    sleeping = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    spinning = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    spin_below = (
        "import subprocess, sys; subprocess.run([sys.executable, '-c', 'while True: pass'])"
    )
    parent = subprocess.Popen(
        ["sh", "-c", f'{sys.executable} -c "{spin_below}"; sleep 60'], start_new_session=True
    )
    try:
        assert wait_for(lambda: computing([spinning.pid]) == 1)
        assert wait_for(lambda: computing([parent.pid]) == 1)
        assert wait_for(lambda: computing([sleeping.pid]) == 0)  # once started up
        assert computing([sleeping.pid, spinning.pid, parent.pid]) == 2
    finally:
        for process in (sleeping, spinning, parent):
            os.killpg(process.pid, 9) if process is parent else process.kill()
            process.wait()
    assert computing([sleeping.pid]) == 0
