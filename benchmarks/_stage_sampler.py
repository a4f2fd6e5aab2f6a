"""Where a server's CPU goes, by stage of a request: a sampler thread that looks at every
Python thread's stack at short intervals and counts, for each thread that was running, the
stage its stack was in.

A sampler in Python can only look while it holds the GIL, so the profiled process keeps the
switch interval short (``benchmarks._profiled_serve``): a thread running Python hands the GIL
over within it, and is seen wherever it was. A thread is counted as running when its CPU clock
(``pthread_getcpuclockid``) moved since the last sample and it is not waiting in ``select``
or on a lock; a thread whose burst ended before the sample is seen waiting, and not counted.
The stage of a stack is that of its innermost frame that says something about the request: a
general-purpose module (``json``, ``pydantic``, ``enum``, ...) is charged to its caller. The
counts give the split; the process's CPU, read by the caller, gives the milliseconds.

The snapshot is written to a file every ``WRITE_EVERY_S`` (replaced whole, by rename), so that
the profiled process needs no control channel: ``benchmarks.breakdown`` reads one before and
one after its requests.
"""

from __future__ import annotations

import collections
import json
import os
import sys
import threading
import time
from types import FrameType
from typing import Any

__all__ = ["STAGES", "StageSampler", "stage_of_module"]

#: Seconds between samples, and between snapshots written.
INTERVAL_S = 0.0005
WRITE_EVERY_S = 0.1

#: The stages of one request through the supervisor, in the order it meets them, each with the
#: modules whose code is that stage (the longest matching prefix wins).
STAGES: dict[str, tuple[str, ...]] = {
    "http and body": (
        "uvicorn", "h11", "httptools", "starlette", "anyio", "asyncio.selector_events",
        "asyncio.streams", "asyncio.sslproto", "email", "urllib",
        "a2e_engine.engine.service._app", "a2e_engine.engine.service._auth",
        "a2e_engine.engine.service._request_heads", "a2e_engine.engine.service._draining",
        "a2e_engine.engine.service._server", "a2e_engine.engine.service._metrics",
        "prometheus_client",
    ),
    "front-end request and response": (
        "a2e_engine.engine.service", "a2e_engine.engine.mcp", "mcp",
        "a2e_engine.engine.transports", "a2e._codec", "a2e.caps.tools._models",
    ),
    "session": (
        "a2e_engine.engine._session_pool", "a2e_engine.engine._host_session",
        "a2e_engine.engine._sessions", "a2e_engine.engine._session",
        "a2e_engine.engine._identities", "a2e_engine.engine._memory_bound",
        "a2e_engine.engine._resident_workers", "a2e_engine.engine._connection",
        "a2e_engine.engine._host", "a2e_engine.engine._state_dir",
    ),
    "gate, validation, retry, audit": (
        "a2e_engine.engine._calls", "a2e_engine.engine._validation",
        "a2e_engine.engine._policy", "a2e_engine.engine._registry",
        "a2e_engine.engine._retry", "a2e_engine.engine._audit", "tenacity",
        "a2e_engine.sandbox._deadline",
    ),
    "pool, slots and supply": (
        "a2e_engine.sandbox._pool", "a2e_engine.sandbox._slots",
        "a2e_engine.sandbox._supply", "a2e_engine.sandbox._zygote_link",
        "a2e_engine.sandbox._zygote_line", "a2e_engine.sandbox._launch",
        "a2e_engine.sandbox._waiting", "a2e_engine.sandbox._limits",
    ),
    "job, frames and outcome": (
        "a2e_engine.sandbox._run", "a2e_engine.sandbox._frames",
        "a2e_engine.sandbox._messages", "a2e_engine.sandbox._sharing",
        "a2e_engine.sandbox._exits", "asyncio.unix_events",
    ),
    "event loop": ("asyncio", "selectors", "concurrent", "threading", "queue", "_weakrefset"),
}  # fmt: skip

#: Modules that do work for whoever calls them: their CPU is charged to their caller.
GENERAL_PURPOSE = (
    "json", "pydantic", "pydantic_core", "typing", "typing_extensions", "enum", "functools",
    "contextlib", "dataclasses", "abc", "collections", "copy", "uuid", "weakref", "logging",
    "os", "posixpath", "genericpath", "codecs", "encodings", "re", "sre_", "string", "base64",
    "hashlib", "hmac", "secrets", "random", "traceback", "linecache", "inspect", "types",
    "operator", "datetime", "time", "annotated_types", "a2e._jsonwire", "psutil", "socket",
    "ipaddress", "struct", "signal", "stat", "shutil", "tempfile", "io", "<",
)  # fmt: skip

_PREFIXES = sorted(
    ((prefix, stage) for stage, prefixes in STAGES.items() for prefix in prefixes),
    key=lambda item: -len(item[0]),
)


def _matches(module: str, prefix: str) -> bool:
    return module == prefix or module.startswith(prefix + ".") or module.startswith(prefix + "_")


def stage_of_module(module: str) -> str | None:
    """The stage ``module``'s code belongs to; ``None`` for a general-purpose module."""
    if any(_matches(module, general) for general in GENERAL_PURPOSE):
        return None
    for prefix, stage in _PREFIXES:
        if _matches(module, prefix):
            return stage
    return "other"


def _module_of(frame: FrameType) -> str:
    return str(frame.f_globals.get("__name__", "<unknown>"))


class StageSampler:
    """Samples this process's threads until it ends; ``path`` gets a snapshot every
    ``WRITE_EVERY_S``: samples of a running thread by stage, by module and by thread."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.by_stage: collections.Counter[str] = collections.Counter()
        self.by_module: collections.Counter[str] = collections.Counter()
        self.by_thread: collections.Counter[str] = collections.Counter()
        self.samples = 0
        self._clocks: dict[int, int] = {}
        self._last: dict[int, int] = {}
        self.thread = threading.Thread(target=self._run, name="stage-sampler", daemon=True)

    def start(self) -> None:
        self.thread.start()

    def _run(self) -> None:
        me = threading.get_ident()
        written = time.monotonic()
        while True:
            time.sleep(INTERVAL_S)
            self._sample(me)
            if time.monotonic() - written >= WRITE_EVERY_S:
                self._write()
                written = time.monotonic()

    def _sample(self, me: int) -> None:
        names = {t.ident: t.name for t in threading.enumerate()}
        for ident, frame in sys._current_frames().items():
            if ident == me:
                continue
            clock = self._clocks.get(ident)
            if clock is None:
                # The clock names the thread by its kernel id: safe to read after it ends.
                clock = self._clocks[ident] = time.pthread_getcpuclockid(ident)
            try:
                now = time.clock_gettime_ns(clock)
            except OSError:
                continue
            ran = now > self._last.get(ident, now)
            self._last[ident] = now
            if not ran or _waiting(frame):
                continue
            self.samples += 1
            self.by_thread[names.get(ident, str(ident))] += 1
            stage, module = _charged(frame)
            self.by_stage[stage] += 1
            self.by_module[module] += 1

    def _write(self) -> None:
        snapshot: dict[str, Any] = {
            "sampler_tid": self.thread.native_id,
            "samples": self.samples,
            "by_stage": dict(self.by_stage),
            "by_module": dict(self.by_module),
            "by_thread": dict(self.by_thread),
        }
        temporary = f"{self.path}.{os.getpid()}.tmp"
        with open(temporary, "w") as out:
            json.dump(snapshot, out)
        os.replace(temporary, self.path)


#: Where a thread waits for something to do: (module, function) of its innermost frame.
WAITS = {
    ("selectors", "select"), ("selectors", "poll"), ("threading", "wait"),
    ("threading", "_wait_for_tstate_lock"), ("queue", "get"),
}  # fmt: skip


def _waiting(frame: FrameType) -> bool:
    return (_module_of(frame), frame.f_code.co_name) in WAITS


def _charged(frame: FrameType | None) -> tuple[str, str]:
    """The stage and module charged for a thread whose innermost frame is ``frame``."""
    innermost = frame
    while frame is not None:
        module = _module_of(frame)
        stage = stage_of_module(module)
        if stage is not None:
            return stage, module
        frame = frame.f_back
    return "other", _module_of(innermost) if innermost is not None else "<none>"
