"""``max_workers`` sized for calls that wait: by default as many calls run at once as the host's
cores (several per core) and memory (each call's whole limit) allow, and every one of them runs
at once, not queued behind a few; the bound and its reason are in ``status``, ``/readyz`` and
``a2e doctor``."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading

import pytest

from a2e.caps.tools._client import ToolAPI
from a2e_engine.engine import Engine, EngineConfig
from a2e_engine.engine._concurrency import CALLS_PER_CORE, default_max_workers
from tests.hostile_plugin import HostileTools
from tests.waiting import wait_for


def test_the_default_is_several_calls_per_core_as_far_as_memory_goes() -> None:
    cores = len(os.sched_getaffinity(0))
    small = default_max_workers(call_memory_mb=1)
    assert small.workers == CALLS_PER_CORE * cores, small
    assert f"{CALLS_PER_CORE} per core on {cores} core" in small.why
    huge = default_max_workers(call_memory_mb=1 << 30)  # no host holds one such call
    assert huge.workers == 1 and "memory for 0 calls" in huge.why, huge
    assert EngineConfig(max_workers=3).worker_bound().workers == 3


def test_waiting_calls_all_run_at_once_up_to_the_bound_and_the_next_queues() -> None:
    with Engine(plugins=[HostileTools()], config=EngineConfig(prefork=1)) as engine:
        bound = engine.status().max_workers
        assert bound == engine.worker_bound.workers >= CALLS_PER_CORE
        assert engine.status().max_workers_why == engine.worker_bound.why
        tools = ToolAPI(engine.connect())
        asleep = threading.Semaphore(0)
        calls = [
            tools.start(
                tool_name="sleep",
                arguments={"seconds": 30},
                timeout=60,
                streaming=True,
                on_event=lambda _: asleep.release(),
            )
            for _ in range(bound + 1)
        ]
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
