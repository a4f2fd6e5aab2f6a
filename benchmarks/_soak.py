"""``a2e bench --soak [N]``: N calls at full concurrency through one engine, then the checks a
long-running host needs: no call lost or failed, no process or file descriptor left behind, and
a supervisor whose memory does not grow (measured after a warm-up, so that caches and pools
that fill once do not count)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

import psutil

from a2e.caps.tools._client import ToolAPI

__all__ = ["soak"]

MAX_RSS_GROWTH = 0.10


def _descendants() -> int:
    """Processes below us: none once the engine has stopped."""
    return len(psutil.Process().children(recursive=True))


def _run(one: Callable[[int], None], numbers: range, concurrency: int) -> None:
    """``one(n)`` for every n, ``concurrency`` at a time. Callers take the next number when
    they are free: submitting all calls up front would hold thousands of futures in this
    process, and its memory is what the soak watches."""
    lock = threading.Lock()
    pending = iter(numbers)

    def caller() -> None:
        while True:
            with lock:
                number = next(pending, None)
            if number is None:
                return
            one(number)

    threads = [threading.Thread(target=caller) for _ in range(concurrency)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()


def soak(
    calls: int, concurrency: int = 8, on_progress: Callable[[int], None] | None = None
) -> dict[str, Any]:
    """Run the soak; the report says ``ok`` and every figure it was decided on."""
    from a2e_engine.benchmarks._workloads import SNIPPET, BenchTools
    from a2e_engine.engine import Engine, EngineConfig

    me = psutil.Process()
    config = EngineConfig(prefork=4, max_workers=concurrency)
    with Engine(plugins=[BenchTools()], config=config) as engine:
        client = engine.connect(client_name="a2e-soak")
        tools = ToolAPI(client)
        lock = threading.Lock()
        counts = {"ok": 0, "failed": 0, "raised": 0}
        failures: list[str] = []
        warm = min(1000, calls // 10)

        def one(number: int) -> None:
            # Every tenth call does real work and prints, so output paths are soaked too.
            name, arguments = (
                ("python_eval", {"code": SNIPPET}) if number % 10 == 0 else ("noop", {})
            )
            try:
                result = tools.call(tool_name=name, arguments=arguments, timeout=60)
                key = "ok" if result.success else "failed"
                if not result.success and len(failures) < 5:
                    failures.append(str(result.error))
            except Exception as exc:
                key = "raised"
                if len(failures) < 5:
                    failures.append(f"{type(exc).__name__}: {exc}")
            with lock:
                counts[key] += 1
            if on_progress is not None:
                on_progress(number)

        _run(one, range(warm), concurrency)
        time.sleep(1.0)  # the waiting workers refill
        before = {"rss": me.memory_info().rss, "fds": me.num_fds(), "processes": _descendants()}
        started = time.perf_counter()
        _run(one, range(warm, calls), concurrency)
        elapsed = time.perf_counter() - started
        time.sleep(1.0)
        after = {"rss": me.memory_info().rss, "fds": me.num_fds(), "processes": _descendants()}
        client.close()
    growth = (after["rss"] - before["rss"]) / before["rss"]
    leftover = _descendants()
    lost = calls - sum(counts.values())
    report = {
        "calls": calls,
        "concurrency": concurrency,
        "calls_per_s": round((calls - warm) / elapsed, 1),
        "outcomes": counts,
        "lost": lost,
        "first_failures": failures,
        "supervisor_rss_mib": [round(before["rss"] / 2**20, 1), round(after["rss"] / 2**20, 1)],
        "supervisor_rss_growth": round(growth, 4),
        "supervisor_fds": [before["fds"], after["fds"]],
        "engine_processes": [before["processes"], after["processes"]],
        "processes_left_after_stop": leftover,
    }
    report["ok"] = bool(
        lost == 0
        and counts["ok"] == calls
        and after["fds"] <= before["fds"]
        and after["processes"] <= before["processes"]
        and leftover == 0
        and growth < MAX_RSS_GROWTH
    )
    return report
