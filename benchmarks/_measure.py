"""Closed-loop measurement of a call function: throughput and latency at a given concurrency.

Figures from one run are only compared with figures from the same run (machines here are shared
and noisy); see ``benchmarks.bench`` for the ratios.
"""

from __future__ import annotations

import ctypes
import dataclasses
import random
import statistics
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from typing import Any

__all__ = ["Figures", "closed_loop", "concurrency_levels", "median_figures", "open_loop"]

#: The most callers a level may have.
MAX_CONCURRENCY = 64


def concurrency_levels(text: str) -> list[int]:
    """``--concurrency``'s comma-separated levels; ``ValueError`` saying what is wrong."""
    try:
        levels = [int(level) for level in text.split(",")]
    except ValueError:
        raise ValueError(f"{text!r} is not a list of integers") from None
    if any(c < 1 or c > MAX_CONCURRENCY for c in levels):
        raise ValueError(f"each level must be 1-{MAX_CONCURRENCY}")
    return levels


@dataclass(frozen=True)
class Figures:
    calls: int  # that succeeded: only these count in calls/s and latency
    concurrency: int
    calls_per_s: float
    median_ms: float
    p99_ms: float
    failures: int = 0  # calls that raised, where a loop tolerates them
    #: CPU of the serving process tree per successful call, where the bench measured it.
    cpu_ms_per_call: float | None = None

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def median_figures(rounds: list[Figures]) -> Figures:
    """Several rounds of one figure as one: the median of the rates, median latencies and CPU,
    the worst round's p99 (a round of a few slow calls has a p99 below another's median), the
    sum of the calls and failures."""
    if len(rounds) == 1:
        return rounds[0]
    cpu = [f.cpu_ms_per_call for f in rounds if f.cpu_ms_per_call is not None]
    return Figures(
        calls=sum(f.calls for f in rounds),
        concurrency=rounds[0].concurrency,
        calls_per_s=statistics.median(f.calls_per_s for f in rounds),
        median_ms=statistics.median(f.median_ms for f in rounds),
        p99_ms=max(f.p99_ms for f in rounds),
        failures=sum(f.failures for f in rounds),
        cpu_ms_per_call=statistics.median(cpu) if cpu else None,
    )


def closed_loop(
    call: Callable[[], Any],
    calls: int,
    concurrency: int = 1,
    on_call: Callable[[], None] | None = None,
    max_seconds: float | None = None,
    warmup: int = 5,
    tolerate_failures: bool = False,
    on_failure: Callable[[BaseException], None] | None = None,
    on_measuring: Callable[[], None] | None = None,
) -> Figures:
    """Up to ``calls`` calls (fewer if ``max_seconds`` runs out first), ``concurrency`` callers
    each starting its next call as soon as its last one returned. ``on_call`` is told after
    each (a progress bar); ``on_measuring`` once the warm-up calls are done and the measured
    window starts (a CPU meter).

    A call that raises stops the loop, and its exception is raised here, in the caller's
    thread: a traceback in a caller thread would lose that caller and keep going. With
    ``tolerate_failures`` it is counted instead (``Figures.failures``, and ``on_failure`` is
    told), not as a call; only if no call at all succeeded is the first failure raised."""
    failures: list[BaseException] = []
    lock = threading.Lock()
    stop = threading.Event()

    def attempt() -> bool:
        try:
            call()
        except Exception as exc:
            with lock:
                failures.append(exc)
            if on_failure is not None:
                on_failure(exc)
            if not tolerate_failures:
                stop.set()
            return False
        return True

    warm = min(warmup, calls)
    with ThreadPoolExecutor(concurrency) as pool:
        warmed = sum(pool.map(lambda _: attempt(), range(warm)))
    if warm and (stop.is_set() or not warmed):
        raise failures[0]
    failed_in_warmup = len(failures)
    if on_measuring is not None:
        on_measuring()
    latencies: list[float] = []
    issued = 0
    start = time.perf_counter()
    deadline = start + max_seconds if max_seconds else float("inf")

    def caller() -> None:
        nonlocal issued
        while not stop.is_set():
            with lock:
                if issued >= calls or (issued >= concurrency and time.perf_counter() > deadline):
                    return
                issued += 1
            began = time.perf_counter()
            if not attempt():
                continue
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
    if stop.is_set() or not latencies:
        if not failures:
            raise ValueError(f"closed_loop made no call (calls={calls})")
        raise failures[failed_in_warmup] if len(failures) > failed_in_warmup else failures[0]
    figures = _figures(latencies, concurrency, elapsed)
    return dataclasses.replace(figures, failures=len(failures) - failed_in_warmup)


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
