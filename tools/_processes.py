"""``run_captured``: one command in the worker, its output streamed as it comes, its stdin fed,
within a wall-clock, a CPU-time and a memory limit of its own if it has them, and nothing it
started left running.

The command gets a process group of its own, killed as a whole once the command has exited or
a limit is passed: background jobs do not hold the call up, and what is already written is
collected. Output is decoded as UTF-8 (invalid bytes replaced) into the ``EventStream``s. The
command is reaped with ``wait4``, which gives its CPU time; its peak memory and the memory limit
are on what it held resident, and the CPU limit on what its whole tree spent, read while it runs
(``tools._tree_usage``).

The CPU limit is what contest judges limit: a command that is not scheduled (the machine is
busy) is not charged for it. It is judged as they judge it: past the limit while it runs, the
command is killed; finished, it is over its limit still when ``wait4`` says it spent more (it
ended between two readings). The wall-clock limit, given with it, only catches a command that
sleeps or waits.
"""

from __future__ import annotations

import codecs
import os
import selectors
import signal
import subprocess
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal, Protocol

from a2e_engine.tools._tree_usage import own_resident_kb, tree_usage

__all__ = ["Child", "ChildStdio", "Finished", "TextSink", "run_captured", "watch"]

#: After the command exits, how long output already in flight may take to arrive.
DRAIN_S = 0.2
#: How often a running command has its memory and CPU time read, when either is measured.
USAGE_POLL_S = 0.01
#: How often the time limit is looked at otherwise.
TICK_S = 0.05


class TextSink(Protocol):
    """Where a command's decoded output goes: an ``EventStream``, or a plain capped capture."""

    def write(self, text: str, /) -> int: ...

    def getvalue(self) -> str: ...


#: Which time limit a command ran past.
TimeLimit = Literal["cpu_time", "wall_time"]


@dataclass(frozen=True)
class Finished:
    exit_code: int | None  # None: a limit was passed and it was killed; negative: a signal
    seconds: float  # wall-clock, from start to exit (or to the kill)
    cpu_seconds: float = 0.0  # user + system, of the command and its descendants
    peak_kb: int = 0  # the most it held resident (tools._tree_usage)
    time_exceeded: TimeLimit | None = None
    memory_exceeded: bool = False

    @property
    def timed_out(self) -> bool:
        return self.time_exceeded is not None


#: The child's stdin, stdout and stderr, as descriptors of ours for it to take.
ChildStdio = tuple[int, int, int]


class Child(Protocol):
    """A started command, as ``watch`` sees it: its pid, what to take off each reading of its
    resident memory (a child forked from this process starts with a copy of its pages
    resident, which is not the child's own doing; ``None`` for an exec'd command), and what to
    tell once it is reaped."""

    pid: int
    resident_offset_kb: int | None

    def reaped(self, exit_code: int) -> None: ...


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
    tick: Callable[[], None] | None = None,
    cpu_limit: float | None = None,
) -> Finished:
    """Run ``argv``; ``preexec`` runs in the child before it executes the command (one that
    confines it further). ``time_limit`` is wall-clock seconds, ``cpu_limit`` CPU seconds. Its
    memory is read every ``USAGE_POLL_S`` when it has a limit or ``measure_memory`` asks for
    ``peak_kb``, its CPU time when it has a limit; otherwise never. ``tick`` is called at each
    turn of the loop that watches it (every ``TICK_S`` at the most)."""

    def start(stdio: ChildStdio) -> Child:
        return _Executed(
            subprocess.Popen(
                list(argv),
                cwd=cwd,
                env=env,
                stdin=stdio[0],
                stdout=stdio[1],
                stderr=stdio[2],
                start_new_session=True,  # its own process group, killed as a whole at the end
                preexec_fn=preexec,
            )
        )

    return watch(
        start, stdin, out, err, time_limit, memory_limit_kb, measure_memory, tick, cpu_limit
    )


class _Executed:
    """A command ``Popen`` started: told of its exit, so that it never waits for the pid."""

    resident_offset_kb: int | None = None

    def __init__(self, proc: subprocess.Popen[bytes]) -> None:
        self.proc = proc
        self.pid = proc.pid

    def reaped(self, exit_code: int) -> None:
        self.proc.returncode = exit_code


def watch(
    start: Callable[[ChildStdio], Child],
    stdin: str | None,
    out: TextSink,
    err: TextSink,
    time_limit: float | None = None,
    memory_limit_kb: int | None = None,
    measure_memory: bool = False,
    tick: Callable[[], None] | None = None,
    cpu_limit: float | None = None,
) -> Finished:
    """Start a child with ``start`` (given its stdio: a pipe for ``stdin``, or /dev/null, and
    pipes for its output) and see it through as ``run_captured`` says. The child must be the
    leader of a process group of its own."""
    measure_memory = measure_memory or memory_limit_kb is not None
    measure_cpu = cpu_limit is not None
    polled = measure_memory or measure_cpu
    started = time.monotonic()
    stdin_r, stdin_w = os.pipe() if stdin else (os.open(os.devnull, os.O_RDONLY), -1)
    out_r, out_w = os.pipe()
    err_r, err_w = os.pipe()
    try:
        child = start((stdin_r, out_w, err_w))
    except BaseException:
        for fd in (stdin_w, out_r, err_r):
            if fd >= 0:
                os.close(fd)
        raise
    finally:
        for fd in (stdin_r, out_w, err_w):
            os.close(fd)
    offset_kb = child.resident_offset_kb or 0
    # What an exec'd child held as this process's copy, for its ru_maxrss alone (a fork of
    # this process says its own offset).
    exec_d = child.resident_offset_kb is None
    forked_kb = own_resident_kb() if measure_memory and exec_d else 0
    selector = selectors.DefaultSelector()
    for fd, stream in ((out_r, out), (err_r, err)):
        decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        selector.register(fd, selectors.EVENT_READ, (stream, decoder))
    # Fed by this loop as the child reads it, not by a thread: starting one costs more than
    # a short run's whole watch.
    feeding = _Feeder(stdin_w, stdin.encode()) if stdin else None
    if feeding is not None:
        os.set_blocking(stdin_w, False)
        selector.register(stdin_w, selectors.EVENT_WRITE, feeding)
    give_up = started + time_limit if time_limit is not None else None
    time_exceeded: TimeLimit | None = None
    memory_exceeded = False
    seen_kb, seen_cpu = 0, 0.0
    next_reading = 0.0  # when the memory and CPU time are read next
    reaped: tuple[int, float, int] | None = None  # status, CPU seconds, ru_maxrss
    drain_until: float | None = None
    while selector.get_map():
        if tick is not None:
            tick()
        now = time.monotonic()
        if reaped is None:
            reaped = _reap(child, os.WNOHANG)
            if reaped is not None:
                drain_until = now + DRAIN_S
        if drain_until is None and polled and now >= next_reading:
            next_reading = now + USAGE_POLL_S
            usage = tree_usage(child.pid, measure_memory, measure_cpu)
            seen_kb = max(seen_kb, usage.peak_kb - offset_kb)
            seen_cpu = max(seen_cpu, usage.cpu_seconds)
            if memory_limit_kb is not None and seen_kb > memory_limit_kb:
                memory_exceeded = True
            elif cpu_limit is not None and seen_cpu > cpu_limit:
                time_exceeded = "cpu_time"
            if memory_exceeded or time_exceeded:
                _kill_group(child.pid)
                drain_until = now + DRAIN_S
        if drain_until is None and give_up is not None and now >= give_up:
            time_exceeded = "wall_time"
            _kill_group(child.pid)
            drain_until = now + DRAIN_S
        turn = USAGE_POLL_S if polled else TICK_S
        timeout = turn if drain_until is None else max(0.0, drain_until - now)
        for key, _ in selector.select(timeout):
            if key.data is feeding:
                if not feeding.write():
                    selector.unregister(key.fileobj)
                    feeding.close()
                continue
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
    if feeding is not None:
        feeding.close()
    if reaped is None:
        reaped = _reap(child, 0)
    assert reaped is not None
    status, cpu_seconds, max_rss_kb = reaped
    seconds = time.monotonic() - started
    _kill_group(child.pid)  # what the command left running in its group
    for fd in (out_r, err_r):
        os.close(fd)
    # ru_maxrss tells something only above what the child had as the worker's copy: a burst
    # after the last reading.
    if exec_d:
        late_kb = max_rss_kb if measure_memory and max_rss_kb > forked_kb else 0
    else:
        late_kb = max_rss_kb - offset_kb if measure_memory else 0
    peak_kb = max(seen_kb, late_kb)
    if memory_limit_kb is not None and peak_kb > memory_limit_kb:
        memory_exceeded = True
    cpu_seconds = max(cpu_seconds, seen_cpu)
    if time_exceeded is None and cpu_limit is not None and cpu_seconds > cpu_limit:
        time_exceeded = "cpu_time"  # it ended between two readings, past its limit
    killed = time_exceeded is not None or memory_exceeded
    return Finished(
        None if killed else status,
        seconds,
        cpu_seconds,
        peak_kb,
        None if memory_exceeded else time_exceeded,
        memory_exceeded,
    )


def _reap(child: Child, options: int) -> tuple[int, float, int] | None:
    """``wait4`` on the child: its exit code (negative: the signal), its CPU time and its
    ``ru_maxrss``, or None while it runs. The child is told, so that nothing waits again."""
    pid, status, usage = os.wait4(child.pid, options)
    if pid == 0:
        return None
    exit_code = os.waitstatus_to_exitcode(status)
    child.reaped(exit_code)
    return exit_code, usage.ru_utime + usage.ru_stime, usage.ru_maxrss


def _kill_group(pid: int) -> None:
    try:
        os.killpg(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


class _Feeder:
    """The child's stdin, written as the pipe takes it (the pipe's end non-blocking)."""

    def __init__(self, fd: int, data: bytes) -> None:
        self.fd, self.left = fd, memoryview(data)

    def write(self) -> bool:
        """Write what the pipe takes now; whether there is more to write (not once the child
        closed its end: it did not read it all)."""
        try:
            self.left = self.left[os.write(self.fd, self.left) :]
        except BlockingIOError:
            return True
        except OSError:
            self.left = self.left[:0]
        return bool(self.left)

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1
