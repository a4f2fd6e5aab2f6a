"""``run_captured``: one command in the worker, its output streamed as it comes, its stdin fed,
within a time limit of its own if it has one, and nothing it started left running.

The command gets a process group of its own, killed as a whole once the command has exited or
its time is up: background jobs do not hold the call up, and what is already written is
collected. Output is decoded as UTF-8 (invalid bytes replaced) into the ``EventStream``s.
"""

from __future__ import annotations

import codecs
import os
import selectors
import signal
import subprocess
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass

from a2e_engine.tools.output import EventStream

__all__ = ["Finished", "run_captured"]

#: After the command exits, how long output already in flight may take to arrive.
DRAIN_S = 0.2


@dataclass(frozen=True)
class Finished:
    exit_code: int | None  # None: its time was up and it was killed; negative: killed by a signal
    seconds: float  # wall-clock, from start to exit (or to the kill)


def run_captured(
    argv: Sequence[str],
    cwd: str,
    env: dict[str, str],
    stdin: str | None,
    out: EventStream,
    err: EventStream,
    time_limit: float | None = None,
) -> Finished:
    started = time.monotonic()
    proc = subprocess.Popen(
        list(argv),
        cwd=cwd,
        env=env,
        stdin=subprocess.PIPE if stdin else subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,  # its own process group, killed as a whole at the end
    )
    if stdin:
        threading.Thread(target=_feed, args=(proc, stdin), daemon=True).start()
    assert proc.stdout is not None and proc.stderr is not None
    selector = selectors.DefaultSelector()
    for pipe, stream in ((proc.stdout, out), (proc.stderr, err)):
        decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        selector.register(pipe, selectors.EVENT_READ, (stream, decoder))
    give_up = started + time_limit if time_limit is not None else None
    timed_out = False
    drain_until: float | None = None
    while selector.get_map():
        now = time.monotonic()
        if drain_until is None and proc.poll() is not None:
            drain_until = now + DRAIN_S
        if drain_until is None and give_up is not None and now >= give_up:
            timed_out = True
            _kill_group(proc.pid)
            drain_until = now + DRAIN_S
        timeout = 0.05 if drain_until is None else max(0.0, drain_until - now)
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
    code = proc.wait()
    seconds = time.monotonic() - started
    _kill_group(proc.pid)  # what the command left running in its group
    for pipe in (proc.stdout, proc.stderr):
        pipe.close()
    return Finished(None if timed_out else code, seconds)


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
