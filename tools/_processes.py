"""``run_captured``: one command in the worker, its output streamed as it comes, its stdin fed,
within a wall-clock, a CPU-time and a memory limit of its own if it has them, and nothing it
started left running.

The command gets a process group of its own, killed as a whole once the command has exited or
a limit is passed: background jobs do not hold the call up, and what is already written is
collected. Output is decoded as UTF-8 (invalid bytes replaced) into the ``EventStream``s. The
command is reaped with ``wait4``, which gives its CPU time; its peak memory and the memory limit
are on what it held resident, and the CPU limit on what its whole tree spent, read while it runs
(``sandbox._tree_usage``).

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
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal, Protocol

from a2e_engine.sandbox._run_domain import CaseDomain
from a2e_engine.sandbox._tree_usage import TreeUsage, own_resident_kb, tree_usage

__all__ = [
    "Child",
    "ChildStdio",
    "Finished",
    "Monitor",
    "Outputs",
    "TextSink",
    "Usage",
    "run_captured",
    "start_command",
    "watch",
]

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
#: What a running command has used, given its pid and whether to read memory and CPU time.
Usage = Callable[[int, bool, bool], TreeUsage]


@dataclass(frozen=True)
class Finished:
    exit_code: int | None  # None: a limit was passed and it was killed; negative: a signal
    seconds: float  # wall-clock, from start to exit (or to the kill)
    cpu_seconds: float = 0.0  # user + system, of the command and its descendants
    peak_kb: int = 0  # the most it held resident (sandbox._tree_usage)
    time_exceeded: TimeLimit | None = None
    memory_exceeded: bool = False

    @property
    def timed_out(self) -> bool:
        return self.time_exceeded is not None


#: What a command reads: text given up front, the call's input as it comes, or nothing.
Stdin = str | Callable[[], bytes | None] | None
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
    stdin: Stdin,
    out: TextSink,
    err: TextSink,
    time_limit: float | None = None,
    memory_limit_kb: int | None = None,
    preexec: Callable[[], None] | None = None,
    measure_memory: bool = False,
    tick: Callable[[], None] | None = None,
    cpu_limit: float | None = None,
    usage: Usage = tree_usage,
    domain: CaseDomain | None = None,
) -> Finished:
    """Run ``argv``; ``preexec`` runs in the child before it executes the command (one that
    confines it further). ``time_limit`` is wall-clock seconds, ``cpu_limit`` CPU seconds. Its
    memory is read every ``USAGE_POLL_S`` when it has a limit or ``measure_memory`` asks for
    ``peak_kb``, its CPU time when it has a limit; otherwise never; ``usage`` reads them (its
    process tree by default), or, given the run's case group (``domain``, which the child
    joins in ``preexec``), the group does, to the end of the run. ``tick`` is called at each
    turn of the loop that watches it (every ``TICK_S`` at the most)."""

    def start(stdio: ChildStdio) -> Child:
        return start_command(argv, cwd, env, stdio, preexec)

    return watch(
        start,
        stdin,
        out,
        err,
        time_limit,
        memory_limit_kb,
        measure_memory,
        tick,
        cpu_limit,
        usage,
        domain,
    )


def start_command(
    argv: Sequence[str],
    cwd: str,
    env: dict[str, str],
    stdio: ChildStdio,
    preexec: Callable[[], None] | None = None,
) -> Child:
    """``argv`` started on ``stdio``, the leader of a process group of its own (killed as a
    whole at the end), ``preexec`` run in it before it executes the command."""
    return _Executed(
        subprocess.Popen(
            list(argv),
            cwd=cwd,
            env=env,
            stdin=stdio[0],
            stdout=stdio[1],
            stderr=stdio[2],
            start_new_session=True,
            preexec_fn=preexec,
        )
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
    stdin: Stdin,
    out: TextSink,
    err: TextSink,
    time_limit: float | None = None,
    memory_limit_kb: int | None = None,
    measure_memory: bool = False,
    tick: Callable[[], None] | None = None,
    cpu_limit: float | None = None,
    usage: Usage = tree_usage,
    domain: CaseDomain | None = None,
) -> Finished:
    """Start a child with ``start`` (given its stdio: a pipe for ``stdin``, fed with it, or
    from it as it comes when it is the call's input (``ToolContext.input``); or /dev/null; and
    pipes for its output) and see it through as ``run_captured`` says. The child must be the
    leader of a process group of its own."""
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
    monitor = Monitor(child, time_limit, cpu_limit, memory_limit_kb, measure_memory, usage, domain)
    outputs = Outputs({out_r: out, err_r: err})
    # Fed by this loop as the child reads it, not by a thread: starting one costs more than
    # a short run's whole watch.
    if callable(stdin):
        _pump(stdin, stdin_w)  # the pipe's end is the pump's now
        stdin_w = -1
    feeding = _Feeder(stdin_w, stdin.encode()) if isinstance(stdin, str) and stdin else None
    if feeding is not None:
        os.set_blocking(stdin_w, False)
        outputs.selector.register(stdin_w, selectors.EVENT_WRITE, feeding)
    try:
        outputs.follow([monitor], tick, feeding)
    finally:
        if feeding is not None:
            feeding.close()
    return monitor.finish()


class Monitor:
    """One started child seen through its limits: reaped as soon as it exits, its memory and
    CPU time read every ``USAGE_POLL_S`` when either is measured (``sandbox._tree_usage``), its
    process group killed past a limit and once it is done. Given its run's case group
    (``domain``), the group is read instead, and after the child has exited too, as long as
    its output is still read (what it left may still hold it, and work): past a limit then,
    the run is over limit all the same, and the group is emptied."""

    def __init__(
        self,
        child: Child,
        time_limit: float | None,
        cpu_limit: float | None,
        memory_limit_kb: int | None,
        measure_memory: bool,
        usage: Usage = tree_usage,
        domain: CaseDomain | None = None,
    ) -> None:
        self.child = child
        self.domain = domain
        self.usage = domain.usage if domain is not None else usage
        self.started = time.monotonic()
        self.cpu_limit, self.memory_limit_kb = cpu_limit, memory_limit_kb
        self.measure_memory = measure_memory or memory_limit_kb is not None
        self.polled = self.measure_memory or cpu_limit is not None
        self.give_up = self.started + time_limit if time_limit is not None else None
        self.offset_kb = child.resident_offset_kb or 0
        # What an exec'd child held as this process's copy, for its ru_maxrss alone (a fork of
        # this process says its own offset).
        self.exec_d = child.resident_offset_kb is None
        self.forked_kb = own_resident_kb() if self.measure_memory and self.exec_d else 0
        self.time_exceeded: TimeLimit | None = None
        self.memory_exceeded = False
        self.seen_kb, self.seen_cpu = 0, 0.0
        # When the memory and CPU time are read next: not at once, where a short run would
        # have nothing to show (its last figures come from wait4 when it is reaped).
        self.next_reading = self.started + USAGE_POLL_S
        self.reaped: tuple[int, float, int] | None = None  # status, CPU seconds, ru_maxrss
        self.ended: float | None = None  # when it exited or was killed

    @property
    def turn(self) -> float:
        """How long the loop that watches it may wait between two looks."""
        return USAGE_POLL_S if self.polled else TICK_S

    def look(self, now: float) -> None:
        """Reap it if it exited; else read its usage when due and kill it past a limit. Once
        it has exited, its case group's usage is read on while the run lingers."""
        if self.ended is not None:
            if self.domain is not None and self.polled and not self.over_limit:
                self._read_usage(now)
                if self.over_limit:
                    self.domain.kill()
            return
        self.reaped = _reap(self.child, os.WNOHANG)
        if self.reaped is not None:
            self.ended = now
            return
        self._read_usage(now)
        if not self.over_limit:
            if self.give_up is None or now < self.give_up:
                return
            self.time_exceeded = "wall_time"
        self.kill()
        self.ended = now

    @property
    def over_limit(self) -> bool:
        return self.memory_exceeded or self.time_exceeded is not None

    def kill(self) -> None:
        """The run killed: its case group emptied, or its process group killed."""
        if self.domain is not None:
            self.domain.kill()
        else:
            _kill_group(self.child.pid)

    def _read_usage(self, now: float) -> None:
        """Its memory and CPU time read when due; a limit it ran past marked."""
        if self.polled and now >= self.next_reading:
            self.next_reading = now + USAGE_POLL_S
            usage = self.usage(self.child.pid, self.measure_memory, self.cpu_limit is not None)
            self.seen_kb = max(self.seen_kb, usage.peak_kb - self.offset_kb, usage.held_kb)
            self.seen_cpu = max(self.seen_cpu, usage.cpu_seconds)
            if self.memory_limit_kb is not None and self.seen_kb > self.memory_limit_kb:
                self.memory_exceeded = True
            elif self.cpu_limit is not None and self.seen_cpu > self.cpu_limit:
                self.time_exceeded = "cpu_time"

    def stop(self) -> None:
        """Kill it now, for no fault of its own (the process it talks to is gone)."""
        if self.ended is None:
            self.kill()
            self.ended = time.monotonic()

    def finish(self) -> Finished:
        """Reaped (waiting for it if need be), what it left in its group killed: how it went."""
        if self.reaped is None:
            self.reaped = _reap(self.child, 0)
        assert self.reaped is not None
        status, cpu_seconds, max_rss_kb = self.reaped
        seconds = time.monotonic() - self.started
        _kill_group(self.child.pid)  # what the command left running in its group
        if self.domain is not None:  # and all else the run started: its last figures
            ended = self.domain.end()
            if ended.cpu_seconds is not None:
                cpu_seconds = max(cpu_seconds, ended.cpu_seconds)
            self.memory_exceeded |= ended.out_of_memory
        # ru_maxrss tells something only above what the child had as the worker's copy: a burst
        # after the last reading.
        measured = self.measure_memory
        if self.exec_d:
            late_kb = max_rss_kb if measured and max_rss_kb > self.forked_kb else 0
        else:
            late_kb = max_rss_kb - self.offset_kb if measured else 0
        peak_kb = max(self.seen_kb, late_kb)
        memory_exceeded = self.memory_exceeded
        if self.memory_limit_kb is not None and peak_kb > self.memory_limit_kb:
            memory_exceeded = True
        cpu_seconds = max(cpu_seconds, self.seen_cpu)
        time_exceeded = self.time_exceeded
        if time_exceeded is None and self.cpu_limit is not None and cpu_seconds > self.cpu_limit:
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


class Outputs:
    """The pipes the watched children write to, each read into its sink as UTF-8 (invalid
    bytes replaced) as it comes; the read ends are closed with ``follow``."""

    def __init__(self, sinks: dict[int, TextSink]) -> None:
        self.selector = selectors.DefaultSelector()
        for fd, sink in sinks.items():
            decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
            self.selector.register(fd, selectors.EVENT_READ, (sink, decoder))
        self.fds = list(sinks)

    def follow(
        self,
        monitors: list[Monitor],
        tick: Callable[[], None] | None = None,
        feeding: _Feeder | None = None,
    ) -> None:
        """Read until every child has ended and its pipes are closed, or ``DRAIN_S`` after
        the last one ended (a background job may hold them open: not waited for). A child
        that closed its pipes is still watched to its end: its limits hold. Each child's exit
        wakes the loop (a pidfd of it is watched with the pipes): a child closes its pipes as
        it exits, a moment before it can be reaped, and a loop that then slept out its turn
        would add that turn to every short run."""
        drain_until: float | None = None
        selector = self.selector
        exits = _watch_exits(selector, monitors)
        try:
            while len(selector.get_map()) > len(exits) or drain_until is None:
                if tick is not None:
                    tick()
                now = time.monotonic()
                for monitor in monitors:
                    monitor.look(now)
                _forget_exits(selector, exits)
                if drain_until is None and all(m.ended is not None for m in monitors):
                    if not selector.get_map():
                        break  # every pipe closed already: nothing to wait for
                    drain_until = now + DRAIN_S
                turn = min(m.turn for m in monitors)
                timeout = turn if drain_until is None else max(0.0, drain_until - now)
                for key, _ in selector.select(timeout):
                    if key.data is _EXITED:  # reaped at the next look; one wake-up each
                        _forget_exit(selector, exits, key.fd)
                        continue
                    if key.data is feeding and feeding is not None:
                        if not feeding.write():
                            selector.unregister(key.fileobj)
                            feeding.close()
                        continue
                    sink, decoder = key.data
                    data = os.read(key.fd, 65536)
                    if data:
                        sink.write(decoder.decode(data))
                    else:
                        sink.write(decoder.decode(b"", final=True))
                        selector.unregister(key.fileobj)
                if drain_until is not None and time.monotonic() >= drain_until:
                    break
        finally:
            selector.close()
            for fd in (*self.fds, *exits):
                os.close(fd)


#: What a pidfd is registered with in the loop's selector (``Outputs.follow``).
_EXITED = object()


def _watch_exits(selector: selectors.BaseSelector, monitors: list[Monitor]) -> dict[int, Monitor]:
    """A pidfd of each child, registered with ``selector``: readable once it has exited. A
    child the kernel gives no pidfd of has none (its turn wakes the loop)."""
    exits: dict[int, Monitor] = {}
    for monitor in monitors:
        try:
            fd = os.pidfd_open(monitor.child.pid)
        except (OSError, AttributeError):
            continue
        selector.register(fd, selectors.EVENT_READ, _EXITED)
        exits[fd] = monitor
    return exits


def _forget_exits(selector: selectors.BaseSelector, exits: dict[int, Monitor]) -> None:
    """Stop watching the pidfds of children that have ended."""
    for fd, monitor in list(exits.items()):
        if monitor.ended is not None:
            _forget_exit(selector, exits, fd)


def _forget_exit(selector: selectors.BaseSelector, exits: dict[int, Monitor], fd: int) -> None:
    selector.unregister(fd)
    os.close(fd)
    del exits[fd]


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


def _pump(given: Callable[[], bytes | None], fd: int) -> None:
    """The call's input written to the child's stdin as it comes, by a thread of its own
    (waiting on the supervisor), which closes the pipe at the input's end or once the child
    closed its end. A thread only for a call that takes input: what a command is given up
    front is fed by the watching loop."""

    def pump() -> None:
        try:
            while (piece := given()) is not None:
                view = memoryview(piece)
                while view:
                    view = view[os.write(fd, view) :]
        except OSError:
            pass  # the child closed its stdin (or exited): it reads nothing more
        finally:
            os.close(fd)

    threading.Thread(target=pump, name="a2e-stdin", daemon=True).start()


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
