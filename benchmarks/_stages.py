"""Where a server's CPU goes, by stage of a request, from ``py-spy``'s samples of its threads.

``py-spy record --nonblocking --gil`` reads the server's stacks from outside at a steady rate,
without stopping it, and keeps the samples of the thread that held the GIL: Python running.
Each is charged to the stage of its stack's innermost frame that says something about the
request (a frame of a general-purpose module, ``json``, ``pydantic``, ``enum``, ..., is charged
to the module that called it). The counts give the split; the process's CPU, read by the
caller, gives the milliseconds.

Two other ways were tried and mislead. A sampler thread inside the process sees the others
only where they let go of the GIL, at their system calls, and so charges the code that makes
the most of them. py-spy without ``--gil`` keeps every thread that is not waiting, and a thread
that has just woken a zygote or a worker is often not waiting but preempted by it: its system
call looked ten times its CPU. With ``--gil`` the system calls' own CPU is left out of the
split; ``a2e bench --breakdown`` shows it apart (the server's kernel time).
"""

from __future__ import annotations

import collections
import contextlib
import os
import shutil
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import IO

__all__ = ["STAGES", "StageSamples", "available", "sampled", "stage_of_module"]

#: Samples per second.
RATE = 1000
#: How long py-spy may take to write its samples and end once asked.
STOP_TIMEOUT_S = 30

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
        "a2e_engine.sandbox._supply", "a2e_engine.sandbox._zygote_control",
        "a2e_engine.sandbox._plugin_zygote", "a2e_engine.sandbox._launch",
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
    "os", "posixpath", "genericpath", "codecs", "encodings", "re", "string", "base64",
    "hashlib", "hmac", "secrets", "random", "traceback", "linecache", "inspect", "types",
    "operator", "datetime", "time", "annotated_types", "a2e._jsonwire", "psutil", "socket",
    "ipaddress", "struct", "signal", "stat", "shutil", "tempfile", "io",
)  # fmt: skip

#: The engine's folders, as a checkout's paths name them (installed: ``a2e_engine/...``).
_FOLDERS = ("engine", "sandbox", "tools", "benchmarks")

_PREFIXES = sorted(
    ((prefix, stage) for stage, prefixes in STAGES.items() for prefix in prefixes),
    key=lambda item: -len(item[0]),
)


def _matches(module: str, prefix: str) -> bool:
    """``module`` is ``prefix`` or inside it (``_session`` does not take in ``_session_pool``)."""
    return module == prefix or module.startswith(prefix + ".")


def stage_of_module(module: str) -> str | None:
    """The stage ``module``'s code belongs to; ``None`` for a general-purpose module (a frozen
    one, ``<frozen posixpath>``, included)."""
    if module.startswith("<") or any(_matches(module, general) for general in GENERAL_PURPOSE):
        return None
    for prefix, stage in _PREFIXES:
        if _matches(module, prefix):
            return stage
    return "other"


def module_of_path(path: str) -> str:
    """The module of a file as py-spy names it (relative to ``sys.path`` where it can)."""
    name = path.removesuffix(".py").removesuffix("/__init__").replace("/", ".")
    if name.split(".", 1)[0] in _FOLDERS:
        return f"a2e_engine.{name}"
    return name


@dataclass
class StageSamples:
    """Samples of the server's running threads, by stage and by the module charged."""

    by_stage: collections.Counter[str] = field(default_factory=collections.Counter)
    by_module: collections.Counter[str] = field(default_factory=collections.Counter)

    def add_raw(self, text: str) -> None:
        """py-spy's ``--format raw``: a stack per line, outermost frame first, ``;`` between
        frames (``function (path:line)``), then how many samples had it."""
        for line in text.splitlines():
            stack, _, count = line.rpartition(" ")
            if not stack or not count.isdigit():
                continue
            stage, module = _charged(stack.split(";"))
            self.by_stage[stage] += int(count)
            self.by_module[module] += int(count)


def _charged(frames: list[str]) -> tuple[str, str]:
    modules = [module_of_path(f.rpartition("(")[2].rpartition(":")[0]) for f in frames]
    for module in reversed(modules):
        stage = stage_of_module(module)
        if stage is not None:
            return stage, module
    return "other", modules[-1] if modules else "<none>"


def _py_spy() -> str | None:
    """py-spy as this interpreter's environment installed it (its ``bin`` may not be on the
    ``PATH``), or else as the ``PATH`` finds it."""
    beside = os.path.join(os.path.dirname(sys.executable), "py-spy")
    return beside if os.access(beside, os.X_OK) else shutil.which("py-spy")


def available() -> str:
    """``""`` if py-spy can sample here; else why not."""
    if _py_spy() is None:
        return "py-spy is not installed (pip install 'a2e-engine[bench]')"
    return ""


@contextlib.contextmanager
def sampled(pid: int, scratch: str) -> Iterator[StageSamples]:
    """Samples ``pid`` while the block runs (it has attached when the block starts); the
    counts are filled in when it ends."""
    output = os.path.join(scratch, "py-spy.txt")
    command = [
        _py_spy() or "py-spy", "record", "--pid", str(pid), "--rate", str(RATE), "--format", "raw",
        "--nonblocking", "--gil", "--duration", "unlimited", "--output", output,
    ]  # fmt: skip
    spy = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    assert spy.stdout is not None
    said: list[str] = []
    samples = StageSamples()
    stopped = False
    try:
        _attached(spy.stdout, said)
        # What it says from now on is read as it comes: a full pipe would stop it.
        threading.Thread(target=lambda: said.extend(spy.stdout or ()), daemon=True).start()
        yield samples
    finally:
        stopped = _stop(spy)  # whatever failed in the block is what the caller hears
    if not stopped:
        raise RuntimeError(f"py-spy did not stop within {STOP_TIMEOUT_S} s of being asked")
    if not os.path.exists(output):
        raise RuntimeError(f"py-spy wrote no samples: {' '.join(''.join(said).split())[-300:]}")
    with open(output, errors="replace") as raw:  # a frame read mid-change may be garbled
        samples.add_raw(raw.read())


def _stop(spy: subprocess.Popen[str]) -> bool:
    """py-spy asked to write its samples and end (SIGINT); False if it had not ended in
    ``STOP_TIMEOUT_S`` (it has been seen stuck reading a busy process) and was killed, so
    that the run fails in a sentence rather than waiting on it."""
    spy.send_signal(signal.SIGINT)
    try:
        spy.wait(STOP_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        spy.kill()
        spy.wait()
        return False
    return True


def _attached(lines: IO[str], said: list[str]) -> None:
    """Waits for py-spy's line saying it samples (it attaches in a fraction of a second)."""
    for line in lines:
        said.append(line)
        if "Sampling process" in line:
            return
    raise RuntimeError(f"py-spy ended before it sampled: {' '.join(''.join(said).split())[-300:]}")
