"""Closed-loop measurement of a call function: throughput and latency at a given concurrency.

Figures from one run are only compared with figures from the same run (machines here are shared
and noisy); see ``benchmarks.bench`` for the ratios.
"""

from __future__ import annotations

import ctypes
import random
import statistics
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from typing import Any

__all__ = ["Figures", "closed_loop", "open_loop"]


@dataclass(frozen=True)
class Figures:
    calls: int
    concurrency: int
    calls_per_s: float
    median_ms: float
    p99_ms: float

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def closed_loop(
    call: Callable[[], Any],
    calls: int,
    concurrency: int = 1,
    on_call: Callable[[], None] | None = None,
    max_seconds: float | None = None,
    warmup: int = 5,
) -> Figures:
    """Up to ``calls`` calls (fewer if ``max_seconds`` runs out first), ``concurrency`` callers
    each starting its next call as soon as its last one returned. ``on_call`` is told after
    each (a progress bar)."""
    with ThreadPoolExecutor(concurrency) as pool:
        list(pool.map(lambda _: call(), range(min(warmup, calls))))
    latencies: list[float] = []
    lock = threading.Lock()
    issued = 0
    start = time.perf_counter()
    deadline = start + max_seconds if max_seconds else float("inf")

    def caller() -> None:
        nonlocal issued
        while True:
            with lock:
                if issued >= calls or (issued >= concurrency and time.perf_counter() > deadline):
                    return
                issued += 1
            began = time.perf_counter()
            call()
            took = time.perf_counter() - began
            with lock:
                latencies.append(took)
            if on_call is not None:
                on_call()

    threads = [threading.Thread(target=caller) for _ in range(concurrency)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    elapsed = time.perf_counter() - start
    return _figures(latencies, concurrency, elapsed)


def _figures(latencies: list[float], concurrency: int, elapsed: float) -> Figures:
    latencies.sort()
    return Figures(
        calls=len(latencies),
        concurrency=concurrency,
        calls_per_s=len(latencies) / elapsed,
        median_ms=statistics.median(latencies) * 1000,
        p99_ms=latencies[max(0, int(len(latencies) * 0.99) - 1)] * 1000,
    )


def open_loop(
    call: Callable[[], Any],
    rate: float,
    duration_s: float,
    max_in_flight: int = 64,
    seed: int = 1,
) -> Figures:
    """Calls arriving at ``rate`` per second (Poisson) for ``duration_s``, whether or not the
    earlier ones have returned. Latency counts from the arrival, so queueing is included.

    Each arrival is issued by a caller that was already waiting for it, not handed to a thread
    pool when it falls due: that hand-over is a thread wake-up (~0.1-0.3 ms on these VMs, the
    harness's own cost) and it was counted in every system's latency. The callers ask for
    fine timer slack, so that oversleeping an arrival adds microseconds, not the default
    50 us. When all ``max_in_flight`` callers are busy, arrivals wait, and that wait counts.
    """
    rng = random.Random(seed)
    schedule: list[float] = []
    offset = rng.expovariate(rate)
    while offset < duration_s:
        schedule.append(offset)
        offset += rng.expovariate(rate)
    latencies: list[float] = []
    lock = threading.Lock()
    taken = 0
    start = 0.0
    go = threading.Event()

    def caller() -> None:
        nonlocal taken
        _fine_timer_slack()
        go.wait()
        while True:
            with lock:
                if taken >= len(schedule):
                    return
                arrival = start + schedule[taken]
                taken += 1
            delay = arrival - time.perf_counter()
            if delay > 0:
                time.sleep(delay)
            call()
            took = time.perf_counter() - arrival
            with lock:
                latencies.append(took)

    threads = [threading.Thread(target=caller) for _ in range(max(1, max_in_flight))]
    for thread in threads:
        thread.start()
    start = time.perf_counter()
    go.set()
    for thread in threads:
        thread.join()
    return _figures(latencies, max_in_flight, time.perf_counter() - start)


def _fine_timer_slack() -> None:
    """1 us of timer slack for this thread (Linux ``PR_SET_TIMERSLACK``); elsewhere nothing."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_TIMERSLACK, ctypes.c_ulong(1000), 0, 0, 0)
    except (OSError, AttributeError):
        pass


_PR_SET_TIMERSLACK = 29
