"""``run_captured``: one command in the worker, its output streamed as it comes, its stdin fed,
within a time and a memory limit of its own if it has them, and nothing it started left running.

The command gets a process group of its own, killed as a whole once the command has exited or
a limit is passed: background jobs do not hold the call up, and what is already written is
collected. Output is decoded as UTF-8 (invalid bytes replaced) into the ``EventStream``s. The
command is reaped with ``wait4``, which gives its CPU time; its peak memory and the memory limit
are on what it held resident (``tools.resident``).
"""

from __future__ import annotations

import codecs
import os
import selectors
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

from a2e_engine.tools.resident import own_resident_kb, peak_resident_kb

__all__ = ["Finished", "TextSink", "run_captured"]

#: After the command exits, how long output already in flight may take to arrive.
DRAIN_S = 0.2
#: How often a running command has its memory read, when it is measured.
MEMORY_POLL_S = 0.01
#: How often the time limit is looked at otherwise.
TICK_S = 0.05


class TextSink(Protocol):
    """Where a command's decoded output goes: an ``EventStream``, or a plain capped capture."""

    def write(self, text: str, /) -> int: ...

    def getvalue(self) -> str: ...


@dataclass(frozen=True)
class Finished:
    exit_code: int | None  # None: a limit was passed and it was killed; negative: a signal
    seconds: float  # wall-clock, from start to exit (or to the kill)
    cpu_seconds: float = 0.0  # user + system, of the command and descendants it waited for
    peak_kb: int = 0  # the most it held resident (tools.resident)
    timed_out: bool = False
    memory_exceeded: bool = False


def run_captured(
    argv: Sequence[str],
    cwd: str,
    env: dict[str, str],
    stdin: str | None,
    out: TextSink,
    err: TextSink,
    time_limit: float | None = None,
    memory_limit_kb: int | None = None,
    preexec: Callable[[], None] | None = None,
    measure_memory: bool = False,
) -> Finished:
    """Run ``argv``; ``preexec`` runs in the child before it executes the command (one that
    confines it further). Its memory is read every ``MEMORY_POLL_S`` when it has a limit or
    ``measure_memory`` asks for ``peak_kb``; otherwise never."""
    measure_memory = measure_memory or memory_limit_kb is not None
    started = time.monotonic()
    forked_kb = own_resident_kb() if measure_memory else 0
    proc = subprocess.Popen(
        list(argv),
        cwd=cwd,
        env=env,
        stdin=subprocess.PIPE if stdin else subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,  # its own process group, killed as a whole at the end
        preexec_fn=preexec,
    )
    if stdin:
        threading.Thread(target=_feed, args=(proc, stdin), daemon=True).start()
    assert proc.stdout is not None and proc.stderr is not None
    selector = selectors.DefaultSelector()
    for pipe, stream in ((proc.stdout, out), (proc.stderr, err)):
        decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        selector.register(pipe, selectors.EVENT_READ, (stream, decoder))
    give_up = started + time_limit if time_limit is not None else None
    timed_out = memory_exceeded = False
    seen_kb = 0
    next_reading = 0.0  # when the memory is read next
    reaped: tuple[int, float, int] | None = None  # status, CPU seconds, ru_maxrss
    drain_until: float | None = None
    while selector.get_map():
        now = time.monotonic()
        if reaped is None:
            reaped = _reap(proc, os.WNOHANG)
            if reaped is not None:
                drain_until = now + DRAIN_S
        if drain_until is None and measure_memory and now >= next_reading:
            next_reading = now + MEMORY_POLL_S
            seen_kb = max(seen_kb, peak_resident_kb(proc.pid))
            if memory_limit_kb is not None and seen_kb > memory_limit_kb:
                memory_exceeded = True
                _kill_group(proc.pid)
                drain_until = now + DRAIN_S
        if drain_until is None and give_up is not None and now >= give_up:
            timed_out = True
            _kill_group(proc.pid)
            drain_until = now + DRAIN_S
        tick = MEMORY_POLL_S if measure_memory else TICK_S
        timeout = tick if drain_until is None else max(0.0, drain_until - now)
        for key, _ in selector.select(timeout):
            stream, decoder = key.data
            data = os.read(key.fd, 65536)
            if data:
                stream.write(decoder.decode(data))
            else:
                stream.write(decoder.decode(b"", final=True))
                selector.unregister(key.fileobj)
        if drain_until is not None and time.monotonic() >= drain_until:
            break  # a background job holds the pipes open: do not wait for it
    selector.close()
    if reaped is None:
        reaped = _reap(proc, 0)
    assert reaped is not None
    status, cpu_seconds, max_rss_kb = reaped
    seconds = time.monotonic() - started
    _kill_group(proc.pid)  # what the command left running in its group
    for pipe in (proc.stdout, proc.stderr):
        pipe.close()
    # ru_maxrss tells something only above what the child had as the worker's copy: a burst
    # after the last reading.
    peak_kb = max(seen_kb, max_rss_kb if measure_memory and max_rss_kb > forked_kb else 0)
    if memory_limit_kb is not None and peak_kb > memory_limit_kb:
        memory_exceeded = True
    killed = timed_out or memory_exceeded
    return Finished(
        None if killed else status,
        seconds,
        cpu_seconds,
        peak_kb,
        timed_out and not memory_exceeded,
        memory_exceeded,
    )


def _reap(proc: subprocess.Popen[bytes], options: int) -> tuple[int, float, int] | None:
    """``wait4`` on the command: its exit code (negative: the signal), its CPU time and its
    ``ru_maxrss``, or None while it runs. Popen is told, so that it does not wait again."""
    pid, status, usage = os.wait4(proc.pid, options)
    if pid == 0:
        return None
    proc.returncode = os.waitstatus_to_exitcode(status)
    return proc.returncode, usage.ru_utime + usage.ru_stime, usage.ru_maxrss


def _kill_group(pid: int) -> None:
    try:
        os.killpg(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def _feed(proc: subprocess.Popen[bytes], text: str) -> None:
    assert proc.stdin is not None
    try:
        proc.stdin.write(text.encode())
        proc.stdin.close()
    except (BrokenPipeError, OSError):
        pass  # the command did not read it all
